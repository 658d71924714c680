import { generateKeyPairSync } from 'node:crypto';
import { jweDecrypt, jweEncrypt } from '@broker/protocol';
import { describe, expect, it } from 'vitest';
import { InvalidTeeKey } from './errors.js';
import { parseTeeKeyAlgorithm, TEE_KEY_ALGORITHMS, TeeKeyPair } from './tee-key.js';

describe('TeeKeyPair', () => {
  it('defaults to EC P-256 with alg ECDH-ES+A256KW, as the guest', () => {
    const k = TeeKeyPair.generate();
    expect(Object.keys(k.publicJwk).sort()).toEqual(['alg', 'crv', 'kty', 'x', 'y']);
    expect(k.publicJwk).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ECDH-ES+A256KW' });
  });

  it('makes P-521 and RSA-2048 keys with the upstream JWK forms', () => {
    expect(TeeKeyPair.generate('ECDH-ES+A256KW-P521').publicJwk).toMatchObject({ kty: 'EC', crv: 'P-521' });
    const rsa = TeeKeyPair.generate('RSA-OAEP-256');
    expect(Object.keys(rsa.publicJwk).sort()).toEqual(['alg', 'e', 'kty', 'n']);
    expect(rsa.publicJwk).toMatchObject({ kty: 'RSA', alg: 'RSA-OAEP-256', e: 'AQAB' });
    expect(rsa.privateKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
  });

  it('round-trips through PEM: PKCS#8 for EC, PKCS#1 for RSA', () => {
    for (const alg of TEE_KEY_ALGORITHMS) {
      const k = TeeKeyPair.generate(alg);
      const pem = k.toPem();
      expect(pem).toMatch(
        alg === 'RSA-OAEP-256' ? /^-----BEGIN RSA PRIVATE KEY-----/ : /^-----BEGIN PRIVATE KEY-----/,
      );
      const back = TeeKeyPair.fromPem(pem);
      expect(back.publicJwk).toEqual(k.publicJwk);
      expect(jweDecrypt(jweEncrypt(Buffer.from('hi'), k.publicJwk), back.privateKey).toString()).toBe('hi');
    }
  });

  it('refuses keys the KBS cannot encrypt to', () => {
    const pem = (k: ReturnType<typeof generateKeyPairSync>['privateKey']) =>
      k.export({ format: 'pem', type: 'pkcs8' }).toString();
    expect(() =>
      TeeKeyPair.fromPem(pem(generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey)),
    ).toThrow(InvalidTeeKey);
    expect(() => TeeKeyPair.fromPem(pem(generateKeyPairSync('ed25519').privateKey))).toThrow(InvalidTeeKey);
    expect(() =>
      TeeKeyPair.fromPem(pem(generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey)),
    ).toThrow(/at least 2048 bits/);
    expect(() => TeeKeyPair.fromPem('garbage')).toThrow(InvalidTeeKey);
    expect(() =>
      TeeKeyPair.fromPem('-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n'),
    ).toThrow(InvalidTeeKey);
    expect(() => TeeKeyPair.fromPem('x'.repeat(20_000))).toThrow(/longer than/);
    const encrypted = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .privateKey.export({ format: 'pem', type: 'pkcs8', cipher: 'aes-256-cbc', passphrase: 'pw' })
      .toString();
    expect(() => TeeKeyPair.fromPem(encrypted)).toThrow(InvalidTeeKey);
  });

  it('parses aa.toml tee_key_algorithm names', () => {
    expect(parseTeeKeyAlgorithm('RSA-OAEP-256')).toBe('RSA-OAEP-256');
    expect(() => parseTeeKeyAlgorithm('RSA1_5')).toThrow(InvalidTeeKey);
    expect(() => TeeKeyPair.generate('nope' as 'RSA-OAEP-256')).toThrow(InvalidTeeKey);
  });
});
