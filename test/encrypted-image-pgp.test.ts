// ocicrypt's `pgp` key protocol between our tools and Debian's skopeo 1.9 (ocicrypt 1.0.3, Go's OpenPGP),
// with keys made by Debian's gpg:
// 1. skopeo encrypts a umoci-built image with `--encryption-key pgp:alice@example.com` (gpg's keyring);
//    `image-pull --decryption-key` with the secret key gpg exports (bare file, as skopeo takes it, and
//    pgp:FILE) unpacks it; a key that is not a recipient fails with image-rs' text and leaves no rootfs.
// 2. `image-policy encrypt --encryption-key pgp:pub.gpg` (and pgp:NAME through gpg's keyring, next to a
//    jwe recipient) makes an image that skopeo decrypts with the exported secret key, to the original layers.
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
import { MEDIA_TYPE, requireTool } from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { imagePolicyMain, imagePullMain } from '@broker/image-tools';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpgHome } from './helpers/gpg.js';
import { imageLayers, runImageCli } from './helpers/image-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-encrypted-pgp-'));
const { home: gnupg, env, gpg, makeKey } = gpgHome(dir);
let registry: RunningRegistry;
const run = (cmd: string, args: string[]) =>
  execFileSync(requireTool(cmd), args, { cwd: dir, stdio: 'pipe', env });

beforeAll(async () => {
  registry = await startDockerRegistry();
  makeKey('Alice <alice@example.com>');
  makeKey('Bob <bob@example.com>');
  gpg(['--output', 'alice.pub.gpg', '--export', 'alice@example.com']);
  gpg(['--output', 'alice.sec.gpg', '--export-secret-keys', 'alice@example.com']);
  gpg(['--output', 'bob.sec.gpg', '--export-secret-keys', 'bob@example.com']);
  run('openssl', ['genrsa', '-out', 'jwe.pem', '2048']);
  run('openssl', ['rsa', '-in', 'jwe.pem', '-pubout', '-out', 'jwe.pub.pem']);
  mkdirSync(join(dir, 'files/etc'), { recursive: true });
  writeFileSync(join(dir, 'files/etc/motd'), 'hello from a pgp-encrypted layer\n');
  run('umoci', ['init', '--layout', 'oci']);
  run('umoci', ['new', '--image', 'oci:img']);
  run('umoci', ['insert', '--image', 'oci:img', 'files/etc', '/etc']);
  run('skopeo', ['copy', '--dest-tls-verify=false', 'oci:oci:img', `docker://${registry.host}/pgp/plain:v1`]);
  run('skopeo', [
    'copy',
    '--dest-tls-verify=false',
    '--encryption-key',
    'pgp:alice@example.com',
    'oci:oci:img',
    `docker://${registry.host}/pgp/skopeo:v1`,
  ]);
}, 180_000);

afterAll(async () => {
  await registry?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function layers(path: string) {
  return imageLayers(registry.host, path);
}

describe('an image skopeo encrypted with --encryption-key pgp:NAME', () => {
  it('is decrypted by image-pull with the secret key gpg exports', async () => {
    const enc = await layers('pgp/skopeo');
    expect(enc.map((l) => l.mediaType)).toEqual([`${MEDIA_TYPE.ociLayerGzip}+encrypted`]);
    expect(Object.keys(enc[0]?.annotations ?? {}).sort()).toEqual([
      'org.opencontainers.image.enc.keys.pgp',
      'org.opencontainers.image.enc.pubopts',
    ]);
    for (const [n, key] of [join(dir, 'alice.sec.gpg'), `pgp:${join(dir, 'alice.sec.gpg')}`].entries()) {
      const dest = join(dir, `pulled-${n}`);
      const r = await runImageCli(imagePullMain, [
        '--no-progress',
        '--plain-http',
        '--decryption-key',
        key,
        `docker://${registry.host}/pgp/skopeo:v1`,
        dest,
      ]);
      expect(r.err).not.toMatch(/image-pull: /);
      expect(r.status).toBe(0);
      expect(readFileSync(join(dest, 'rootfs/etc/motd'), 'utf8')).toBe('hello from a pgp-encrypted layer\n');
    }
  });

  it('fails with image-rs text for a key that is not a recipient, and leaves no rootfs', async () => {
    const dest = join(dir, 'pulled-bob');
    const r = await runImageCli(imagePullMain, [
      '--no-progress',
      '--plain-http',
      '--decryption-key',
      join(dir, 'bob.sec.gpg'),
      `docker://${registry.host}/pgp/skopeo:v1`,
      dest,
    ]);
    expect(r.status).toBe(1);
    expect(r.err).toContain(
      'Failed to decrypt layer: Failed to decrypt the image layer, please ensure that the decryption key is placed and correct (pgp: ',
    );
    expect(existsSync(join(dest, 'rootfs'))).toBe(false);
    if (existsSync(dest)) expect(readdirSync(dest)).toEqual([]);
  });
});

describe('image-policy encrypt --encryption-key pgp:…', () => {
  const skopeoDecrypt = (repo: string, key: string, layout: string) => {
    run('skopeo', [
      'copy',
      '--src-tls-verify=false',
      '--decryption-key',
      key,
      `docker://${registry.host}/${repo}:v1`,
      `oci:${layout}:img`,
    ]);
    const index = JSON.parse(readFileSync(join(dir, layout, 'index.json'), 'utf8')) as {
      manifests: { digest: string }[];
    };
    return (
      JSON.parse(
        readFileSync(join(dir, layout, 'blobs/sha256', (index.manifests[0]?.digest ?? '').slice(7)), 'utf8'),
      ) as { layers: { mediaType: string; digest: string }[] }
    ).layers;
  };

  it('makes an image skopeo decrypts with the exported secret key', async () => {
    const r = await runImageCli(imagePolicyMain, [
      'encrypt',
      '--plain-http',
      '--encryption-key',
      `pgp:${join(dir, 'alice.pub.gpg')}`,
      `docker://${registry.host}/pgp/plain:v1`,
      `docker://${registry.host}/pgp/ours:v1`,
    ]);
    expect(r.err).toBe('');
    expect(r.status).toBe(0);
    const plain = await layers('pgp/plain');
    const ours = await layers('pgp/ours');
    expect(Object.keys(ours[0]?.annotations ?? {}).sort()).toEqual([
      'org.opencontainers.image.enc.keys.pgp',
      'org.opencontainers.image.enc.pubopts',
    ]);
    expect(
      skopeoDecrypt('pgp/ours', join(dir, 'alice.sec.gpg'), 'decrypted-ours').map((l) => [
        l.mediaType,
        l.digest,
      ]),
    ).toEqual(plain.map((l) => [l.mediaType, l.digest]));
  });

  it('reads pgp:NAME from gpg keyring next to a jwe recipient; skopeo opens it with either key', async () => {
    const saved = process.env.GNUPGHOME;
    process.env.GNUPGHOME = gnupg;
    let r: Awaited<ReturnType<typeof runImageCli>>;
    try {
      r = await runImageCli(imagePolicyMain, [
        'encrypt',
        '--plain-http',
        '--encryption-key',
        'pgp:alice@example.com',
        '--encryption-key',
        `jwe:${join(dir, 'jwe.pub.pem')}`,
        `docker://${registry.host}/pgp/plain:v1`,
        `docker://${registry.host}/pgp/both:v1`,
      ]);
      const missing = await runImageCli(imagePolicyMain, [
        'encrypt',
        '--plain-http',
        '--encryption-key',
        'pgp:nobody@example.com',
        `docker://${registry.host}/pgp/plain:v1`,
        `docker://${registry.host}/pgp/none:v1`,
      ]);
      expect(missing.status).toBe(1);
      expect(missing.err).toContain(
        'image-policy encrypt: --encryption-key pgp:nobody@example.com: not a file, and gpg --export found no key',
      );
    } finally {
      if (saved === undefined) delete process.env.GNUPGHOME;
      else process.env.GNUPGHOME = saved;
    }
    expect(r.err).toBe('');
    expect(r.status).toBe(0);
    const plainDigests = (await layers('pgp/plain')).map((l) => l.digest);
    expect(
      skopeoDecrypt('pgp/both', join(dir, 'alice.sec.gpg'), 'decrypted-pgp').map((l) => l.digest),
    ).toEqual(plainDigests);
    expect(skopeoDecrypt('pgp/both', join(dir, 'jwe.pem'), 'decrypted-jwe').map((l) => l.digest)).toEqual(
      plainDigests,
    );
  });
});
