// containers/image's signedBy fixtures (signature/fixtures, GPG simple signing) give the verdicts of its
// policy_eval_signedby_test.go: the requirement is evaluated over a dir: image judged as a docker reference.
import { copyFile, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { openDirImage } from './dir-image.js';
import { evaluatePolicy } from './evaluate.js';
import { parsePolicy } from './policy.js';

const CI = vector('containers-image');
const KEY = join(CI, 'public-key.gpg');
const matchExact = { type: 'matchExact' };
const DIGEST = 'sha256:20bf21ed457b390829cdbeec8795a7bea1626991fda603e0d01b4e7f60427e55';

async function decide(dir: string, req: Record<string, unknown>, reference = 'testing/manifest:latest') {
  const policy = parsePolicy(JSON.stringify({ default: [{ type: 'signedBy', keyType: 'GPGKeys', ...req }] }));
  return evaluatePolicy(policy, await openDirImage(dir.startsWith('/') ? dir : join(CI, dir), { reference }));
}

describe("containers/image's signedBy fixtures give its verdicts", () => {
  it.each([
    ['keyPath', { keyPath: KEY }],
    ['keyPaths (same key twice)', { keyPaths: [join(CI, 'public-key-1.gpg'), join(CI, 'public-key-1.gpg')] }],
    [
      'keyPaths (another key first)',
      { keyPaths: [join(CI, 'public-key-2.gpg'), join(CI, 'public-key-1.gpg')] },
    ],
  ])('dir-img-valid is accepted with %s', async (_name, keys) => {
    const d = await decide('dir-img-valid', { ...keys, signedIdentity: matchExact });
    expect(d.allowed, d.reason).toBe(true);
    expect(d.verdicts[0]?.signature).toMatchObject({
      dockerManifestDigest: DIGEST,
      dockerReference: 'testing/manifest:latest',
    });
  });

  it('dir-img-valid is accepted with keyData (base64 of the keyring) and the default identity rule', async () => {
    const keyData = (await readFile(KEY)).toString('base64');
    expect((await decide('dir-img-valid', { keyData })).allowed).toBe(true);
  });

  it('another tag than the signed one is rejected', async () => {
    const d = await decide(
      'dir-img-valid',
      { keyPath: KEY, signedIdentity: matchExact },
      'testing/manifest:notlatest',
    );
    expect(d.reason).toBe('Signature for identity "testing/manifest:latest" is not accepted');
  });

  it('an exactReference naming another image is rejected', async () => {
    const d = await decide('dir-img-valid', {
      keyPath: KEY,
      signedIdentity: { type: 'exactReference', dockerReference: 'this/does-not:match' },
    });
    expect(d.reason).toBe('Signature for identity "testing/manifest:latest" is not accepted');
  });

  it('a key that did not sign is rejected', async () => {
    const d = await decide('dir-img-valid', { keyPath: join(CI, 'public-key-2.gpg') });
    expect(d.allowed).toBe(false);
    expect(d.reason).toMatch(/signed by key E932F44B23E8DD43, which is not among the trusted keys/);
  });

  it('a modified manifest is rejected', async () => {
    const d = await decide('dir-img-modified-manifest', { keyPath: KEY, signedIdentity: matchExact });
    expect(d.reason).toBe(`Signature for digest ${DIGEST} does not match`);
  });

  it('a missing manifest (dir-img-no-manifest) is a reason', async () => {
    const d = await decide('dir-img-no-manifest', { keyPath: KEY, signedIdentity: matchExact });
    expect(d.allowed).toBe(false);
    expect(d.reason).toMatch(/^open .*dir-img-no-manifest\/manifest.json: no such file or directory$/);
  });

  it('a schema 1 manifest with broken signatures (dir-img-manifest-digest-error) is rejected', async () => {
    const d = await decide('dir-img-manifest-digest-error', { keyPath: KEY, signedIdentity: matchExact });
    expect(d.allowed).toBe(false);
    expect(d.reason).toBe(`Signature for digest ${DIGEST} does not match`);
  });

  it('an unsigned image is rejected', async () => {
    const d = await decide('dir-img-unsigned', { keyPath: KEY, signedIdentity: matchExact });
    expect(d.reason).toBe('A signature was required, but no signature exists');
  });

  it('two valid signatures (dir-img-valid-2) and invalid-then-valid (dir-img-mixed) are accepted', async () => {
    expect((await decide('dir-img-valid-2', { keyPath: KEY, signedIdentity: matchExact })).allowed).toBe(
      true,
    );
    expect((await decide('dir-img-mixed', { keyPath: KEY, signedIdentity: matchExact })).allowed).toBe(true);
    const other = await decide(
      'dir-img-valid-2',
      { keyPath: KEY, signedIdentity: matchExact },
      'testing/manifest:notlatest',
    );
    expect(other.reason).toMatch(/^None of the signatures were accepted, reasons: /);
  });

  it('a subkey signature is accepted under its primary key (dir-img-valid-subkey)', async () => {
    const d = await decide('dir-img-valid-subkey', {
      keyPath: join(CI, 'public-key-with-subkey.gpg'),
      signedIdentity: matchExact,
    });
    expect(d.allowed, d.reason).toBe(true);
  });

  it('a missing key file is a reason; keys are not read for an unsigned image', async () => {
    expect((await decide('dir-img-valid', { keyPath: '/this/does/not/exist' })).reason).toBe(
      'open /this/does/not/exist: no such file or directory',
    );
    const reads: string[] = [];
    const policy = parsePolicy(
      JSON.stringify({ default: [{ type: 'signedBy', keyType: 'GPGKeys', keyPath: 'kbs:///a/b/c' }] }),
    );
    const image = await openDirImage(join(CI, 'dir-img-unsigned'), { reference: 'testing/manifest:latest' });
    await evaluatePolicy(policy, image, {
      readKey: async (p) => {
        reads.push(p);
        return new Uint8Array();
      },
    });
    expect(reads).toEqual([]);
  });

  it('a keyType other than GPGKeys is rejected as unimplemented', async () => {
    const d = await decide('dir-img-valid', { keyType: 'X509Certificates', keyPath: KEY });
    expect(d.reason).toBe('Unimplemented "keyType" value "X509Certificates"');
  });

  it('a signature blob that is not OpenPGP is a reason', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'signedby-'));
    await copyFile(join(CI, 'image.manifest.json'), join(dir, 'manifest.json'));
    await writeFile(
      join(dir, 'signature-1'),
      Buffer.concat([Buffer.from([0x00]), Buffer.from('simple-signing\ninvalid signature')]),
    );
    const d = await decide(dir, { keyPath: KEY });
    expect(d.reason).toMatch(/^Invalid GPG signature: /);
  });
});
