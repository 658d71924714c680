// Encrypted images made by an independent producer: umoci builds a two-layer image, Debian's skopeo
// (ocicrypt 1.0.3) encrypts it with `--encryption-key jwe:pub.pem` (an openssl RSA key) into Debian's
// docker-registry, and our `image-pull --decryption-key jwe:priv.pem` pulls, decrypts and unpacks it.
// A ciphertext byte flipped (and re-pushed with a matching digest), a wrong key and a missing key each
// fail with a clear error and leave no rootfs behind; skopeo itself decrypting the same image shows
// the producer is sound.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  digestOf,
  imagePullMain,
  MEDIA_TYPE,
  parseManifest,
  RegistryClient,
  type RunningRegistry,
  requireTool,
  startDockerRegistry,
} from '@broker/image';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'broker-encrypted-image-'));
let registry: RunningRegistry;
const run = (cmd: string, args: string[]) =>
  execFileSync(requireTool(cmd), args, { cwd: dir, stdio: 'pipe' });

async function pull(args: string[]): Promise<{ status: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const status = await imagePullMain(['--no-progress', '--plain-http', ...args], {
    stdout: (s: string) => {
      out += s;
    },
    stderr: (s: string) => {
      err += s;
    },
    env: {},
  } as unknown as Parameters<typeof imagePullMain>[1]);
  return { status, out, err };
}

beforeAll(async () => {
  registry = await startDockerRegistry();
  run('openssl', ['genrsa', '-out', 'priv.pem', '2048']);
  run('openssl', ['rsa', '-in', 'priv.pem', '-pubout', '-out', 'pub.pem']);
  run('openssl', ['genrsa', '-out', 'other.pem', '2048']);
  mkdirSync(join(dir, 'files/etc'), { recursive: true });
  writeFileSync(join(dir, 'files/etc/motd'), 'hello from an encrypted layer\n');
  writeFileSync(join(dir, 'files/secret.bin'), Buffer.alloc(200_000, 'confidential '));
  run('umoci', ['init', '--layout', 'oci']);
  run('umoci', ['new', '--image', 'oci:img']);
  run('umoci', ['insert', '--image', 'oci:img', 'files/etc', '/etc']);
  run('umoci', ['insert', '--image', 'oci:img', 'files/secret.bin', '/data/secret.bin']);
  run('skopeo', [
    'copy',
    '--dest-tls-verify=false',
    '--encryption-key',
    'jwe:pub.pem',
    'oci:oci:img',
    `docker://${registry.host}/enc/app:v1`,
  ]);
}, 120_000);

afterAll(async () => {
  await registry?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function expectNoRootfs(dest: string): void {
  expect(existsSync(join(dest, 'rootfs'))).toBe(false);
  if (existsSync(dest)) expect(readdirSync(dest)).toEqual([]);
}

describe('an image skopeo encrypted with jwe:pub.pem', () => {
  it('is pulled, decrypted and unpacked by image-pull --decryption-key jwe:priv.pem', async () => {
    // What skopeo wrote: every layer encrypted, with ocicrypt's annotations.
    const client = new RegistryClient({ insecure: () => true });
    try {
      const m = await client.getManifest({ domain: registry.host, path: 'enc/app' }, 'v1');
      const manifest = parseManifest(m.bytes, m.contentType);
      if (manifest.kind !== 'manifest') throw new Error('expected a manifest');
      expect(manifest.layers.map((l) => l.mediaType)).toEqual([
        `${MEDIA_TYPE.ociLayerGzip}+encrypted`,
        `${MEDIA_TYPE.ociLayerGzip}+encrypted`,
      ]);
      expect(Object.keys(manifest.layers[0]?.annotations ?? {}).sort()).toEqual([
        'org.opencontainers.image.enc.keys.jwe',
        'org.opencontainers.image.enc.pubopts',
      ]);
    } finally {
      client.close();
    }
    const dest = join(dir, 'pulled');
    const r = await pull([
      '--decryption-key',
      `jwe:${join(dir, 'other.pem')}`,
      '--decryption-key',
      `jwe:${join(dir, 'priv.pem')}`,
      `docker://${registry.host}/enc/app:v1`,
      dest,
    ]);
    expect(r.err).not.toMatch(/image-pull: /);
    expect(r.status).toBe(0);
    expect(r.out).toMatch(/^sha256:[0-9a-f]{64}\n$/);
    expect(readFileSync(join(dest, 'rootfs/etc/motd'), 'utf8')).toBe('hello from an encrypted layer\n');
    expect(readFileSync(join(dest, 'rootfs/data/secret.bin'))).toEqual(
      Buffer.alloc(200_000, 'confidential '),
    );
  });

  it('is also what skopeo decrypts itself (the producer is sound)', () => {
    run('skopeo', [
      'copy',
      '--src-tls-verify=false',
      '--decryption-key',
      'priv.pem',
      `docker://${registry.host}/enc/app:v1`,
      'oci:decrypted:img',
    ]);
    const index = JSON.parse(readFileSync(join(dir, 'decrypted/index.json'), 'utf8')) as {
      manifests: { digest: string }[];
    };
    const digest = index.manifests[0]?.digest ?? '';
    const manifest = JSON.parse(
      readFileSync(join(dir, 'decrypted/blobs/sha256', digest.slice(7)), 'utf8'),
    ) as {
      layers: { mediaType: string }[];
    };
    expect(manifest.layers.map((l) => l.mediaType)).toEqual([
      MEDIA_TYPE.ociLayerGzip,
      MEDIA_TYPE.ociLayerGzip,
    ]);
  });

  it('fails with a wrong key and with no key, before any rootfs exists', async () => {
    const wrong = join(dir, 'wrong');
    const r = await pull([
      '--decryption-key',
      `jwe:${join(dir, 'other.pem')}`,
      `docker://${registry.host}/enc/app:v1`,
      wrong,
    ]);
    expect(r.status).toBe(1);
    expect(r.err).toContain(
      'image-pull: Errors happened when pulling image: Failed to decrypt layer: Failed to decrypt the image layer, please ensure that the decryption key is placed and correct (jwe: ',
    );
    expectNoRootfs(wrong);
    const none = join(dir, 'none');
    const n = await pull([`docker://${registry.host}/enc/app:v1`, none]);
    expect(n.status).toBe(1);
    expect(n.err).toContain("(no decryption key for the layer's key protocols (jwe); none configured)");
    expectNoRootfs(none);
  });

  it('refuses a ciphertext byte flipped and re-pushed (digest matching) on the HMAC', async () => {
    const client = new RegistryClient({ insecure: () => true });
    const repo = { domain: registry.host, path: 'enc/app' };
    try {
      const m = await client.getManifest(repo, 'v1');
      const doc = JSON.parse(Buffer.from(m.bytes).toString('utf8')) as {
        layers: { digest: string; size: number; mediaType: string }[];
      };
      const last = doc.layers[1];
      if (last === undefined) throw new Error('expected two layers');
      const blob = Buffer.from(await client.getBlobBytes(repo, { ...last }, 16 * 1024 * 1024));
      blob[blob.byteLength >> 1] = (blob[blob.byteLength >> 1] ?? 0) ^ 0x80;
      last.digest = (await client.pushBlob(repo, blob)).digest;
      expect(last.digest).toBe(digestOf(blob));
      await client.putManifest(repo, 'flipped', Buffer.from(JSON.stringify(doc)), MEDIA_TYPE.ociManifest);
    } finally {
      client.close();
    }
    const dest = join(dir, 'flipped');
    const r = await pull([
      '--decryption-key',
      `jwe:${join(dir, 'priv.pem')}`,
      `docker://${registry.host}/enc/app:flipped`,
      dest,
    ]);
    expect(r.status).toBe(1);
    expect(r.err).toContain(
      'image-pull: Errors happened when pulling image: Failed to decrypt layer: the HMAC of the encrypted layer does not match its pubopts (ciphertext altered or wrong key)',
    );
    expectNoRootfs(dest);
  });
});
