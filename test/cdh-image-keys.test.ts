// The data hub's `[image] decryption_keys` for ocicrypt's pgp and pkcs7 key protocols, with images
// encrypted by Debian's skopeo (ocicrypt 1.0.3) for keys made by Debian's gpg and openssl, pulled
// through the hub's PullImage on its ttrpc socket (the hub in this process, offline_fs_kbc as its KBC):
// 1. pgp: gpg's passphrase-protected secret key (armored, `:pass=`), the same key from the KBC as
//    `pgp:kbs:///…:PASSPHRASE` (not cached on disk), and a passphrase file (`:file=`).
// 2. pkcs7: openssl's key with its certificate as a second entry, one PEM file holding both, and an
//    encrypted PKCS#8 key with its password.
// 3. A key that is not a recipient fails closed with image-rs' text and writes no layer; malformed
//    keys, wrong or missing passphrases, a stray certificate and unsupported forms fail the image
//    client's set-up with the entry named and no secret in the message or the log.
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
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
import { parseCdhConfig, startDataHub } from '@broker/data-hub';
import { DataHubClient } from '@broker/guest-api';
import { MEDIA_TYPE, requireTool } from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpgHome } from './helpers/gpg.js';
import { imageLayers } from './helpers/image-cli.js';
import { makeServerCert } from './helpers/tls.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-cdh-image-keys-'));
const { env, gpg, makeKey } = gpgHome(dir);
const run = (cmd: string, args: string[]) =>
  execFileSync(requireTool(cmd), args, { cwd: dir, stdio: 'pipe', env });
const PASSPHRASE = 'alice opens: with a colon';
const KEY_PASSWORD = 'pkcs8 password';
const SECRET = 'released to whoever holds the key\n';
let registry: RunningRegistry;

/** A gpg key pair exported as `<name>.sec.asc` (armored) and `<name>.sec.gpg`, `name` from the user id. */
function makeGpgKey(userId: string, passphrase: string): void {
  makeKey(userId, passphrase);
  const name = userId.split(' ')[0]?.toLowerCase() ?? '';
  gpg(['--armor', '--output', `${name}.sec.asc`, '--export-secret-keys', userId], passphrase);
  gpg(['--output', `${name}.sec.gpg`, '--export-secret-keys', userId], passphrase);
}

/** openssl's RSA 2048 self-signed certificate (CN=name) and key, as `<name>.crt` and `<name>.key`. */
function makeCertificate(name: string): void {
  mkdirSync(join(dir, `tls-${name}`));
  const tls = makeServerCert([name], join(dir, `tls-${name}`));
  copyFileSync(tls.keyPath, join(dir, `${name}.key`));
  copyFileSync(tls.certPath, join(dir, `${name}.crt`));
}

beforeAll(async () => {
  registry = await startDockerRegistry();
  makeGpgKey('Alice <alice@example.com>', PASSPHRASE);
  makeGpgKey('Bob <bob@example.com>', '');
  makeCertificate('recipient');
  makeCertificate('other');
  run('openssl', [
    'pkcs8',
    '-topk8',
    '-in',
    'recipient.key',
    '-out',
    'recipient.enc.key',
    '-passout',
    `pass:${KEY_PASSWORD}`,
  ]);
  writeFileSync(
    join(dir, 'recipient.bundle.pem'),
    readFileSync(join(dir, 'recipient.key'), 'utf8') + readFileSync(join(dir, 'recipient.crt'), 'utf8'),
  );
  writeFileSync(join(dir, 'passphrase.txt'), PASSPHRASE);
  writeFileSync(join(dir, 'garbage.asc'), '-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nnot a key\n');
  writeFileSync(
    join(dir, 'offline-kbc.json'),
    JSON.stringify({
      'default/image-key/alice': readFileSync(join(dir, 'alice.sec.gpg')).toString('base64'),
    }),
  );

  mkdirSync(join(dir, 'files/app'), { recursive: true });
  writeFileSync(join(dir, 'files/app/secret'), SECRET);
  run('umoci', ['init', '--layout', 'oci']);
  run('umoci', ['new', '--image', 'oci:img']);
  run('umoci', ['insert', '--image', 'oci:img', 'files/app', '/app']);
  for (const [repo, key] of [
    ['pgp', 'pgp:alice@example.com'],
    ['pkcs7', 'pkcs7:recipient.crt'],
  ]) {
    run('skopeo', [
      'copy',
      '--dest-tls-verify=false',
      '--encryption-key',
      key ?? '',
      'oci:oci:img',
      `docker://${registry.host}/${repo}/app:v1`,
    ]);
  }
}, 180_000);

afterAll(async () => {
  await registry?.stop();
  rmSync(dir, { recursive: true, force: true });
});

let hubs = 0;

/** Starts a hub with `keys` as `[image] decryption_keys`, pulls `repo/app:v1` into a new bundle, stops the hub. */
async function pullWith(
  repo: string,
  keys: readonly string[],
): Promise<{ bundle: string; digest?: string; error?: string; log: string; workDir: string }> {
  const n = ++hubs;
  const workDir = join(dir, `work-${n}`);
  const bundle = join(dir, `bundle-${n}`);
  const toml = [
    `socket = "unix://${join(dir, `cdh-${n}.sock`)}"`,
    '[aa]',
    `aa_socket = "unix://${join(dir, 'no-aa.sock')}"`,
    '[kbc]',
    'name = "offline_fs_kbc"',
    '[image]',
    `work_dir = ${JSON.stringify(workDir)}`,
    `decryption_keys = [${keys.map((k) => JSON.stringify(k)).join(', ')}]`,
    '[[image.registry_config.registry]]',
    `location = "${registry.host}"`,
    'insecure = true',
    '',
  ].join('\n');
  const config = parseCdhConfig(toml);
  const lines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => lines.push(s) });
  const hub = await startDataHub(config, {
    logger,
    credentialRoot: join(dir, `credentials-${n}`),
    offlineFsKbcFiles: [join(dir, 'offline-kbc.json')],
    env: {},
  });
  const client = await DataHubClient.connect(config.socket, { timeoutMs: 60_000 });
  try {
    const digest = await client.pullImage(`${registry.host}/${repo}/app:v1`, bundle);
    return { bundle, digest, log: lines.join(''), workDir };
  } catch (e) {
    return { bundle, error: (e as Error).message, log: lines.join(''), workDir };
  } finally {
    client.close();
    await hub.close({ graceMs: 0 });
  }
}

const file = (name: string) => join(dir, name);

function expectLayer(r: Awaited<ReturnType<typeof pullWith>>): void {
  expect(r.error).toBeUndefined();
  expect(r.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  expect(readFileSync(join(r.bundle, 'rootfs/app/secret'), 'utf8')).toBe(SECRET);
}

function expectNoLayer(r: Awaited<ReturnType<typeof pullWith>>): void {
  expect(r.digest).toBeUndefined();
  expect(existsSync(join(r.bundle, 'rootfs'))).toBe(false);
  if (existsSync(r.bundle)) expect(readdirSync(r.bundle)).toEqual([]);
}

const UNWRAP =
  'Failed to decrypt layer: Failed to decrypt the image layer, please ensure that the decryption key is placed and correct';

describe('pgp: an image skopeo encrypted with --encryption-key pgp:NAME', () => {
  it('carries only a pgp key annotation', async () => {
    const layers = await imageLayers(registry.host, 'pgp/app');
    expect(layers.map((l) => l.mediaType)).toEqual([`${MEDIA_TYPE.ociLayerGzip}+encrypted`]);
    expect(Object.keys(layers[0]?.annotations ?? {}).sort()).toEqual([
      'org.opencontainers.image.enc.keys.pgp',
      'org.opencontainers.image.enc.pubopts',
    ]);
  });

  it('is pulled with the passphrase-protected armored secret key and pass=', async () => {
    const r = await pullWith('pgp', [`pgp:${file('alice.sec.asc')}:pass=${PASSPHRASE}`]);
    expectLayer(r);
    expect(r.log).not.toContain(PASSPHRASE);
  });

  it('is pulled with the binary key from the KBC (bare passphrase), which is not cached on disk', async () => {
    const r = await pullWith('pgp', [`pgp:kbs:///default/image-key/alice:${PASSPHRASE}`]);
    expectLayer(r);
    expect(existsSync(join(r.workDir, 'image-security/kbs'))).toBe(false);
  });

  it('is pulled with a passphrase file (file=), next to keys of other protocols', async () => {
    expectLayer(
      await pullWith('pgp', [
        `pkcs7:${file('other.key')}`,
        `pgp:${file('bob.sec.gpg')}`,
        `pgp:${file('alice.sec.gpg')}:file=${file('passphrase.txt')}`,
      ]),
    );
  });

  it('fails closed with a secret key that is not a recipient', async () => {
    const r = await pullWith('pgp', [`pgp:${file('bob.sec.asc')}`]);
    expect(r.error).toContain(`${UNWRAP} (pgp: `);
    expectNoLayer(r);
  });

  it('refuses a wrong or missing passphrase and a malformed key, naming the entry', async () => {
    const wrong = await pullWith('pgp', [`pgp:${file('alice.sec.asc')}:pass=not it`]);
    expect(wrong.error).toContain(
      `Image Client error: Initialize decryption keys failed: decryption_keys entry "pgp:${file('alice.sec.asc')}:***": key: the OpenPGP secret key `,
    );
    expect(wrong.error).toContain('does not open');
    expect(wrong.error).not.toContain('not it');
    expect(wrong.log).not.toContain('not it');
    expectNoLayer(wrong);

    const missing = await pullWith('pgp', [`pgp:${file('alice.sec.gpg')}`]);
    expect(missing.error).toMatch(
      /decryption_keys entry "pgp:[^"]+alice\.sec\.gpg": key: the OpenPGP secret key [0-9A-F]{16} is passphrase-protected \(no passphrase given\)/,
    );
    const garbage = await pullWith('pgp', [`pgp:${file('garbage.asc')}`]);
    expect(garbage.error).toContain(
      `decryption_keys entry "pgp:${file('garbage.asc')}": key: not an OpenPGP secret key`,
    );
    expectNoLayer(garbage);
  });
});

describe('pkcs7: an image skopeo encrypted with --encryption-key pkcs7:cert.pem', () => {
  it('carries only a pkcs7 key annotation', async () => {
    const layers = await imageLayers(registry.host, 'pkcs7/app');
    expect(Object.keys(layers[0]?.annotations ?? {}).sort()).toEqual([
      'org.opencontainers.image.enc.keys.pkcs7',
      'org.opencontainers.image.enc.pubopts',
    ]);
  });

  it('is pulled with the private key and its certificate as entries, or one PEM holding both', async () => {
    expectLayer(
      await pullWith('pkcs7', [`pkcs7:${file('recipient.key')}`, `pkcs7:${file('recipient.crt')}`]),
    );
    expectLayer(await pullWith('pkcs7', [`pkcs7:${file('recipient.bundle.pem')}`]));
  });

  it('is pulled with an encrypted PKCS#8 key and its password', async () => {
    const r = await pullWith('pkcs7', [`pkcs7:${file('recipient.enc.key')}:pass=${KEY_PASSWORD}`]);
    expectLayer(r);
    expect(r.log).not.toContain(KEY_PASSWORD);
  });

  it('fails closed with a key that is not the recipient', async () => {
    const r = await pullWith('pkcs7', [`pkcs7:${file('other.key')}`]);
    expect(r.error).toContain(`${UNWRAP} (pkcs7: none of the RSA private keys opens the EnvelopedData)`);
    expectNoLayer(r);
  });

  it('refuses a certificate without its key, a wrong key password and unsupported forms', async () => {
    const stray = await pullWith('pkcs7', [`pkcs7:${file('other.key')}`, `pkcs7:${file('recipient.crt')}`]);
    expect(stray.error).toContain(
      `decryption_keys entry "pkcs7:${file('recipient.crt')}": the certificate CN=recipient, O=broker-test belongs to none of the pkcs7 private keys`,
    );
    expectNoLayer(stray);
    const wrong = await pullWith('pkcs7', [`pkcs7:${file('recipient.enc.key')}:pass=wrong password`]);
    expect(wrong.error).toContain(
      `decryption_keys entry "pkcs7:${file('recipient.enc.key')}:***": key: the private key does not open with the password`,
    );
    expect(wrong.error).not.toContain('wrong password');
    const bare = await pullWith('pkcs7', [`pkcs7:${file('recipient.enc.key')}`]);
    expect(bare.error).toContain('key: the private key is encrypted (no password given)');
    const pgpAsPkcs7 = await pullWith('pkcs7', [`pkcs7:${file('bob.sec.asc')}`]);
    expect(pgpAsPkcs7.error).toContain(
      `decryption_keys entry "pkcs7:${file('bob.sec.asc')}": key: not a usable`,
    );
    const fd = await pullWith('pkcs7', [`pkcs7:${file('recipient.enc.key')}:fd=3`]);
    expect(fd.error).toContain('a password from a file descriptor (fd=) is not supported here');
    const pkcs11 = await pullWith('pkcs7', [`pkcs11:${file('recipient.key')}:secret`]);
    expect(pkcs11.error).toContain(
      'decryption_keys entry "pkcs11:…": not PROTOCOL:SOURCE[:PASSWORD] with PROTOCOL jwe, pgp or pkcs7',
    );
    expect(pkcs11.error).not.toContain('secret');
  });
});
