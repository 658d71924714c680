import { generateKeyPairSync } from 'node:crypto';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  ADMIN_TOKEN_LIFETIME_SECONDS,
  adminSigningAlgorithm,
  InvalidAdminKey,
  signAdminToken,
} from './admin-token.js';

describe('signAdminToken', () => {
  it('signs EdDSA with role, iat and a 2-hour exp', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    const now = 1_700_000_000_000;
    const token = await signAdminToken(pem, { now: () => now });
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'EdDSA', typ: 'JWT' });
    const { payload } = await jwtVerify(token, publicKey, { currentDate: new Date(now) });
    expect(payload).toEqual({
      role: 'admin',
      iat: 1_700_000_000,
      exp: 1_700_000_000 + ADMIN_TOKEN_LIFETIME_SECONDS,
    });
  });

  it('adds iss and aud when given and picks the algorithm from the key', async () => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const token = await signAdminToken(ec.privateKey, { role: 'ops', issuer: 'me', audience: 'KBS' });
    const { payload, protectedHeader } = await jwtVerify(token, ec.publicKey, {
      issuer: 'me',
      audience: 'KBS',
    });
    expect(protectedHeader.alg).toBe('ES256');
    expect(payload.role).toBe('ops');
    expect(adminSigningAlgorithm(generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey)).toBe(
      'RS256',
    );
    expect(adminSigningAlgorithm(generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey)).toBe(
      'ES384',
    );
    expect(() => adminSigningAlgorithm(generateKeyPairSync('x25519').privateKey)).toThrow(InvalidAdminKey);
    // The KBS's admin verifier takes no ES512: a P-521 key is refused where it is read.
    expect(() =>
      adminSigningAlgorithm(generateKeyPairSync('ec', { namedCurve: 'P-521' }).privateKey),
    ).toThrow(/EC key on secp521r1/);
    await expect(signAdminToken('not a key')).rejects.toMatchObject({ code: 'INVALID_ADMIN_KEY' });
  });
});
