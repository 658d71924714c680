// GPG simple signing through the data hub's PullImage: `sigstore_config` (image-rs' registries.d-style
// YAML naming the lookaside store) and a `signedBy` policy. The signature is made by skopeo
// (`copy --sign-by`) with a key Debian's gpg generated.
import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { buildImage, buildLayer, writeDirImage } from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCdhConfig } from '../config.js';
import { tempDir } from '../testing/helpers.js';
import { ImagePullService } from './service.js';

const run = promisify(execFile);

let registry: RunningRegistry;
let dir: string;
let cleanup: () => Promise<void>;
let gnupg: string;
let signerKey: string;
let otherKey: string;

async function gpg(...args: string[]): Promise<string> {
  const { stdout } = await run('gpg', ['--batch', '--yes', '--pinentry-mode', 'loopback', ...args], {
    env: { ...process.env, GNUPGHOME: gnupg },
  });
  return stdout;
}

async function makeKey(uid: string): Promise<string> {
  await gpg('--passphrase', '', '--quick-gen-key', uid, 'ed25519', 'sign', '1d');
  const fpr = (await gpg('--with-colons', '--list-keys', uid)).split('\n').find((l) => l.startsWith('fpr:'));
  return fpr?.split(':')[9] ?? '';
}

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('cdh-signedby-'));
  gnupg = join(dir, 'gnupg');
  await mkdir(gnupg, { mode: 0o700 });
  registry = await startDockerRegistry();
  const signer = await makeKey('Signer <s@example.test>');
  const other = await makeKey('Other <o@example.test>');
  signerKey = join(dir, 'signer.gpg');
  otherKey = join(dir, 'other.gpg');
  await gpg('--output', signerKey, '--export', signer);
  await gpg('--output', otherKey, '--export', other);
  const regd = join(dir, 'registries.d');
  await mkdir(regd);
  await writeFile(join(regd, 'd.yaml'), `default-docker:\n  sigstore-staging: file://${join(dir, 'sigs')}\n`);
  const image = join(dir, 'image');
  await writeDirImage(image, buildImage({ layers: [await buildLayer([{ name: 'a.txt', content: 'a\n' }])] }));
  await run(
    'skopeo',
    [
      '--registries.d',
      regd,
      'copy',
      '--dest-tls-verify=false',
      '--sign-by',
      signer,
      `dir:${image}`,
      `docker://${registry.host}/gpg/app:v1`,
    ],
    { env: { ...process.env, GNUPGHOME: gnupg } },
  );
}, 120_000);

afterAll(async () => {
  await registry?.stop();
  await run('gpgconf', ['--kill', 'all'], { env: { ...process.env, GNUPGHOME: gnupg } }).catch(
    () => undefined,
  );
  await cleanup?.();
});

function service(image: string): ImagePullService {
  const toml = [
    'socket = "unix:///run/cdh.sock"',
    '[kbc]',
    'name = "offline_fs_kbc"',
    '[image]',
    `work_dir = "${join(dir, 'work')}"`,
    image,
    '[[image.registry_config.registry]]',
    `prefix = "${registry.host}"`,
    `location = "${registry.host}"`,
    'insecure = true',
    '',
  ].join('\n');
  const getResource = async () => {
    throw new Error('no KBS in this test');
  };
  return new ImagePullService(parseCdhConfig(toml), { getResource }, { extendMeasurement: async () => {} });
}

const policy = (key: string) =>
  `image_security_policy = '${JSON.stringify({ default: [{ type: 'signedBy', keyType: 'GPGKeys', keyPath: key }] })}'`;

describe('PullImage with signedBy and sigstore_config', () => {
  it('accepts the skopeo-signed image with the signing key', async () => {
    const s = service(
      `${policy(signerKey)}\nsigstore_config = "default-docker:\\n  sigstore: file://${join(dir, 'sigs')}\\n"`,
    );
    try {
      const digest = await s.pullImage(`${registry.host}/gpg/app:v1`, join(dir, 'b1'));
      expect(digest).toMatch(/^sha256:/);
      expect(await readFile(join(dir, 'b1', 'rootfs', 'a.txt'), 'utf8')).toBe('a\n');
    } finally {
      s.close();
    }
  });

  it('refuses it under another key, and without sigstore_config (no signature found)', async () => {
    for (const [i, cfg] of [
      `${policy(otherKey)}\nsigstore_config = "default-docker:\\n  sigstore: file://${join(dir, 'sigs')}\\n"`,
      policy(signerKey),
    ].entries()) {
      const s = service(cfg);
      try {
        await expect(s.pullImage(`${registry.host}/gpg/app:v1`, join(dir, `r${i}`))).rejects.toThrow(
          'Image policy rejected: Denied by policy: rejected by `signedBy` rule',
        );
      } finally {
        s.close();
      }
    }
  });

  it('a sigstore_config that does not parse fails the image client', async () => {
    const s = service(`${policy(signerKey)}\nsigstore_config = "docker: [1"`);
    try {
      await expect(s.pullImage(`${registry.host}/gpg/app:v1`, join(dir, 'b3'))).rejects.toThrow(
        /Invalid simple signing sigstore config/,
      );
    } finally {
      s.close();
    }
  });
});
