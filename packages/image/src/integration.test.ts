/**
 * End to end against Debian's docker-registry 2.8 on loopback, with images
 * built and signed by our own code, and interoperability with skopeo and
 * umoci (an image they build and push is pulled by us and unpacks to the same
 * tree as `umoci raw unpack`).
 *
 * The policy is the spec's shape: default reject, the workshop registry's
 * signed-images prefix verified with `kbs:///default/<signature_secret>/pub-key`,
 * and two vendor hosts verified with another key.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImage, buildIndex, buildLayer, pushImage } from './build.js';
import { MEDIA_TYPE } from './manifest.js';
import { DEFAULT_POLICY_SEMANTICS, type Policy, type PolicySemantics, parsePolicy } from './policy.js';
import { ImagePullError, pullImage } from './pull.js';
import { RegistryClient } from './registry/client.js';
import { type RunningRegistry, startDockerRegistry } from './registry/local-registry.js';
import { pushSigstoreSignatures } from './registry/signatures.js';
import { createSigstoreSignature } from './sigstore.js';
import { runTool } from './testing/tools.js';

const SIGNATURE_KEY_URI = 'kbs:///default/signature-secret/pub-key';
const VENDOR_KEY_URI = 'kbs:///default/vendor-signature-secret/pub-key';

let r1: RunningRegistry;
let r2: RunningRegistry;
let client: RegistryClient;
let work: string;
let workshopKey: { publicKey: KeyObject; privateKey: KeyObject };
let vendorKey: { publicKey: KeyObject; privateKey: KeyObject };
const keyFetches: string[] = [];

const pem = (k: KeyObject) => Buffer.from(k.export({ type: 'spki', format: 'pem' }).toString());
/** Stands in for the KBS: the two public keys of the spec's resources. */
async function readKey(uri: string): Promise<Uint8Array> {
  keyFetches.push(uri);
  if (uri === SIGNATURE_KEY_URI) return pem(workshopKey.publicKey);
  if (uri === VENDOR_KEY_URI) return pem(vendorKey.publicKey);
  throw new Error(`no such resource ${uri}`);
}

const localhost = () => `localhost:${r1.port}`;

function specPolicy(
  defaultType: 'reject' | 'insecureAcceptAnything' = 'reject',
  semantics: PolicySemantics = DEFAULT_POLICY_SEMANTICS,
): Policy {
  return parsePolicy(
    JSON.stringify({
      default: [{ type: defaultType }],
      transports: {
        docker: {
          [`${r1.host}/signed`]: [{ type: 'sigstoreSigned', keyPath: SIGNATURE_KEY_URI }],
          [localhost()]: [{ type: 'sigstoreSigned', keyPath: VENDOR_KEY_URI }],
          [r2.host]: [{ type: 'sigstoreSigned', keyPath: VENDOR_KEY_URI }],
        },
      },
    }),
    { semantics },
  );
}

async function publish(
  host: string,
  path: string,
  signer: KeyObject | undefined,
  options: { identity?: 'reference' | 'repository' } = {},
): Promise<string> {
  const layer1 = await buildLayer([
    { name: 'etc/', type: 'directory' },
    { name: 'etc/os-release', content: `ID=test\nIMAGE=${path}\n` },
    { name: 'usr/bin/', type: 'directory' },
    { name: 'usr/bin/app', content: '#!/bin/sh\necho hi\n', mode: 0o755 },
    { name: 'bin', type: 'symlink', linkname: 'usr/bin' },
    { name: 'tmp/', type: 'directory', mode: 0o1777 },
  ]);
  const layer2 = await buildLayer(
    [{ name: 'etc/.wh.os-release' }, { name: 'etc/hostname', content: 'app\n' }],
    'zstd',
  );
  const image = buildImage({ layers: [layer1, layer2], cmd: ['/bin/app'] });
  const repo = { domain: host, path };
  const digest = await pushImage(client, repo, 'v1', image);
  if (signer !== undefined) {
    const dockerReference = options.identity === 'repository' ? `${host}/${path}` : `${host}/${path}:v1`;
    await pushSigstoreSignatures(client, repo, digest, [
      createSigstoreSignature(signer, { manifestDigest: digest, dockerReference }),
    ]);
  }
  return digest;
}

beforeAll(async () => {
  [r1, r2] = await Promise.all([startDockerRegistry(), startDockerRegistry()]);
  work = await mkdtemp(join(tmpdir(), 'image-e2e-'));
  client = new RegistryClient({ insecure: () => true });
  workshopKey = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  vendorKey = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  await publish(r1.host, 'signed/app', workshopKey.privateKey);
  await publish(r1.host, 'signed/unsigned', undefined);
  await publish(r1.host, 'signed/wrongkey', vendorKey.privateKey);
  await publish(r1.host, 'signed/cosign-style', workshopKey.privateKey, { identity: 'repository' });
  await publish(r1.host, 'other/app', undefined);
  await publish(localhost(), 'vendor/app', vendorKey.privateKey);
  await publish(r2.host, 'vendor2/app', vendorKey.privateKey);
}, 60_000);

afterAll(async () => {
  client?.close();
  await Promise.all([r1?.stop(), r2?.stop()]);
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

let bundles = 0;
async function pull(reference: string, policy: Policy) {
  const bundle = join(work, `bundle-${bundles++}`);
  keyFetches.length = 0;
  const result = await pullImage(reference, bundle, { client, policy, readKey });
  return { bundle, result };
}

async function refused(reference: string, policy: Policy): Promise<ImagePullError> {
  const bundle = join(work, `bundle-${bundles++}`);
  keyFetches.length = 0;
  const e = await pullImage(reference, bundle, { client, policy, readKey }).catch((x: unknown) => x);
  if (!(e instanceof ImagePullError)) throw new Error(`expected a refusal, got ${String(e)}`);
  expect(existsSync(join(bundle, 'rootfs'))).toBe(false);
  return e;
}

describe("the spec's policy on docker-registry", () => {
  it('a signed image under the prefix is pulled, verified and unpacked (whiteout and zstd layer applied)', async () => {
    const { bundle, result } = await pull(`${r1.host}/signed/app:v1`, specPolicy());
    expect(result.decision?.scope).toBe(`${r1.host}/signed`);
    expect(keyFetches).toEqual([SIGNATURE_KEY_URI]);
    const rootfs = join(bundle, 'rootfs');
    expect(readFileSync(join(rootfs, 'bin/app'), 'utf8')).toBe('#!/bin/sh\necho hi\n');
    expect(readlinkSync(join(rootfs, 'bin'))).toBe('usr/bin');
    expect(existsSync(join(rootfs, 'etc/os-release'))).toBe(false);
    expect(readFileSync(join(rootfs, 'etc/hostname'), 'utf8')).toBe('app\n');
    expect(lstatSync(join(rootfs, 'tmp')).mode & 0o1777).toBe(0o1777);
    expect(result.manifestDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('an unsigned image under the prefix is rejected with the exact error, and no key is requested', async () => {
    const e = await refused(`${r1.host}/signed/unsigned:v1`, specPolicy());
    expect(e.message).toBe('Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule');
    expect(e.detail).toBe('A signature was required, but no signature exists');
    expect(keyFetches).toEqual([]);
  });

  it('a signature made with the wrong key is rejected', async () => {
    const e = await refused(`${r1.host}/signed/wrongkey:v1`, specPolicy());
    expect(e.message).toBe('Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule');
    expect(e.detail).toMatch(/^cryptographic signature verification failed/);
  });

  it('a cosign-style (repository-only) signature: accepted by default (image-rs), refused by containers/image semantics', async () => {
    // The spec's rule names no signedIdentity: image-rs checks no identity, so `cosign sign` signatures pass.
    const { result } = await pull(`${r1.host}/signed/cosign-style:v1`, specPolicy());
    expect(result.decision?.verdicts[0]?.signature?.dockerReference).toBe(`${r1.host}/signed/cosign-style`);
    const e = await refused(`${r1.host}/signed/cosign-style:v1`, specPolicy('reject', 'containers-image'));
    expect(e.detail).toBe(`Signature for identity "${r1.host}/signed/cosign-style" is not accepted`);
    const relaxed = parsePolicy(
      JSON.stringify({
        default: [{ type: 'reject' }],
        transports: {
          docker: {
            [`${r1.host}/signed`]: [
              {
                type: 'sigstoreSigned',
                keyPath: SIGNATURE_KEY_URI,
                signedIdentity: { type: 'matchRepository' },
              },
            ],
          },
        },
      }),
    );
    await pull(`${r1.host}/signed/cosign-style:v1`, relaxed);
  });

  it('an image from another registry path falls to the default reject', async () => {
    const e = await refused(`${r1.host}/other/app:v1`, specPolicy());
    expect(e.message).toBe(
      `Image policy rejected: Denied by policy: Policy \`reject\` rejects image ${r1.host}/other/app:v1`,
    );
    expect(keyFetches).toEqual([]);
  });

  it('both vendor hosts are verified with the vendor key', async () => {
    const a = await pull(`${localhost()}/vendor/app:v1`, specPolicy());
    expect(a.result.decision?.scope).toBe(localhost());
    expect(keyFetches).toEqual([VENDOR_KEY_URI]);
    const b = await pull(`${r2.host}/vendor2/app:v1`, specPolicy());
    expect(b.result.decision?.scope).toBe(r2.host);
  });

  it('an insecureAcceptAnything default accepts unsigned images from other registries', async () => {
    const { result } = await pull(`${r1.host}/other/app:v1`, specPolicy('insecureAcceptAnything'));
    expect(result.decision?.scope).toBeNull();
    expect(result.decision?.allowed).toBe(true);
    // The signed prefix still requires its signature.
    await refused(`${r1.host}/signed/unsigned:v1`, specPolicy('insecureAcceptAnything'));
  });

  it('multi-arch: each platform manifest is verified with its own signature', async () => {
    const mk = async (arch: string) =>
      buildImage({
        layers: [await buildLayer([{ name: 'arch', content: arch }])],
        platform: { os: 'linux', architecture: arch },
      });
    const amd = await mk('amd64');
    const arm = await mk('arm64');
    const repo = { domain: r1.host, path: 'signed/multi' };
    await pushImage(client, repo, 'amd64', amd);
    await pushImage(client, repo, 'arm64', arm);
    const index = buildIndex([
      { image: amd, platform: { os: 'linux', architecture: 'amd64' } },
      { image: arm, platform: { os: 'linux', architecture: 'arm64' } },
    ]);
    await client.putManifest(repo, 'v1', index.bytes, MEDIA_TYPE.ociIndex);
    await pushSigstoreSignatures(client, repo, arm.manifestDigest, [
      createSigstoreSignature(workshopKey.privateKey, {
        manifestDigest: arm.manifestDigest,
        dockerReference: `${r1.host}/signed/multi:v1`,
      }),
    ]);
    const bundle = join(work, 'multi-arm');
    const ok = await pullImage(`${r1.host}/signed/multi:v1`, bundle, {
      client,
      policy: specPolicy(),
      readKey,
      platform: { os: 'linux', architecture: 'arm64' },
    });
    expect(ok.manifestDigest).toBe(arm.manifestDigest);
    expect(ok.indexDigest).toBe(index.digest);
    expect(readFileSync(join(bundle, 'rootfs/arch'), 'utf8')).toBe('arm64');
    const e = await pullImage(`${r1.host}/signed/multi:v1`, join(work, 'multi-amd'), {
      client,
      policy: specPolicy(),
      readKey,
      platform: { os: 'linux', architecture: 'amd64' },
    }).catch((x: unknown) => x);
    expect((e as ImagePullError).message).toBe(
      'Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule',
    );
  });
});

function tree(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      const st = lstatSync(p);
      const rel = relative(root, p);
      if (st.isSymbolicLink()) out.push(`${rel} -> ${readlinkSync(p)}`);
      else if (st.isDirectory()) {
        out.push(`${rel}/ ${(st.mode & 0o7777).toString(8)}`);
        walk(p);
      } else out.push(`${rel} ${(st.mode & 0o7777).toString(8)} ${readFileSync(p).toString('base64')}`);
    }
  };
  walk(root);
  return out;
}

describe('interoperability with skopeo and umoci', () => {
  it('an image built by umoci and pushed by skopeo unpacks as umoci unpacks it', async () => {
    const dir = await mkdtemp(join(work, 'umoci-'));
    const layout = join(dir, 'oci');
    const files = join(dir, 'files');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(join(files, 'sub'), { recursive: true });
    await writeFile(join(files, 'sub/data.txt'), 'from umoci\n');
    await writeFile(join(files, 'top.bin'), Buffer.alloc(70_000, 3));
    const steps: string[][] = [
      ['init', '--layout', layout],
      ['new', '--image', `${layout}:img`],
      ['insert', '--image', `${layout}:img`, files, '/opt/files'],
      ['insert', '--image', `${layout}:img`, '--whiteout', '/opt/files/top.bin'],
    ];
    for (const args of steps) {
      const r = await runTool('umoci', args);
      expect(r.code, r.stderr).toBe(0);
    }
    const push = await runTool(
      'skopeo',
      ['copy', '--dest-tls-verify=false', `oci:${layout}:img`, `docker://${r1.host}/interop/app:v1`],
      {
        HOME: dir,
      },
    );
    expect(push.code, push.stderr).toBe(0);
    const reference = join(dir, 'umoci-rootfs');
    const unpack = await runTool('umoci', [
      'raw',
      'unpack',
      '--rootless',
      '--image',
      `${layout}:img`,
      reference,
    ]);
    expect(unpack.code, unpack.stderr).toBe(0);

    const ours = await pullImage(`${r1.host}/interop/app:v1`, join(dir, 'bundle'), {
      client,
      preserveOwnership: false,
    });
    expect(tree(ours.rootfs)).toEqual(tree(reference));
    expect(existsSync(join(ours.rootfs, 'opt/files/top.bin'))).toBe(false);

    // And skopeo reads what we push.
    const inspect = await runTool(
      'skopeo',
      ['inspect', '--tls-verify=false', `docker://${r1.host}/signed/app:v1`],
      { HOME: dir },
    );
    expect(inspect.code, inspect.stderr).toBe(0);
    expect(JSON.parse(inspect.stdout).Layers).toHaveLength(2);
  });
});
