// `image-pull --decryption-key`: jwe:FILE keys and provider:attestation-agent (KEKs through the KBS
// reader) decrypt a dir: image; unusable values are refused with the value named, exit status 1.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  attestationAgentWrapper,
  buildAnnotatedImage,
  buildLayer,
  encryptLayer,
  jweWrapper,
  writeDirImage,
} from '@broker/image';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ImageCliIo, imagePullMain } from '../cli.js';

const KID = 'kbs:///default/image-kek/cli';
const kek = randomBytes(32);
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'decryption-keys-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function pull(args: string[], kbsKeyReader?: ImageCliIo['kbsKeyReader']) {
  let err = '';
  const io: ImageCliIo = {
    stdout: () => undefined,
    stderr: (s) => {
      err += s;
    },
    env: {},
    ...(kbsKeyReader !== undefined ? { kbsKeyReader } : {}),
  };
  const status = await imagePullMain(['--no-progress', ...args], io);
  return { status, err };
}

async function encryptedImage(): Promise<string> {
  const layer = await buildLayer([{ name: 'secret.txt', content: 'cli\n' }], 'gzip');
  const src = join(dir, 'image');
  const enc = await encryptLayer(layer, [jweWrapper(rsa.publicKey), attestationAgentWrapper(KID, kek)]);
  await writeDirImage(src, buildAnnotatedImage({ layers: [enc] }));
  return src;
}

describe('image-pull --decryption-key', () => {
  it('decrypts with jwe:FILE, and with provider:attestation-agent through the KBS reader', async () => {
    const src = await encryptedImage();
    const pem = join(dir, 'priv.pem');
    await writeFile(pem, rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }));
    const jwe = await pull(['--decryption-key', `jwe:${pem}`, `dir:${src}`, join(dir, 'a')]);
    expect(jwe).toMatchObject({ status: 0 });
    expect(await readFile(join(dir, 'a/rootfs/secret.txt'), 'utf8')).toBe('cli\n');
    const asked: string[] = [];
    const provider = await pull(
      ['--decryption-key', 'provider:attestation-agent', `dir:${src}`, join(dir, 'b')],
      async (uri) => {
        asked.push(uri);
        return kek;
      },
    );
    expect(provider).toMatchObject({ status: 0 });
    expect(asked).toEqual([KID]);
    expect(await readFile(join(dir, 'b/rootfs/secret.txt'), 'utf8')).toBe('cli\n');
  });

  it('without --kbs-url the provider says where the KEK would come from', async () => {
    const src = await encryptedImage();
    const r = await pull(['--decryption-key', 'provider:attestation-agent', `dir:${src}`, join(dir, 'c')]);
    expect(r.status).toBe(1);
    expect(r.err).toContain(`provider.attestation-agent: key ${KID} is a KBS resource: give --kbs-url`);
  });

  it('refuses unusable values', async () => {
    const src = await encryptedImage();
    const ed = join(dir, 'ed.pem');
    await writeFile(ed, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const cases: [string, string][] = [
      [
        'pkcs11:key.yaml',
        'image-pull: --decryption-key "pkcs11:key.yaml": protocol "pkcs11" is not supported here',
      ],
      [`pgp:${ed}`, `image-pull: --decryption-key: ${ed}: not an OpenPGP secret key`],
      [
        'provider:other',
        'image-pull: --decryption-key "provider:other": unknown key provider "other" (only attestation-agent)',
      ],
      ['jwe:', 'image-pull: --decryption-key "jwe:": no key file'],
      [
        `jwe:${join(dir, 'absent.pem')}`,
        `image-pull: --decryption-key: cannot read ${join(dir, 'absent.pem')}: no such file or directory; check the path\n`,
      ],
      [`jwe:${ed}`, `image-pull: --decryption-key: ${ed}: not a usable RSA or EC private key`],
    ];
    for (const [value, message] of cases) {
      const r = await pull(['--decryption-key', value, `dir:${src}`, join(dir, 'd')]);
      expect(r.status).toBe(1);
      expect(r.err).toContain(message);
    }
  });
});
