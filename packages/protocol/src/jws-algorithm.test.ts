import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { describeKeyKind, jwsAlgorithmOf } from './jws-algorithm.js';

describe('jwsAlgorithmOf', () => {
  it('names the algorithm of each key kind the verifiers accept', () => {
    expect(jwsAlgorithmOf(generateKeyPairSync('ed25519').privateKey)).toBe('EdDSA');
    expect(jwsAlgorithmOf(generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey)).toBe('ES256');
    expect(jwsAlgorithmOf(generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).privateKey)).toBe('ES384');
    expect(jwsAlgorithmOf(generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey)).toBe('RS256');
  });

  it('has none for P-521, X25519 or DSA keys, and says which kind it refused', () => {
    const p521 = generateKeyPairSync('ec', { namedCurve: 'secp521r1' }).privateKey;
    expect(jwsAlgorithmOf(p521)).toBeUndefined();
    expect(describeKeyKind(p521)).toBe('an EC key on secp521r1');
    const x25519 = generateKeyPairSync('x25519').privateKey;
    expect(jwsAlgorithmOf(x25519)).toBeUndefined();
    expect(describeKeyKind(x25519)).toBe('a x25519 key');
  });
});
