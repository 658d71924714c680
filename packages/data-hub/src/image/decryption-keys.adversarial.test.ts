// Hostile `decryption_keys` sources and passwords beyond decryption-keys.test.ts: files that are not
// files (a FIFO nobody writes to), passwords that must not reach a message whichever step fails.
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { closeSync, constants, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tempDir } from '../testing/helpers.js';
import { DecryptionKeyError, decryptionKeyUnwrappers, parseDecryptionKeyEntry } from './decryption-keys.js';

describe('decryption_keys against hostile sources', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  const fifos: string[] = [];
  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir('cdh-decryption-keys-adv-'));
  });
  afterEach(async () => {
    // A reader still blocked in open() (the defect) is let go, so the worker can end.
    for (const fifo of fifos.splice(0)) {
      try {
        closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
      } catch {
        // ENXIO: nobody is reading it.
      }
    }
    await cleanup();
  });
  const noKbs = async (): Promise<Uint8Array> => {
    throw new Error('no KBS in this test');
  };
  const fifo = (name: string): string => {
    const path = join(dir, name);
    execFileSync('mkfifo', [path]);
    fifos.push(path);
    return path;
  };

  it('refuses a FIFO as the key file instead of waiting forever for a writer', async () => {
    const path = fifo('key.fifo');
    await expect(decryptionKeyUnwrappers([`jwe:${path}`], noKbs)).rejects.toThrow(
      `decryption_keys entry "jwe:${path}": cannot read the key file ${path}: not a regular file (a FIFO)`,
    );
  });

  it('refuses a FIFO as the password file, the password form not shown', async () => {
    const key = join(dir, 'k.pem');
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    writeFileSync(
      key,
      privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'pw' }),
    );
    const path = fifo('password.fifo');
    await expect(decryptionKeyUnwrappers([`jwe:${key}:file=${path}`], noKbs)).rejects.toThrow(
      `decryption_keys entry "jwe:${key}:***": cannot read the password file ${path}: not a regular file (a FIFO)`,
    );
  });

  it('refuses an OpenPGP compressed packet in a key file without inflating it (a compression bomb)', async () => {
    // 16 MiB of zeros deflated to a few KiB: far below the read cap, far above it once inflated.
    const body = Buffer.concat([Buffer.of(2), deflateSync(Buffer.alloc(16 * 1024 * 1024))]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(body.length);
    // New-format packet, tag 8 (compressed data), five-octet length.
    const bomb = join(dir, 'bomb.pgp');
    writeFileSync(bomb, Buffer.concat([Buffer.of(0xc8, 0xff), length, body]));
    await expect(decryptionKeyUnwrappers([`pgp:${bomb}`], noKbs)).rejects.toThrow(
      `decryption_keys entry "pgp:${bomb}": key: not an OpenPGP secret key: Packet not allowed in this context: compressedData`,
    );
  });

  it('opens a key with a file= password of any bytes, not only UTF-8 (ocicrypt takes the bytes as they are)', async () => {
    const password = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x41, 0x0a]);
    const passwordFile = join(dir, 'password.bin');
    writeFileSync(passwordFile, password);
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const encrypted = { type: 'pkcs8', cipher: 'aes-256-cbc', passphrase: password } as const;
    const files: [string, string | Buffer][] = [
      ['k.pem', privateKey.export({ ...encrypted, format: 'pem' })],
      ['k.der', privateKey.export({ ...encrypted, format: 'der' })],
    ];
    for (const [name, bytes] of files) {
      const key = join(dir, name);
      writeFileSync(key, bytes);
      const unwrappers = await decryptionKeyUnwrappers([`jwe:${key}:file=${passwordFile}`], noKbs);
      expect(unwrappers.map((u) => u.protocol)).toEqual(['jwe']);
    }
  });

  it('never shows a pass= password, whichever step refuses the entry', async () => {
    const secret = 'Sup3r-Secret-Passphrase';
    const key = join(dir, 'k.pem');
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(
      key,
      privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'other' }),
    );
    const failures = [
      `jwe:${key}:pass=${secret}`, // wrong password
      `pgp:${key}:pass=${secret}`, // not an OpenPGP key
      `pkcs7:${join(dir, 'absent')}:pass=${secret}`, // no such file
      `jwe:kbs:///r/t/g:pass=${secret}`, // the KBS fails
      `jwe:${key}:${secret}:with:colons`, // the bare form, colons kept in the password
    ];
    for (const entry of failures) {
      const err = await decryptionKeyUnwrappers([entry], noKbs).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err, entry).toBeInstanceOf(Error);
      expect(err?.message, entry).toContain(':***');
      expect(`${err?.message} ${String((err?.cause as Error | undefined)?.message)}`).not.toContain(secret);
    }
  });
});

describe('a decryption_keys entry without its source', () => {
  it('is refused without showing the password that took the source place', () => {
    for (const entry of ['pgp:pass=Sup3r-Secret', 'jwe:file=/run/Sup3r-Secret', 'pkcs7:fd=3Sup3r-Secret']) {
      let err: unknown;
      try {
        parseDecryptionKeyEntry(entry);
      } catch (e) {
        err = e;
      }
      expect(err, entry).toBeInstanceOf(DecryptionKeyError);
      expect((err as Error).message, entry).not.toContain('Sup3r-Secret');
      expect((err as Error).message, entry).toContain('no key file or kbs:// URI before the password');
    }
  });
});
