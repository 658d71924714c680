import {
  createCipheriv,
  createPublicKey,
  constants as cryptoConstants,
  generateKeyPairSync,
  type KeyObject,
  publicEncrypt,
  randomBytes,
} from 'node:crypto';
import * as jose from 'jose';
import { describe, expect, it } from 'vitest';
import { JweDecryptionFailed, JweInvalid, JweNotSupported, ProtocolError } from './errors.js';
import {
  concatKdf,
  generateTeeKeyPair,
  type Jwe,
  jweDecrypt,
  jweEncrypt,
  parseProtectedHeader,
  serializeProtectedHeader,
  teePrivateKeyFromPem,
  teePubKeyFromPrivateKey,
  upstreamAad,
} from './jwe.js';
import { parseTeePubKey, type TeePubKey } from './jwk.js';

const plaintext = new TextEncoder().encode('this is a test data');

const p256 = generateTeeKeyPair('ECDH-ES+A256KW-P256');
const p521 = generateTeeKeyPair('ECDH-ES+A256KW-P521');
const rsa = generateTeeKeyPair('RSA-OAEP-256');
const rsa15 = generateTeeKeyPair('RSA1_5');

function headerText(jwe: Jwe): string {
  return Buffer.from(jwe.protected, 'base64url').toString('utf8');
}

/** Hand-built JWE with an arbitrary protected string and AAD (for the RSA algorithms). */
function handmade(
  protectedJson: string,
  publicKey: KeyObject,
  padding: number,
  opts: { aad?: string; cek?: Buffer } = {},
): Jwe {
  const cek = opts.cek ?? randomBytes(32);
  const encryptedKey = publicEncrypt(
    padding === cryptoConstants.RSA_PKCS1_OAEP_PADDING
      ? { key: publicKey, padding, oaepHash: 'sha256' }
      : { key: publicKey, padding },
    cek,
  );
  const protectedB64 = Buffer.from(protectedJson).toString('base64url');
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', cek.length === 32 ? cek : randomBytes(32), iv);
  c.setAAD(Buffer.from(opts.aad ?? protectedB64, 'ascii'));
  const ciphertext = Buffer.concat([c.update(plaintext), c.final()]);
  return {
    protected: protectedB64,
    encrypted_key: encryptedKey.toString('base64url'),
    iv: iv.toString('base64url'),
    ciphertext: ciphertext.toString('base64url'),
    tag: c.getAuthTag().toString('base64url'),
  };
}

function flip(b64: string, index = 0): string {
  const b = Buffer.from(b64, 'base64url');
  b[index] = (b[index] ?? 0) ^ 1;
  return b.toString('base64url');
}

describe('protected header serialization', () => {
  it('matches the kbs-types AAD vector', () => {
    const header = { alg: 'fakealg', enc: 'fakeenc' };
    expect(serializeProtectedHeader(header)).toBe('{"alg":"fakealg","enc":"fakeenc"}');
    expect(upstreamAad(header).toString('ascii')).toBe('eyJhbGciOiJmYWtlYWxnIiwiZW5jIjoiZmFrZWVuYyJ9');
  });

  it('matches the kbs-types serialize_response vector with an extra member', () => {
    const header = { alg: 'fakealg', enc: 'fakeenc', fakefield: 'fakevalue' };
    expect(upstreamAad(header).toString('ascii')).toBe(
      'eyJhbGciOiJmYWtlYWxnIiwiZW5jIjoiZmFrZWVuYyIsImZha2VmaWVsZCI6ImZha2V2YWx1ZSJ9',
    );
  });

  it('parses the kbs-types nested header vector (trailing newline) and re-serializes it canonically', () => {
    const header = parseProtectedHeader(
      'eyJhbGciOiJmYWtlYWxnIiwiZW5jIjoiZmFrZWVuYyIsImVwayI6eyJrdHkiOiJPS1AiLCJjcnYiOiJYMjU1MTkiLCJ4IjoiaFNEd0NZa3dwMVIwaTMzY3RENzNXZzJfT2cwbU9CcjA2NlNwanFxYlRtbyJ9fQo',
    );
    expect(header).toEqual({
      alg: 'fakealg',
      enc: 'fakeenc',
      epk: { kty: 'OKP', crv: 'X25519', x: 'hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo' },
    });
    expect(serializeProtectedHeader(header)).toBe(
      '{"alg":"fakealg","enc":"fakeenc","epk":{"crv":"X25519","kty":"OKP","x":"hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo"}}',
    );
  });

  it('puts alg and enc first, then other members sorted by UTF-8 bytes', () => {
    expect(
      serializeProtectedHeader({
        zz: 1,
        enc: 'e',
        b: [true, null],
        alg: 'a',
        '\u00e9': 'x',
        'é\ud83d\ude00': 2,
      }),
    ).toBe('{"alg":"a","enc":"e","b":[true,null],"zz":1,"\u00e9":"x","é\ud83d\ude00":2}');
  });

  it.each([
    ['not base64url', '***'],
    ['padded base64', 'eyJhbGciOiJmYWtlYWxnIiwiZW5jIjoiZmFrZWVuYyJ9=='],
    ['not JSON', Buffer.from('{alg').toString('base64url')],
    ['a JSON array', Buffer.from('[]').toString('base64url')],
    ['alg missing', Buffer.from('{"enc":"A256GCM"}').toString('base64url')],
    ['alg not a string', Buffer.from('{"alg":1,"enc":"A256GCM"}').toString('base64url')],
    ['enc missing', Buffer.from('{"alg":"RSA-OAEP-256"}').toString('base64url')],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0x7d]).toString('base64url')],
    ['oversize', 'A'.repeat(16 * 1024 + 4)],
  ])('rejects a protected header that is %s', (_n, b64) => {
    expect(() => parseProtectedHeader(b64)).toThrow(JweInvalid);
  });
});

describe('jweEncrypt', () => {
  it('writes the ECDH-ES+A256KW header in serde order with a P-256 epk', () => {
    const jwe = jweEncrypt(plaintext, p256.publicJwk);
    expect(Object.keys(jwe)).toEqual(['protected', 'encrypted_key', 'iv', 'ciphertext', 'tag']);
    expect(headerText(jwe)).toMatch(
      /^\{"alg":"ECDH-ES\+A256KW","enc":"A256GCM","epk":\{"crv":"P-256","kty":"EC","x":"[A-Za-z0-9_-]{43}","y":"[A-Za-z0-9_-]{43}"\}\}$/,
    );
    expect(Buffer.from(jwe.encrypted_key, 'base64url')).toHaveLength(40);
    expect(Buffer.from(jwe.iv, 'base64url')).toHaveLength(12);
    expect(Buffer.from(jwe.tag, 'base64url')).toHaveLength(16);
    for (const v of Object.values(jwe)) expect(v).toMatch(/^[A-Za-z0-9_-]*$/);
  });

  it('writes a P-521 epk with 66-byte coordinates', () => {
    const jwe = jweEncrypt(plaintext, p521.publicJwk);
    expect(headerText(jwe)).toMatch(
      /^\{"alg":"ECDH-ES\+A256KW","enc":"A256GCM","epk":\{"crv":"P-521","kty":"EC","x":"[A-Za-z0-9_-]{88}","y":"[A-Za-z0-9_-]{88}"\}\}$/,
    );
  });

  it('writes the RSA-OAEP-256 header', () => {
    const jwe = jweEncrypt(plaintext, rsa.publicJwk);
    expect(headerText(jwe)).toBe('{"alg":"RSA-OAEP-256","enc":"A256GCM"}');
    expect(Buffer.from(jwe.encrypted_key, 'base64url')).toHaveLength(256);
  });

  it('uses a fresh CEK, IV and ephemeral key every time', () => {
    const a = jweEncrypt(plaintext, p256.publicJwk);
    const b = jweEncrypt(plaintext, p256.publicJwk);
    expect(a.protected).not.toBe(b.protected);
    expect(a.iv).not.toBe(b.iv);
    expect(a.ciphertext).not.toBe(b.ciphertext);
  });

  it('refuses RSA1_5 (decryption only), unknown algs and P-384', () => {
    expect(() => jweEncrypt(plaintext, rsa15.publicJwk)).toThrow(JweNotSupported);
    expect(() => jweEncrypt(plaintext, { ...rsa.publicJwk, alg: 'RSA-OAEP' })).toThrow(JweNotSupported);
    expect(() => jweEncrypt(plaintext, { ...p256.publicJwk, alg: 'ECDH-ES' })).toThrow(JweNotSupported);
    const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).publicKey.export({ format: 'jwk' });
    expect(() =>
      jweEncrypt(plaintext, {
        kty: 'EC',
        crv: 'P-384',
        alg: 'ECDH-ES+A256KW',
        x: p384.x ?? '',
        y: p384.y ?? '',
      }),
    ).toThrow(JweNotSupported);
  });

  it('refuses a recipient key that is not a valid TeePubKey', () => {
    expect(() => jweEncrypt(plaintext, { ...p256.publicJwk, x: 'AAAA' } as TeePubKey)).toThrow(ProtocolError);
  });
});

describe('round trips', () => {
  it.each([
    ['ECDH-ES+A256KW P-256', p256],
    ['ECDH-ES+A256KW P-521', p521],
    ['RSA-OAEP-256', rsa],
  ])('%s: jweEncrypt → jweDecrypt', (_n, kp) => {
    const jwe = JSON.parse(JSON.stringify(jweEncrypt(plaintext, kp.publicJwk)));
    expect(jweDecrypt(jwe, kp.privateKey).toString()).toBe('this is a test data');
  });

  it('handles an empty and a large plaintext', () => {
    expect(jweDecrypt(jweEncrypt(new Uint8Array(0), p256.publicJwk), p256.privateKey)).toHaveLength(0);
    const big = randomBytes(1024 * 1024);
    expect(jweDecrypt(jweEncrypt(big, p256.publicJwk), p256.privateKey).equals(big)).toBe(true);
  });

  it.each([
    ['ECDH-ES+A256KW P-256', p256],
    ['ECDH-ES+A256KW P-521', p521],
    ['RSA-OAEP-256', rsa],
  ])('%s: jweEncrypt → jose.flattenedDecrypt', async (_n, kp) => {
    const jwe = jweEncrypt(plaintext, kp.publicJwk);
    const out = await jose.flattenedDecrypt(jwe, kp.privateKey);
    expect(new TextDecoder().decode(out.plaintext)).toBe('this is a test data');
    expect(out.protectedHeader?.enc).toBe('A256GCM');
  });

  it('RSA-OAEP-256: jose FlattenedEncrypt → jweDecrypt (jose writes alg, enc in serde order)', async () => {
    const jwe = await new jose.FlattenedEncrypt(plaintext)
      .setProtectedHeader({ alg: 'RSA-OAEP-256', enc: 'A256GCM' })
      .encrypt(createPublicKey(rsa.privateKey));
    expect(jweDecrypt(jwe, rsa.privateKey).toString()).toBe('this is a test data');
  });

  it.each([
    ['P-256', p256],
    ['P-521', p521],
  ])('ECDH-ES+A256KW %s: jose FlattenedEncrypt → jweDecrypt', async (_n, kp) => {
    const jwe = await new jose.FlattenedEncrypt(plaintext)
      .setProtectedHeader({ alg: 'ECDH-ES+A256KW', enc: 'A256GCM' })
      .encrypt(createPublicKey(kp.privateKey));
    // RFC 7516 AAD (the received protected string) decrypts jose's output…
    expect(jweDecrypt(jwe, kp.privateKey, { aadSource: 'protected' }).toString()).toBe('this is a test data');
    // …while the upstream guest's re-serialized AAD does not whenever jose's
    // epk member order (x, crv, kty, y) differs from serde's (crv, kty, x, y).
    const sent = jwe.protected ?? '';
    const reordered = serializeProtectedHeader(parseProtectedHeader(sent));
    expect(reordered).not.toBe(Buffer.from(sent, 'base64url').toString());
    expect(() => jweDecrypt(jwe, kp.privateKey)).toThrow(JweDecryptionFailed);
  });

  it('RSA1_5: decrypts a hand-built JWE (as trustee still sends for RSA1_5 keys)', () => {
    const pub = createPublicKey(rsa15.privateKey);
    const jwe = handmade('{"alg":"RSA1_5","enc":"A256GCM"}', pub, cryptoConstants.RSA_PKCS1_PADDING);
    expect(jweDecrypt(jwe, rsa15.privateKey).toString()).toBe('this is a test data');
  });

  it('RSA1_5: bad padding or a wrong-length CEK ends in the same failure', () => {
    const pub = createPublicKey(rsa15.privateKey);
    const jwe = handmade('{"alg":"RSA1_5","enc":"A256GCM"}', pub, cryptoConstants.RSA_PKCS1_PADDING);
    expect(() =>
      jweDecrypt({ ...jwe, encrypted_key: flip(jwe.encrypted_key, 100) }, rsa15.privateKey),
    ).toThrow(JweDecryptionFailed);
    const short = handmade('{"alg":"RSA1_5","enc":"A256GCM"}', pub, cryptoConstants.RSA_PKCS1_PADDING, {
      cek: randomBytes(16),
    });
    expect(() => jweDecrypt(short, rsa15.privateKey)).toThrow(JweDecryptionFailed);
  });
});

describe('AAD source', () => {
  const pub = createPublicKey(rsa.privateKey);
  const oaep = cryptoConstants.RSA_PKCS1_OAEP_PADDING;

  it('default (upstream guest): a header in another member order fails even though it authenticates as sent', () => {
    const jwe = handmade('{"enc":"A256GCM","alg":"RSA-OAEP-256"}', pub, oaep);
    expect(() => jweDecrypt(jwe, rsa.privateKey)).toThrow(JweDecryptionFailed);
    expect(jweDecrypt(jwe, rsa.privateKey, { aadSource: 'protected' }).toString()).toBe(
      'this is a test data',
    );
  });

  it('default (upstream guest): AAD is the canonical re-serialization, not the received bytes', () => {
    const canonical = Buffer.from('{"alg":"RSA-OAEP-256","enc":"A256GCM"}').toString('base64url');
    const jwe = handmade('{ "enc": "A256GCM", "alg": "RSA-OAEP-256" }', pub, oaep, { aad: canonical });
    expect(jweDecrypt(jwe, rsa.privateKey).toString()).toBe('this is a test data');
    expect(() => jweDecrypt(jwe, rsa.privateKey, { aadSource: 'protected' })).toThrow(JweDecryptionFailed);
  });

  it('an `aad` member is ignored by default (as upstream) and authenticated in protected mode', () => {
    const jwe = { ...jweEncrypt(plaintext, rsa.publicJwk), aad: 'ZmFrZWFhZA' };
    expect(jweDecrypt(jwe, rsa.privateKey).toString()).toBe('this is a test data');
    expect(() => jweDecrypt(jwe, rsa.privateKey, { aadSource: 'protected' })).toThrow(JweDecryptionFailed);
  });
});

describe('tampering and hostile JWEs', () => {
  const cases: [string, typeof p256][] = [
    ['P-256', p256],
    ['P-521', p521],
    ['RSA-OAEP-256', rsa],
  ];
  for (const [name, kp] of cases) {
    it.each(['tag', 'ciphertext', 'iv', 'encrypted_key'] as const)(
      `${name}: a flipped bit in %s fails`,
      (m) => {
        const jwe = jweEncrypt(plaintext, kp.publicJwk);
        expect(() => jweDecrypt({ ...jwe, [m]: flip(jwe[m]) }, kp.privateKey)).toThrow(JweDecryptionFailed);
      },
    );

    it(`${name}: an extra protected member (changing the AAD) fails`, () => {
      const jwe = jweEncrypt(plaintext, kp.publicJwk);
      const h = { ...parseProtectedHeader(jwe.protected), kid: 'x' };
      const forged = { ...jwe, protected: Buffer.from(JSON.stringify(h)).toString('base64url') };
      expect(() => jweDecrypt(forged, kp.privateKey)).toThrow(JweDecryptionFailed);
      expect(() => jweDecrypt(forged, kp.privateKey, { aadSource: 'protected' })).toThrow(
        JweDecryptionFailed,
      );
    });

    it(`${name}: another recipient's key fails`, () => {
      const other = generateTeeKeyPair(
        name === 'RSA-OAEP-256'
          ? 'RSA-OAEP-256'
          : name === 'P-256'
            ? 'ECDH-ES+A256KW-P256'
            : 'ECDH-ES+A256KW-P521',
      );
      expect(() => jweDecrypt(jweEncrypt(plaintext, kp.publicJwk), other.privateKey)).toThrow(
        JweDecryptionFailed,
      );
    });
  }

  it('a replaced epk fails', () => {
    const jwe = jweEncrypt(plaintext, p256.publicJwk);
    const other = generateTeeKeyPair().publicJwk as { x: string; y: string };
    const h = parseProtectedHeader(jwe.protected);
    const forged = serializeProtectedHeader({
      ...h,
      epk: { crv: 'P-256', kty: 'EC', x: other.x, y: other.y },
    });
    expect(() =>
      jweDecrypt({ ...jwe, protected: Buffer.from(forged).toString('base64url') }, p256.privateKey),
    ).toThrow(JweDecryptionFailed);
  });

  it('an off-curve or malformed epk is rejected as invalid', () => {
    const jwe = jweEncrypt(plaintext, p256.publicJwk);
    const h = parseProtectedHeader(jwe.protected) as unknown as { epk: Record<string, string> };
    const withEpk = (epk: unknown) => ({
      ...jwe,
      protected: Buffer.from(
        serializeProtectedHeader({ alg: 'ECDH-ES+A256KW', enc: 'A256GCM', epk }),
      ).toString('base64url'),
    });
    const y = Buffer.from(h.epk.y ?? '', 'base64url');
    y[31] = (y[31] ?? 0) ^ 1;
    expect(() => jweDecrypt(withEpk({ ...h.epk, y: y.toString('base64url') }), p256.privateKey)).toThrow(
      JweInvalid,
    );
    expect(() => jweDecrypt(withEpk({ ...h.epk, x: 'AAAA' }), p256.privateKey)).toThrow(JweInvalid);
    expect(() => jweDecrypt(withEpk({ ...h.epk, x: 1 }), p256.privateKey)).toThrow(JweInvalid);
    expect(() => jweDecrypt(withEpk('epk'), p256.privateKey)).toThrow(JweInvalid);
    expect(() => jweDecrypt(withEpk({ ...h.epk, crv: 'P-521' }), p256.privateKey)).toThrow(JweNotSupported);
  });

  it('rejects unsupported alg/enc and keys of the wrong type', () => {
    const jwe = jweEncrypt(plaintext, rsa.publicJwk);
    const withHeader = (json: string) => ({ ...jwe, protected: Buffer.from(json).toString('base64url') });
    expect(() => jweDecrypt(withHeader('{"alg":"dir","enc":"A256GCM"}'), rsa.privateKey)).toThrow(
      JweNotSupported,
    );
    expect(() => jweDecrypt(withHeader('{"alg":"RSA-OAEP-256","enc":"A128GCM"}'), rsa.privateKey)).toThrow(
      JweNotSupported,
    );
    expect(() => jweDecrypt(jwe, p256.privateKey)).toThrow(JweNotSupported);
    expect(() => jweDecrypt(jweEncrypt(plaintext, p256.publicJwk), rsa.privateKey)).toThrow(JweNotSupported);
    expect(() => jweDecrypt(jweEncrypt(plaintext, p256.publicJwk), p521.privateKey)).toThrow(JweNotSupported);
    expect(() => jweDecrypt(jwe, createPublicKey(rsa.privateKey))).toThrow(TypeError);
  });

  it.each([
    ['not an object', 'jwe'],
    ['null', null],
    ['an array', []],
    ['missing protected', { encrypted_key: '', iv: '', ciphertext: '', tag: '' }],
  ])('rejects a JWE that is %s', (_n, v) => {
    expect(() => jweDecrypt(v, rsa.privateKey)).toThrow(JweInvalid);
  });

  it.each(['encrypted_key', 'iv', 'ciphertext', 'tag'] as const)(
    'rejects a missing, non-string or non-base64url %s',
    (m) => {
      const jwe = jweEncrypt(plaintext, p256.publicJwk) as unknown as Record<string, unknown>;
      expect(() => jweDecrypt({ ...jwe, [m]: undefined }, p256.privateKey)).toThrow(JweInvalid);
      expect(() => jweDecrypt({ ...jwe, [m]: 42 }, p256.privateKey)).toThrow(JweInvalid);
      expect(() => jweDecrypt({ ...jwe, [m]: `${jwe[m]}=` }, p256.privateKey)).toThrow(JweInvalid);
      expect(() => jweDecrypt({ ...jwe, [m]: `${jwe[m]}+/` }, p256.privateKey)).toThrow(JweInvalid);
    },
  );

  it('rejects a short IV or tag', () => {
    const jwe = jweEncrypt(plaintext, p256.publicJwk);
    expect(() => jweDecrypt({ ...jwe, iv: 'AAAAAAAA' }, p256.privateKey)).toThrow(JweInvalid);
    expect(() => jweDecrypt({ ...jwe, tag: 'AAAAAAAAAAA' }, p256.privateKey)).toThrow(JweInvalid);
  });

  it('a truncated wrapped key fails', () => {
    const jwe = jweEncrypt(plaintext, p256.publicJwk);
    const short = Buffer.from(jwe.encrypted_key, 'base64url').subarray(0, 32).toString('base64url');
    expect(() => jweDecrypt({ ...jwe, encrypted_key: short }, p256.privateKey)).toThrow(JweDecryptionFailed);
  });
});

describe('TEE key pairs', () => {
  it('sets alg the way the guest does', () => {
    expect(p256.publicJwk).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ECDH-ES+A256KW' });
    expect(p521.publicJwk).toMatchObject({ kty: 'EC', crv: 'P-521', alg: 'ECDH-ES+A256KW' });
    expect(rsa.publicJwk).toMatchObject({ kty: 'RSA', alg: 'RSA-OAEP-256', e: 'AQAB' });
    expect(rsa15.publicJwk).toMatchObject({ kty: 'RSA', alg: 'RSA1_5' });
    expect(Buffer.from((rsa.publicJwk as { n: string }).n, 'base64url')).toHaveLength(256);
    expect(generateTeeKeyPair().publicJwk).toMatchObject({ crv: 'P-256' });
    // Only the known members, so the JWK is already in its parsed form.
    for (const kp of [p256, p521, rsa]) expect(parseTeePubKey(kp.publicJwk)).toEqual(kp.publicJwk);
  });

  it('loads PEM keys like kbs-client --tee-key-file', () => {
    const ecPem = p256.privateKey.export({ format: 'pem', type: 'pkcs8' });
    const rsaPem = rsa.privateKey.export({ format: 'pem', type: 'pkcs1' });
    expect(teePubKeyFromPrivateKey(teePrivateKeyFromPem(ecPem))).toEqual(p256.publicJwk);
    expect(teePubKeyFromPrivateKey(teePrivateKeyFromPem(rsaPem))).toEqual(rsa.publicJwk);
    const ed = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' });
    expect(() => teePrivateKeyFromPem(ed)).toThrow(JweNotSupported);
    const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).privateKey;
    expect(() => teePrivateKeyFromPem(p384.export({ format: 'pem', type: 'pkcs8' }))).toThrow(
      JweNotSupported,
    );
  });
});

describe('concatKdf', () => {
  it('matches RFC 7518 appendix C (ECDH-ES, A128GCM, apu "Alice", apv "Bob")', () => {
    const z = Buffer.from([
      158, 86, 217, 29, 129, 113, 53, 211, 114, 131, 66, 131, 191, 132, 38, 156, 251, 49, 110, 163, 218, 128,
      106, 72, 246, 218, 167, 121, 140, 254, 144, 196,
    ]);
    const key = concatKdf(z, 'A128GCM', 128, Buffer.from('Alice'), Buffer.from('Bob'));
    expect(key.toString('base64url')).toBe('VqqN6vgjbSBcIijNcacQGg');
  });
});
