import { describe, expect, it } from 'vitest';
import { queryObject, tlsOptions } from './server.js';

describe('queryObject', () => {
  it('decodes names and values, keeps the last of repeated names and treats __proto__ as data', () => {
    const q = queryObject('a=1&b=x%20y&a=2&__proto__=p&c');
    expect(Object.entries(q)).toEqual([
      ['a', '2'],
      ['b', 'x y'],
      ['__proto__', 'p'],
      ['c', ''],
    ]);
    expect(Object.hasOwn(q, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(q)).toBe(Object.prototype);
    expect(queryObject('')).toEqual({});
  });
});

describe('tlsOptions', () => {
  it("maps trustee's profiles and explicit settings onto node:tls options", () => {
    expect(tlsOptions({ profile: 'intermediate' })).toEqual({ minVersion: 'TLSv1.2' });
    expect(tlsOptions({ profile: 'old' })).toEqual({ minVersion: 'TLSv1.2' });
    expect(tlsOptions({ profile: 'modern' })).toEqual({ minVersion: 'TLSv1.3' });
    expect(
      tlsOptions({
        profile: 'custom',
        minVersion: '1.2',
        maxVersion: '1.2',
        ciphers: 'ECDHE-RSA-AES128-GCM-SHA256',
        groups: 'X25519:P-256',
      }),
    ).toEqual({
      minVersion: 'TLSv1.2',
      maxVersion: 'TLSv1.2',
      ciphers: 'ECDHE-RSA-AES128-GCM-SHA256',
      ecdhCurve: 'X25519:P-256',
    });
  });
});
