import { describe, expect, it } from 'vitest';
import { InvalidToken } from './errors.js';
import { fakeToken } from './testing/fake-kbs.js';
import { isTokenValid, MAX_TOKEN_LENGTH, parseAttestationToken } from './token.js';

describe('attestation token timing', () => {
  it('reads exp and nbf without verifying the signature', () => {
    const t = parseAttestationToken(fakeToken({ exp: 2000, nbf: 1000, iat: 1000 }));
    expect(t.exp).toBe(2000);
    expect(t.nbf).toBe(1000);
    expect(isTokenValid(t, 999_000)).toBe(false);
    expect(isTokenValid(t, 1_000_000)).toBe(true);
    expect(isTokenValid(t, 2_000_999)).toBe(true);
    expect(isTokenValid(t, 2_001_000)).toBe(false);
  });

  it('treats missing claims as unbounded', () => {
    const t = parseAttestationToken(fakeToken({}));
    expect(t.exp).toBeUndefined();
    expect(isTokenValid(t, Date.now())).toBe(true);
  });

  it('refuses tokens it cannot decode', () => {
    const b = (s: string) => Buffer.from(s).toString('base64url');
    for (const bad of [
      '',
      'abc',
      'a.b',
      'a.b.c.d',
      `x.${b('not json')}.y`,
      `x.${b('[1]')}.y`,
      `x.${b('null')}.y`,
      'x.a+b/.y',
      `x.${b('{"exp":"soon"}')}.y`,
      `x.${b('{"nbf":true}')}.y`,
      'a'.repeat(MAX_TOKEN_LENGTH + 1),
    ]) {
      expect(() => parseAttestationToken(bad), bad.slice(0, 20)).toThrow(InvalidToken);
    }
  });
});
