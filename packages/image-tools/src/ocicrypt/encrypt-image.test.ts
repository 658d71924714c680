// `image-policy encrypt --encryption-key` values: usable recipients and each refusal, before anything
// is read from or pushed to a registry.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DecryptionKeyArgumentError, wrappersFromArguments } from '@broker/image';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ImageCliIo, imagePolicyMain } from '../cli.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'encrypt-image-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('--encryption-key', () => {
  it('makes jwe recipients from RSA and EC public keys, and attestation-agent ones from a KEK', async () => {
    const rsa = join(dir, 'rsa.pub');
    const ec = join(dir, 'ec.jwk');
    const kek = join(dir, 'kek.bin');
    await writeFile(
      rsa,
      generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }),
    );
    await writeFile(
      ec,
      JSON.stringify(generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({ format: 'jwk' })),
    );
    await writeFile(kek, randomBytes(32));
    const wrappers = await wrappersFromArguments([
      `jwe:${rsa}`,
      `jwe:${ec}`,
      `provider:attestation-agent:keyid=kbs:///default/image-kek/a::keypath=${kek}`,
    ]);
    expect(wrappers.map((w) => w.protocol)).toEqual(['jwe', 'jwe', 'provider.attestation-agent']);
  });

  it('refuses unusable values with the reason', async () => {
    const kek = join(dir, 'kek.bin');
    const short = join(dir, 'short.bin');
    const ed = join(dir, 'ed.pub');
    await writeFile(kek, randomBytes(32));
    await writeFile(short, randomBytes(16));
    await writeFile(ed, generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }));
    const cases: [string, string][] = [
      [
        'pkcs11:key.yaml',
        'use jwe:PUBLIC.pem, pgp:KEYRING, pkcs7:CERT.pem or provider:attestation-agent:keyid=kbs:///…::keypath=FILE',
      ],
      [`pgp:${join(dir, 'absent.gpg')}`, 'cannot read OpenPGP keyring'],
      [`pgp:${ed}`, 'not an OpenPGP keyring'],
      [`jwe:${join(dir, 'absent.pem')}`, 'cannot read public key'],
      [`jwe:${ed}`, 'not a usable public key: a ed25519 key cannot wrap'],
      [`provider:attestation-agent:keypath=${kek}`, 'needs keyid=kbs:///… and keypath=FILE'],
      [`provider:attestation-agent:keyid=kbs:///a/b/c::keypath=${short}`, 'has 16 bytes, expected 32'],
      [
        `provider:attestation-agent:keyid=default/image-kek/a::keypath=${kek}`,
        'malwared AnnotationPacket format: kid "default/image-kek/a"',
      ],
      [
        `provider:attestation-agent:keyid=kbs:///a/../c::keypath=${kek}`,
        'is not a kbs:///<repository>/<type>/<tag> resource URI',
      ],
    ];
    for (const [value, reason] of cases) {
      const e = await wrappersFromArguments([value]).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(DecryptionKeyArgumentError);
      expect((e as Error).message).toContain(reason);
    }
  });

  it('image-policy encrypt needs a key and two docker:// images', async () => {
    let err = '';
    const io: ImageCliIo = {
      stdout: () => undefined,
      stderr: (s) => {
        err += s;
      },
      env: {},
    };
    expect(await imagePolicyMain(['encrypt', 'docker://a/b:c', 'docker://a/d:e'], io)).toBe(2);
    expect(err).toContain('encrypt needs --encryption-key');
    err = '';
    expect(
      await imagePolicyMain(['encrypt', '--encryption-key', 'jwe:x', 'dir:/x', 'docker://a/d:e'], io),
    ).toBe(2);
    expect(err).toContain('encrypt copies docker:// images');
  });
});
