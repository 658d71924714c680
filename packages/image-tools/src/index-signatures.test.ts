/**
 * A two-platform image on Debian's docker-registry whose only signature is
 * made on the index (as `cosign sign` of a multi-arch tag does): pulls
 * accept it by default, as image-rs does since its commit de3f6ff6; the
 * containers/image rule (`indexSignatures: false`, `--no-index-signatures`)
 * refuses it.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  buildImage,
  buildIndex,
  buildLayer,
  createSigstoreSignature,
  ImagePullError,
  MEDIA_TYPE,
  parsePolicy,
  pullImage,
  pushImage,
  pushSigstoreSignatures,
  RegistryClient,
} from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ImageCliIo, imagePolicyMain, imagePullMain } from './cli.js';

let registry: RunningRegistry;
let client: RegistryClient;
let work: string;
let signer: { publicKey: KeyObject; privateKey: KeyObject };
let other: { publicKey: KeyObject; privateKey: KeyObject };
let policyFile: string;
const digests: Record<string, string> = {};

const pem = (k: KeyObject) => k.export({ type: 'spki', format: 'pem' }).toString();
const ref = (name: string) => `${registry.host}/multi/${name}:v1`;
const AMD64 = { os: 'linux', architecture: 'amd64' } as const;
const ARM64 = { os: 'linux', architecture: 'arm64' } as const;

function policy(key: KeyObject) {
  return {
    default: [{ type: 'reject' }],
    transports: {
      docker: {
        [`${registry.host}/multi`]: [
          { type: 'sigstoreSigned', keyData: Buffer.from(pem(key)).toString('base64') },
        ],
      },
    },
  };
}

/** Pushes a two-platform image as `multi/<name>:v1`; signs its index, or its amd64 manifest. */
async function publish(name: string, sign: { index?: KeyObject; amd64?: KeyObject }): Promise<void> {
  const repo = { domain: registry.host, path: `multi/${name}` };
  const images = await Promise.all(
    [AMD64, ARM64].map(async (platform) => {
      const image = buildImage({
        layers: [await buildLayer([{ name: 'arch', content: platform.architecture }])],
        platform,
      });
      await pushImage(client, repo, platform.architecture, image);
      return { image, platform };
    }),
  );
  const index = buildIndex(images);
  await client.putManifest(repo, 'v1', index.bytes, MEDIA_TYPE.ociIndex);
  digests[`${name}/index`] = index.digest;
  for (const { image, platform } of images)
    digests[`${name}/${platform.architecture}`] = image.manifestDigest;
  const signed: [KeyObject | undefined, string][] = [
    [sign.index, index.digest],
    [sign.amd64, images[0]?.image.manifestDigest ?? ''],
  ];
  for (const [key, digest] of signed) {
    if (key === undefined) continue;
    await pushSigstoreSignatures(client, repo, digest, [
      createSigstoreSignature(key, { manifestDigest: digest, dockerReference: ref(name) }),
    ]);
  }
}

beforeAll(async () => {
  registry = await startDockerRegistry();
  client = new RegistryClient({ insecure: () => true });
  work = await mkdtemp(join(tmpdir(), 'index-signatures-'));
  signer = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  other = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  await publish('index-only', { index: signer.privateKey });
  await publish('unsigned', {});
  // The platform manifest signed by another key, the index by the right one.
  await publish('mixed', { index: signer.privateKey, amd64: other.privateKey });
  policyFile = join(work, 'policy.json');
  await writeFile(policyFile, JSON.stringify(policy(signer.publicKey)));
}, 60_000);

afterAll(async () => {
  client?.close();
  await registry?.stop();
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

let n = 0;
const bundle = () => join(work, `bundle-${n++}`);

describe('the library', () => {
  it('accepts each platform of an image signed on its index only, by default', async () => {
    for (const platform of [AMD64, ARM64]) {
      const dest = bundle();
      const r = await pullImage(ref('index-only'), dest, {
        client,
        policy: parsePolicy(JSON.stringify(policy(signer.publicKey))),
        platform,
      });
      expect(r.manifestDigest).toBe(digests[`index-only/${platform.architecture}`]);
      expect(r.indexDigest).toBe(digests['index-only/index']);
      expect(r.decision?.verdicts[0]?.signature?.dockerManifestDigest).toBe(digests['index-only/index']);
      expect(readFileSync(join(dest, 'rootfs/arch'), 'utf8')).toBe(platform.architecture);
    }
  });

  it("refuses it under containers/image's rule, and refuses an unsigned index either way", async () => {
    const p = parsePolicy(JSON.stringify(policy(signer.publicKey)));
    for (const [name, indexSignatures] of [
      ['index-only', false],
      ['unsigned', true],
      ['unsigned', false],
    ] as const) {
      const dest = bundle();
      const e = await pullImage(ref(name), dest, {
        client,
        policy: p,
        platform: AMD64,
        indexSignatures,
      }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ImagePullError);
      expect((e as ImagePullError).message).toBe(
        'Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule',
      );
      expect((e as ImagePullError).detail).toBe('A signature was required, but no signature exists');
      expect(existsSync(join(dest, 'rootfs'))).toBe(false);
    }
  });

  it("a signed platform manifest is judged by its own signatures: the index's stand in only for none", async () => {
    const p = parsePolicy(JSON.stringify(policy(signer.publicKey)));
    // amd64 is signed by another key: refused with that signature's reason alone, either rule.
    for (const indexSignatures of [true, false]) {
      const e = await pullImage(ref('mixed'), bundle(), {
        client,
        policy: p,
        platform: AMD64,
        indexSignatures,
      }).catch((x: unknown) => x);
      expect((e as ImagePullError).detail).toBe(
        'cryptographic signature verification failed: invalid signature when validating ASN.1 encoded signature',
      );
    }
    // arm64 has no signature of its own: the index's, by the right key, counts.
    const r = await pullImage(ref('mixed'), bundle(), { client, policy: p, platform: ARM64 });
    expect(r.manifestDigest).toBe(digests['mixed/arm64']);
  });
});

describe('image-pull and image-policy check', () => {
  function io() {
    const out: string[] = [];
    const err: string[] = [];
    const value: ImageCliIo = {
      stdout: (t) => out.push(t),
      stderr: (t) => err.push(t),
      env: {},
      progress: { write: () => true, isTTY: false },
    };
    return { io: value, out: () => out.join(''), err: () => err.join('') };
  }
  const common = () => ['--policy', policyFile, '--plain-http', '--platform', 'linux/amd64', '--no-progress'];

  it('accept the index signature by default; --no-index-signatures refuses it', async () => {
    const ok = io();
    expect(await imagePullMain([...common(), `docker://${ref('index-only')}`, bundle()], ok.io)).toBe(0);
    expect(ok.out()).toBe(`${digests['index-only/amd64']}\n`);
    const strict = io();
    const dest = bundle();
    expect(
      await imagePullMain(
        [...common(), '--no-index-signatures', `docker://${ref('index-only')}`, dest],
        strict.io,
      ),
    ).toBe(1);
    expect(strict.err()).toContain('reason: A signature was required, but no signature exists');
    expect(existsSync(join(dest, 'rootfs'))).toBe(false);

    const check = ['check', '--policy', policyFile, '--plain-http', '--platform', 'linux/amd64'];
    const c1 = io();
    expect(await imagePolicyMain([...check, `docker://${ref('index-only')}`], c1.io)).toBe(0);
    expect(c1.out()).toMatch(/decision: accepted\n$/);
    const c2 = io();
    expect(
      await imagePolicyMain([...check, '--no-index-signatures', `docker://${ref('index-only')}`], c2.io),
    ).toBe(1);
    expect(c2.out()).toContain('rejected: A signature was required, but no signature exists');
    const both = io();
    expect(
      await imagePolicyMain(
        [...check, '--index-signatures', '--no-index-signatures', `docker://${ref('index-only')}`],
        both.io,
      ),
    ).toBe(2);
    expect(both.err()).toContain('--index-signatures and --no-index-signatures contradict each other');
  });

  it("--policy-semantics: a policy with keyData as PEM text is image-rs' (default), not containers/image's", async () => {
    const pemPolicy = join(work, 'pem-policy.json');
    const p = policy(signer.publicKey);
    const rules = p.transports.docker[`${registry.host}/multi`] ?? [];
    for (const rule of rules) rule.keyData = pem(signer.publicKey);
    await writeFile(pemPolicy, JSON.stringify(p));
    const args = ['--policy', pemPolicy, '--plain-http', '--platform', 'linux/arm64', '--no-progress'];
    const ok = io();
    expect(await imagePullMain([...args, `docker://${ref('index-only')}`, bundle()], ok.io)).toBe(0);
    expect(ok.out()).toBe(`${digests['index-only/arm64']}\n`);
    const strict = io();
    expect(
      await imagePullMain(
        [...args, '--policy-semantics', 'containers-image', `docker://${ref('index-only')}`, bundle()],
        strict.io,
      ),
    ).toBe(1);
    expect(strict.err()).toMatch(/illegal base64 data at input byte \d+/);
    const bad = io();
    expect(
      await imagePullMain(
        [...args, '--policy-semantics', 'skopeo', `docker://${ref('index-only')}`, bundle()],
        bad.io,
      ),
    ).toBe(2);
    expect(bad.err()).toContain('--policy-semantics takes image-rs or containers-image, got "skopeo"');
  });
});
