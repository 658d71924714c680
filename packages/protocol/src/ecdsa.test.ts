import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { derToP1363, p1363ToDer } from './ecdsa.js';

describe('ECDSA signature forms', () => {
  it.each([
    ['P-256', 32],
    ['P-384', 48],
    ['P-521', 66],
  ] as const)('round-trips OpenSSL signatures on %s in both directions', (curve, size) => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: curve });
    for (let i = 0; i < 40; i++) {
      const data = Buffer.from(`message ${i}`);
      const der = sign(null, data, privateKey);
      const p1363 = derToP1363(der, size);
      expect(p1363).toHaveLength(2 * size);
      expect(verify(null, data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, p1363)).toBe(true);
      expect(p1363ToDer(p1363)).toEqual(der);
      expect(verify(null, data, publicKey, p1363ToDer(p1363))).toBe(true);
    }
  });

  it('encodes leading zeros and high bits as DER requires', () => {
    const sig = Buffer.alloc(64);
    sig[31] = 1; // r = 1
    sig[32] = 0x80; // s has its high bit set
    expect(p1363ToDer(sig).toString('hex')).toBe(`3026020101022100${'80'}${'00'.repeat(31)}`);
    // r = s = 0 still encodes (as INTEGER 0); OpenSSL then refuses to verify it.
    expect(p1363ToDer(Buffer.alloc(64)).toString('hex')).toBe('3006020100020100');
  });

  it.each([[Buffer.alloc(0)], [Buffer.alloc(63)], [Buffer.alloc(134)]])(
    'refuses a P1363 signature of %# odd or excessive length',
    (sig) => {
      expect(() => p1363ToDer(sig)).toThrow(RangeError);
    },
  );

  it.each([
    ['not a sequence', '3106020101020101'],
    ['truncated', '30060201010201'],
    ['length mismatch', '3007020101020101'],
    ['component not an integer', '3006030101020101'],
    ['component too large', `30260221${'ff'.repeat(33)}020101`],
    ['trailing bytes', '300602010102010100'],
  ])('refuses hostile DER (%s)', (_what, hex) => {
    expect(() => derToP1363(Buffer.from(hex, 'hex'), 32)).toThrow(RangeError);
  });
});
