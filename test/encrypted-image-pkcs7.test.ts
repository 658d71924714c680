// ocicrypt's `pkcs7` key protocol between our tools and Debian's skopeo 1.9 (ocicrypt 1.0.3, Mozilla's Go
// pkcs7: AES-128-GCM content with its non-standard GCM parameters), with an openssl certificate:
// 1. skopeo encrypts a umoci-built image with `--encryption-key pkcs7:cert.pem`; `image-pull
//    --decryption-key key.pem` (bare, as skopeo takes it, and pkcs7:key.pem) unpacks it; a key that is not
//    the recipient fails with image-rs' text and leaves no rootfs.
// 2. `image-policy encrypt --encryption-key pkcs7:cert.pem` makes an image that skopeo decrypts with
//    `--decryption-key key.pem --decryption-key cert.pem`, to the original layers.
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
import { imageLayers, runImageCli } from './helpers/image-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-encrypted-pkcs7-'));
let registry: RunningRegistry;
const run = (cmd: string, args: string[]) =>
  execFileSync(requireTool(cmd), args, { cwd: dir, stdio: 'pipe', env: { ...process.env, HOME: dir } });

beforeAll(async () => {
  registry = await startDockerRegistry();
  for (const name of ['recipient', 'other']) {
    run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-subj',
      `/CN=${name}`,
      '-days',
      '30',
    ]);
  }
  mkdirSync(join(dir, 'files/etc'), { recursive: true });
  writeFileSync(join(dir, 'files/etc/motd'), 'hello from a pkcs7-encrypted layer\n');
  run('umoci', ['init', '--layout', 'oci']);
  run('umoci', ['new', '--image', 'oci:img']);
  run('umoci', ['insert', '--image', 'oci:img', 'files/etc', '/etc']);
  run('skopeo', [
    'copy',
    '--dest-tls-verify=false',
    'oci:oci:img',
    `docker://${registry.host}/pkcs7/plain:v1`,
  ]);
  run('skopeo', [
    'copy',
    '--dest-tls-verify=false',
    '--encryption-key',
    'pkcs7:recipient.crt',
    'oci:oci:img',
    `docker://${registry.host}/pkcs7/skopeo:v1`,
  ]);
}, 180_000);

afterAll(async () => {
  await registry?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function layers(path: string) {
  return imageLayers(registry.host, path);
}

describe('an image skopeo encrypted with --encryption-key pkcs7:cert.pem', () => {
  it('is decrypted by image-pull with the private key', async () => {
    const enc = await layers('pkcs7/skopeo');
    expect(enc.map((l) => l.mediaType)).toEqual([`${MEDIA_TYPE.ociLayerGzip}+encrypted`]);
    expect(Object.keys(enc[0]?.annotations ?? {}).sort()).toEqual([
      'org.opencontainers.image.enc.keys.pkcs7',
      'org.opencontainers.image.enc.pubopts',
    ]);
    for (const [n, keys] of [
      [join(dir, 'recipient.key')],
      [join(dir, 'recipient.crt'), `pkcs7:${join(dir, 'recipient.key')}`],
    ].entries()) {
      const dest = join(dir, `pulled-${n}`);
      const r = await runImageCli(imagePullMain, [
        '--no-progress',
        '--plain-http',
        ...keys.flatMap((k) => ['--decryption-key', k]),
        `docker://${registry.host}/pkcs7/skopeo:v1`,
        dest,
      ]);
      expect(r.err).not.toMatch(/image-pull: /);
      expect(r.status).toBe(0);
      expect(readFileSync(join(dest, 'rootfs/etc/motd'), 'utf8')).toBe(
        'hello from a pkcs7-encrypted layer\n',
      );
    }
  });

  it('fails with image-rs text for a key that is not the recipient, and leaves no rootfs', async () => {
    const dest = join(dir, 'pulled-other');
    const r = await runImageCli(imagePullMain, [
      '--no-progress',
      '--plain-http',
      '--decryption-key',
      `pkcs7:${join(dir, 'other.key')}`,
      `docker://${registry.host}/pkcs7/skopeo:v1`,
      dest,
    ]);
    expect(r.status).toBe(1);
    expect(r.err).toContain(
      'Failed to decrypt the image layer, please ensure that the decryption key is placed and correct (pkcs7: none of the RSA private keys opens the EnvelopedData)',
    );
    expect(existsSync(join(dest, 'rootfs'))).toBe(false);
    if (existsSync(dest)) expect(readdirSync(dest)).toEqual([]);
  });
});

describe('image-policy encrypt --encryption-key pkcs7:cert.pem', () => {
  it('makes an image skopeo decrypts with the key and certificate', async () => {
    const r = await runImageCli(imagePolicyMain, [
      'encrypt',
      '--plain-http',
      '--encryption-key',
      `pkcs7:${join(dir, 'recipient.crt')}`,
      `docker://${registry.host}/pkcs7/plain:v1`,
      `docker://${registry.host}/pkcs7/ours:v1`,
    ]);
    expect(r.err).toBe('');
    expect(r.status).toBe(0);
    const ours = await layers('pkcs7/ours');
    expect(Object.keys(ours[0]?.annotations ?? {}).sort()).toEqual([
      'org.opencontainers.image.enc.keys.pkcs7',
      'org.opencontainers.image.enc.pubopts',
    ]);
    run('skopeo', [
      'copy',
      '--src-tls-verify=false',
      '--decryption-key',
      'recipient.key',
      '--decryption-key',
      'recipient.crt',
      `docker://${registry.host}/pkcs7/ours:v1`,
      'oci:decrypted:img',
    ]);
    const index = JSON.parse(readFileSync(join(dir, 'decrypted/index.json'), 'utf8')) as {
      manifests: { digest: string }[];
    };
    const decrypted = JSON.parse(
      readFileSync(join(dir, 'decrypted/blobs/sha256', (index.manifests[0]?.digest ?? '').slice(7)), 'utf8'),
    ) as { layers: { mediaType: string; digest: string }[] };
    const plain = await layers('pkcs7/plain');
    expect(decrypted.layers.map((l) => [l.mediaType, l.digest])).toEqual(
      plain.map((l) => [l.mediaType, l.digest]),
    );
  });
});
