import {
  generateTeeKeyPair,
  JweNotSupported,
  jweDecrypt,
  jweEncrypt,
  ProtocolError,
  parseProtectedHeader,
  serializeProtectedHeader,
  type TeePubKey,
} from '@broker/protocol';
import { describe, expect, it } from 'vitest';
import { JweEncrypter } from './jwe-encrypter.js';

const secret = Buffer.from('a 32-byte secret for the tee....');

describe('JweEncrypter', () => {
  it.each([
    ['EC P-256', 'EC'],
    ['RSA-OAEP-256', 'RSA'],
  ] as const)('makes JWEs the guest decrypts, like jweEncrypt (%s)', (_name, kty) => {
    const key = generateTeeKeyPair(kty === 'EC' ? 'ECDH-ES+A256KW-P256' : 'RSA-OAEP-256');
    const e = new JweEncrypter();
    for (let i = 0; i < 3; i++) {
      const jwe = e.encrypt(secret, key.publicJwk);
      expect(Object.keys(jwe)).toEqual(Object.keys(jweEncrypt(secret, key.publicJwk)));
      expect(Buffer.from(jweDecrypt(jwe, key.privateKey))).toEqual(secret);
      const header = parseProtectedHeader(jwe.protected);
      expect(header.enc).toBe('A256GCM');
      expect(header.alg).toBe(key.publicJwk.alg);
    }
    expect(e.size).toBe(1);
  });

  it.each(['ECDH-ES+A256KW-P256', 'ECDH-ES+A256KW-P521'] as const)(
    'writes the protected header exactly as serializeProtectedHeader does (%s)',
    (kind) => {
      const key = generateTeeKeyPair(kind);
      const e = new JweEncrypter();
      for (let i = 0; i < 20; i++) {
        const header = Buffer.from(e.encrypt(secret, key.publicJwk).protected, 'base64url').toString('utf8');
        const parsed = parseProtectedHeader(Buffer.from(header).toString('base64url'));
        expect(header).toBe(serializeProtectedHeader(parsed));
        expect(Object.keys(parsed)).toEqual(['alg', 'enc', 'epk']);
        expect(Object.keys(parsed.epk as object)).toEqual(['crv', 'kty', 'x', 'y']);
      }
    },
  );

  it('encrypts to P-521 keys', () => {
    const { privateKey, publicJwk } = generateTeeKeyPair('ECDH-ES+A256KW-P521');
    const jwe = new JweEncrypter().encrypt(secret, publicJwk);
    expect((parseProtectedHeader(jwe.protected).epk as { crv: string }).crv).toBe('P-521');
    expect(Buffer.from(jweDecrypt(jwe, privateKey))).toEqual(secret);
  });

  it('hands RSA1_5 to jweEncrypt, which refuses it', () => {
    expect(() => new JweEncrypter().encrypt(secret, generateTeeKeyPair('RSA1_5').publicJwk)).toThrow(
      JweNotSupported,
    );
  });

  it('uses a fresh ephemeral key and IV per JWE even with the key cached', () => {
    const key = generateTeeKeyPair();
    const e = new JweEncrypter();
    const a = e.encrypt(secret, key.publicJwk);
    const b = e.encrypt(secret, key.publicJwk);
    expect(a.protected).not.toBe(b.protected);
    expect(a.iv).not.toBe(b.iv);
    expect(a.encrypted_key).not.toBe(b.encrypted_key);
  });

  it('refuses what jweEncrypt refuses, and caches nothing for it', () => {
    const e = new JweEncrypter();
    const key = generateTeeKeyPair().publicJwk as Extract<TeePubKey, { kty: 'EC' }>;
    // A point off the curve: y changed.
    const y = Buffer.from(key.y, 'base64url');
    y[31] = (y[31] as number) ^ 1;
    expect(() => e.encrypt(secret, { ...key, y: y.toString('base64url') })).toThrow(ProtocolError);
    // Coordinates outside the field, of the wrong size, or not base64url.
    const p256 = Buffer.from('ffffffff00000001000000000000000000000000ffffffffffffffffffffffff', 'hex');
    expect(() => e.encrypt(secret, { ...key, x: p256.toString('base64url') })).toThrow(/field element/);
    expect(() => e.encrypt(secret, { ...key, x: Buffer.alloc(31, 1).toString('base64url') })).toThrow(
      ProtocolError,
    );
    expect(() => e.encrypt(secret, { ...key, x: `${key.x}=` })).toThrow(ProtocolError);
    expect(() => e.encrypt(secret, { ...key, x: 'a'.repeat(4096) })).toThrow(ProtocolError);
    expect(() => e.encrypt(secret, { ...key, alg: 'ECDH-ES' })).toThrow(JweNotSupported);
    expect(() => e.encrypt(secret, { ...key, crv: 'P-384' } as TeePubKey)).toThrow();
    expect(e.size).toBe(0);
  });

  it('keeps at most the configured number of prepared keys', () => {
    const e = new JweEncrypter(3);
    const keys = Array.from({ length: 5 }, () => generateTeeKeyPair());
    for (const k of keys) e.encrypt(secret, k.publicJwk);
    expect(e.size).toBe(3);
    // Evicted keys still work: they are prepared again.
    expect(Buffer.from(jweDecrypt(e.encrypt(secret, keys[0]!.publicJwk), keys[0]!.privateKey))).toEqual(
      secret,
    );
  });

  it('tells keys apart by every member, not by a prefix', () => {
    const e = new JweEncrypter();
    const a = generateTeeKeyPair();
    const b = generateTeeKeyPair();
    e.encrypt(secret, a.publicJwk);
    const jwe = e.encrypt(secret, b.publicJwk);
    expect(() => jweDecrypt(jwe, a.privateKey)).toThrow();
    expect(Buffer.from(jweDecrypt(jwe, b.privateKey))).toEqual(secret);
  });
});
