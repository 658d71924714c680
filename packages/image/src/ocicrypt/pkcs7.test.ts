// ocicrypt's `pkcs7` key protocol against Debian's openssl: `openssl cms -decrypt` opens what
// pkcs7Wrapper makes (two recipients), pkcs7Unwrapper opens `openssl cms -encrypt` output
// (AES-256-CBC and AES-128-CBC); a key that is no recipient, and hostile DER, are refused.
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireTool } from '../registry/local-registry.js';
import { parseJwePrivateKey } from './jwe.js';
import { parseEnvelopedData, parsePkcs7Certificate, pkcs7Unwrapper, pkcs7Wrapper } from './pkcs7.js';

const dir = mkdtempSync(join(tmpdir(), 'pkcs7-'));
const OPTIONS = Buffer.from(
  JSON.stringify({
    symkey: `${'a'.repeat(43)}=`,
    digest: 'sha256:00',
    cipheroptions: { nonce: `${'b'.repeat(22)}==` },
  }),
);
const openssl = (args: string[]) => execFileSync(requireTool('openssl'), args, { cwd: dir, stdio: 'pipe' });

function makeRecipient(name: string): void {
  openssl([
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
const key = (name: string) => parseJwePrivateKey(readFileSync(join(dir, `${name}.key`)), name);
const cert = (name: string) => parsePkcs7Certificate(readFileSync(join(dir, `${name}.crt`)), name);

/** `openssl cms -encrypt` of the options to `name`, DER. */
function cmsEncrypt(name: string, cipher: string): Buffer {
  writeFileSync(join(dir, 'options.json'), OPTIONS);
  openssl([
    'cms',
    '-encrypt',
    '-binary',
    cipher,
    '-in',
    'options.json',
    '-outform',
    'DER',
    '-out',
    'enveloped.der',
    `${name}.crt`,
  ]);
  return readFileSync(join(dir, 'enveloped.der'));
}

beforeAll(() => {
  makeRecipient('alice');
  makeRecipient('bob');
  makeRecipient('eve');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('pkcs7 key protocol', () => {
  it('wraps one EnvelopedData for every certificate, which openssl cms decrypts', async () => {
    const wrapped = await pkcs7Wrapper([cert('alice'), cert('bob')]).wrap(OPTIONS);
    writeFileSync(join(dir, 'ours.der'), wrapped);
    for (const name of ['alice', 'bob']) {
      const out = openssl([
        'cms',
        '-decrypt',
        '-inform',
        'DER',
        '-in',
        'ours.der',
        '-inkey',
        `${name}.key`,
        '-recip',
        `${name}.crt`,
      ]);
      expect(out).toEqual(OPTIONS);
    }
    expect(Buffer.from((await pkcs7Unwrapper([key('bob')]).unwrap(wrapped)) as Uint8Array)).toEqual(OPTIONS);
  });

  it('unwraps what openssl cms -encrypt makes (AES-256-CBC, AES-128-CBC)', async () => {
    for (const cipher of ['-aes256', '-aes128']) {
      const blob = cmsEncrypt('alice', cipher);
      // eve's key is tried first and fails quietly (implicit rejection), then alice's opens it.
      const opened = await pkcs7Unwrapper([key('eve'), key('alice')]).unwrap(blob);
      expect(Buffer.from(opened as Uint8Array)).toEqual(OPTIONS);
    }
  });

  it('a key that is no recipient does not open it, with one message whichever way it fails', async () => {
    // With implicit rejection a wrong key of the same size yields a random content key, unless the
    // wrapped key is numerically larger than its modulus: then OpenSSL refuses it ("data too large for
    // modulus"), which depends on the random keys. A smaller key always takes that second way.
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey;
    const blob = cmsEncrypt('alice', '-aes256');
    for (const keys of [[key('eve')], [small], [small, key('eve')]]) {
      expect(await pkcs7Unwrapper(keys).unwrap(blob)).toEqual({
        failed: 'none of the RSA private keys opens the EnvelopedData',
      });
    }
  });

  it('refuses hostile or foreign DER with the reason', async () => {
    const good = cmsEncrypt('alice', '-aes256');
    const des = cmsEncrypt('alice', '-des3');
    writeFileSync(join(dir, 'options.json'), OPTIONS);
    openssl([
      'cms',
      '-sign',
      '-binary',
      '-nodetach',
      '-in',
      'options.json',
      '-signer',
      'alice.crt',
      '-inkey',
      'alice.key',
      '-outform',
      'DER',
      '-out',
      'signed.der',
    ]);
    const indefinite = Buffer.from(good);
    indefinite[1] = 0x80;
    const longLength = Buffer.from(good);
    longLength[1] = 0x84;
    const cases: [Uint8Array, RegExp][] = [
      [good.subarray(0, good.byteLength - 1), /runs past its container/],
      [Buffer.concat([good, Buffer.from([0])]), /trailing bytes after the DER item/],
      [indefinite, /indefinite length \(BER\) is not DER/],
      [longLength, /length \d+ runs past its container/],
      [des, /unsupported content encryption algorithm 1\.2\.840\.113549\.3\.7/],
      [readFileSync(join(dir, 'signed.der')), /ContentInfo: 1\.2\.840\.113549\.1\.7\.2 is not envelopedData/],
      [Buffer.from('{"json":true}'), /^the pkcs7 packet is not an EnvelopedData/],
      [Buffer.alloc(0), /truncated/],
      [Buffer.from([0x30, 0x85, 1, 0, 0, 0, 0]), /bad length/],
      [Buffer.from([0x3f, 0x01, 0x00]), /high tag numbers are not used here/],
      [Buffer.from([0x30, 0x03, 0x06, 0x01, 0x80]), /truncated OID/],
    ];
    for (const [blob, reason] of cases) {
      await expect(pkcs7Unwrapper([key('alice')]).unwrap(blob)).rejects.toThrow(reason);
    }
    expect(() => parseEnvelopedData(good)).not.toThrow();
  });

  it('wraps only for RSA certificates', () => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    writeFileSync(join(dir, 'ec.key'), ec.privateKey.export({ type: 'pkcs8', format: 'pem' }));
    openssl(['req', '-x509', '-new', '-key', 'ec.key', '-out', 'ec.crt', '-subj', '/CN=ec', '-days', '1']);
    expect(() => parsePkcs7Certificate(readFileSync(join(dir, 'ec.crt')), 'ec.crt')).toThrow(
      'ec.crt: a ec key cannot receive a pkcs7 key (RSA only)',
    );
    expect(() => parsePkcs7Certificate(Buffer.from('nope'), 'x.crt')).toThrow(
      /^x\.crt: not an X\.509 certificate/,
    );
    expect(new X509Certificate(readFileSync(join(dir, 'alice.crt'))).subject).toBe('CN=alice');
  });
});
