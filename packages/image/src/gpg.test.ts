import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { loadGpgKeyring, verifyGpgSignature, verifySimpleSigning } from './gpg.js';

const CI = vector('containers-image');
const read = (f: string) => readFile(join(CI, f));
const keyring = async (...files: string[]) => loadGpgKeyring(await Promise.all(files.map(read)));

const TEST_KEY = '08CD26E446E2E95249B7A405E932F44B23E8DD43';
const IMAGE_DIGEST = 'sha256:20bf21ed457b390829cdbeec8795a7bea1626991fda603e0d01b4e7f60427e55';
const accept = { validateManifestDigest: () => {}, validateDockerReference: () => {} };

describe("containers/image's GPG fixtures (mechanism_test.go verdicts)", () => {
  it('image.signature verifies with public-key.gpg (armored) and its payload is read', async () => {
    const kr = await keyring('public-key.gpg');
    expect(kr.fingerprints).toEqual([TEST_KEY]);
    const sig = await verifySimpleSigning(kr, await read('image.signature'), accept);
    expect(sig).toEqual({
      dockerManifestDigest: IMAGE_DIGEST,
      dockerReference: 'testing/manifest',
      creator: expect.any(String),
      timestamp: expect.any(Number),
      signerFingerprint: TEST_KEY,
    });
  });

  it('binary keyrings: public-key-1.gpg holds the same key; public-key-2.gpg another', async () => {
    expect((await keyring('public-key-1.gpg')).fingerprints).toEqual([TEST_KEY]);
    await expect(
      verifyGpgSignature(await keyring('public-key-2.gpg'), await read('image.signature')),
    ).rejects.toThrow(/signed by key E932F44B23E8DD43, which is not among the trusted keys/);
    const both = await keyring('public-key-2.gpg', 'public-key-1.gpg');
    expect((await verifyGpgSignature(both, await read('image.signature'))).signerFingerprint).toBe(TEST_KEY);
  });

  it('a subkey signature maps to its primary key', async () => {
    const sig = await verifyGpgSignature(
      await keyring('public-key-with-subkey.gpg'),
      await read('subkey.signature'),
    );
    expect(sig.signerFingerprint).toBe('B9F4CDB9FD8C475BFA340AC38D54A947EE396F36');
  });

  it.each([
    ['expired.signature', 'public-key.gpg', /Signature is expired/],
    ['corrupt.signature', 'public-key.gpg', /Trailing junk found after the end of the compressed stream/],
    [
      'unknown-key.signature',
      'public-key.gpg',
      /signed by key 5F9470E3BC6C3B55, which is not among the trusted keys/,
    ],
    ['subkey-revoked.signature', 'public-key-with-revoked-subkey.gpg', /Subkey is revoked/],
    ['unsigned-literal.signature', 'public-key.gpg', /got packets \[literalData\]/],
    [
      'unsigned-encrypted.signature',
      'public-key.gpg',
      /got packets \[publicKeyEncryptedSessionKey, symEncryptedIntegrityProtectedData\]/,
    ],
  ])('%s is refused', async (sig, key, reason) => {
    await expect(verifyGpgSignature(await keyring(key), await read(sig))).rejects.toThrow(reason);
  });

  it('invalid-blob.signature verifies but its payload is not JSON', async () => {
    const kr = await keyring('public-key.gpg');
    const v = await verifyGpgSignature(kr, await read('invalid-blob.signature'));
    expect(Buffer.from(v.content).toString()).toBe('This is not JSON\n');
    await expect(verifySimpleSigning(kr, await read('invalid-blob.signature'), accept)).rejects.toThrow();
  });

  it('no-optional-fields.signature: an empty "optional" object is read (no creator, no timestamp)', async () => {
    const kr = await keyring('public-key.gpg');
    expect(await verifySimpleSigning(kr, await read('no-optional-fields.signature'), accept)).toEqual({
      dockerManifestDigest: IMAGE_DIGEST,
      dockerReference: 'testing/manifest',
      signerFingerprint: TEST_KEY,
    });
  });

  it('invalid-reference.signature: the signed reference reaches the identity rule, which decides', async () => {
    const kr = await keyring('public-key.gpg');
    const seen: string[] = [];
    await verifySimpleSigning(kr, await read('invalid-reference.signature'), {
      validateManifestDigest: () => {},
      validateDockerReference: (r) => {
        seen.push(r);
      },
    });
    expect(seen).toHaveLength(1);
  });

  it('an empty keyring imports no keys; a keyring that is not OpenPGP is an error', async () => {
    await expect(loadGpgKeyring([new Uint8Array()])).rejects.toThrow('No public keys imported');
    await expect(loadGpgKeyring([await read('image.manifest.json')])).rejects.toThrow(/^parsing GPG key 1: /);
  });
});
