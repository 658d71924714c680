// `[image] decryption_keys` entries: ocicrypt's `FILE[:PASSWORD]` spellings behind a protocol, kbs://
// sources whose authority may hold a port, and hostile entries refused with the entry named and no
// password shown. Real keys (gpg, openssl) and skopeo-encrypted images: test/cdh-image-keys.test.ts.
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tempDir } from '../testing/helpers.js';
import {
  DecryptionKeyError,
  decryptionKeyUnwrappers,
  MAX_KEY_BYTES,
  parseDecryptionKeyEntry,
} from './decryption-keys.js';

describe('parseDecryptionKeyEntry', () => {
  it('reads ocicrypt password forms after the first colon of a path', () => {
    expect(parseDecryptionKeyEntry('pgp:/k/a.asc')).toEqual({
      protocol: 'pgp',
      source: '/k/a.asc',
      shown: 'pgp:/k/a.asc',
    });
    expect(parseDecryptionKeyEntry('pkcs7:/k/a.pem:pass=x:y')).toEqual({
      protocol: 'pkcs7',
      source: '/k/a.pem',
      password: 'pass=x:y',
      shown: 'pkcs7:/k/a.pem:***',
    });
    expect(parseDecryptionKeyEntry('jwe:/k/a.pem:file=/p').password).toBe('file=/p');
    expect(parseDecryptionKeyEntry('jwe:/k/a.pem:').password).toBe('');
  });

  it('keeps kbs:// URIs whole, a port included', () => {
    expect(parseDecryptionKeyEntry('pgp:kbs:///default/key/a:secret')).toEqual({
      protocol: 'pgp',
      source: 'kbs:///default/key/a',
      password: 'secret',
      shown: 'pgp:kbs:///default/key/a:***',
    });
    expect(parseDecryptionKeyEntry('jwe:kbs://kbs.example:8080/r/t/g').source).toBe(
      'kbs://kbs.example:8080/r/t/g',
    );
    expect(parseDecryptionKeyEntry('jwe:kbs+vault://x/r/t/g:pass=p').source).toBe('kbs+vault://x/r/t/g');
  });

  it('refuses other protocols, schemes and forms without showing what may be a password', () => {
    const refused = (entry: string) => {
      try {
        parseDecryptionKeyEntry(entry);
      } catch (e) {
        expect(e).toBeInstanceOf(DecryptionKeyError);
        return (e as Error).message;
      }
      throw new Error(`${entry} was accepted`);
    };
    expect(refused('provider:attestation-agent:secret')).toBe(
      'decryption_keys entry "provider:…": not PROTOCOL:SOURCE[:PASSWORD] with PROTOCOL jwe, pgp or pkcs7',
    );
    expect(refused('/bare/key.pem')).toContain('"/bare/key.pem": not PROTOCOL:SOURCE');
    expect(refused(':x')).toContain('decryption_keys entry ":…"');
    expect(refused(`pgp:/${'a'.repeat(100_000)}:fd=0`)).toBe(
      `decryption_keys entry "pgp:/${'a'.repeat(295)}…": a password from a file descriptor (fd=) is not supported here`,
    );
    expect(refused('pgp:')).toBe('decryption_keys entry "pgp:": no key file or kbs:// URI');
    expect(refused('pgp::pass=secret')).toBe('decryption_keys entry "pgp::***": no key file or kbs:// URI');
    expect(refused('jwe:https://example/key.pem')).toBe(
      'decryption_keys entry "jwe:https:…": only local files and kbs:// URIs',
    );
    expect(refused('jwe:/k.pem:fd=3')).toBe(
      'decryption_keys entry "jwe:/k.pem:***": a password from a file descriptor (fd=) is not supported here',
    );
  });
});

describe('decryptionKeyUnwrappers', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir('cdh-decryption-keys-'));
  });
  afterEach(() => cleanup());
  const noKbs = async (): Promise<Uint8Array> => {
    throw new Error('no KBS in this test');
  };

  it('gives one unwrapper a protocol, jwe and pkcs7 sharing an RSA key; EC keys cannot open pkcs7', async () => {
    const rsa = join(dir, 'rsa.pem');
    const ec = join(dir, 'ec.pem');
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(rsa, privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const encrypted = join(dir, 'rsa.enc.pem');
    writeFileSync(
      encrypted,
      privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'pw' }),
    );
    const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    writeFileSync(ec, p256.export({ type: 'pkcs8', format: 'pem' }));
    const unwrappers = await decryptionKeyUnwrappers(
      [`jwe:${rsa}`, `jwe:${ec}`, `pkcs7:${encrypted}:pw`, `jwe:${encrypted}:pass=pw`],
      noKbs,
    );
    expect(unwrappers.map((u) => u.protocol)).toEqual(['jwe', 'pkcs7']);
    await expect(decryptionKeyUnwrappers([`pkcs7:${ec}`], noKbs)).rejects.toThrow(
      `decryption_keys entry "pkcs7:${ec}": a ec key cannot open pkcs7 (RSA only)`,
    );
  });

  it('refuses oversized and unreadable keys, and KBS failures, naming the entry', async () => {
    const big = join(dir, 'big.pem');
    writeFileSync(big, Buffer.alloc(MAX_KEY_BYTES + 1, 0x41));
    await expect(decryptionKeyUnwrappers([`pgp:${big}`], noKbs)).rejects.toThrow(
      `decryption_keys entry "pgp:${big}": the key file ${big} is larger than ${MAX_KEY_BYTES} bytes`,
    );
    // A file that never ends is read no further than the cap.
    await expect(decryptionKeyUnwrappers(['pgp:/dev/zero'], noKbs)).rejects.toThrow(
      `decryption_keys entry "pgp:/dev/zero": the key file /dev/zero is larger than ${MAX_KEY_BYTES} bytes`,
    );
    const huge = async () => new Uint8Array(MAX_KEY_BYTES + 1);
    await expect(decryptionKeyUnwrappers(['pgp:kbs:///r/t/g'], huge)).rejects.toThrow(
      `decryption_keys entry "pgp:kbs:///r/t/g": the key is larger than ${MAX_KEY_BYTES} bytes`,
    );
    await expect(decryptionKeyUnwrappers(['pkcs7:kbs:///r/t/g:pass=x'], noKbs)).rejects.toThrow(
      'decryption_keys entry "pkcs7:kbs:///r/t/g:***": no KBS in this test',
    );
    await expect(
      decryptionKeyUnwrappers([`jwe:${join(dir, 'k.pem')}:file=${join(dir, 'absent')}`], noKbs),
    ).rejects.toThrow(`cannot read the key file ${join(dir, 'k.pem')}`);
    writeFileSync(join(dir, 'k.pem'), 'not a key');
    await expect(
      decryptionKeyUnwrappers([`jwe:${join(dir, 'k.pem')}:file=${join(dir, 'absent')}`], noKbs),
    ).rejects.toThrow(`cannot read the password file ${join(dir, 'absent')}`);
    await expect(decryptionKeyUnwrappers([`pkcs7:${join(dir, 'k.pem')}`], noKbs)).rejects.toThrow(
      `decryption_keys entry "pkcs7:${join(dir, 'k.pem')}": key: not a usable RSA or EC private key`,
    );
  });
});
