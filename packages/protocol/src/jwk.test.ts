import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { type EcCurve, isOnCurve, parseTeePubKey } from './jwk.js';

const CURVES: readonly EcCurve[] = ['P-256', 'P-384', 'P-521'];
const big = (b64: string) => BigInt(`0x${Buffer.from(b64, 'base64url').toString('hex')}`);

/** What OpenSSL says about the point: the check parseTeePubKey's arithmetic must agree with. */
function opensslAccepts(crv: EcCurve, x: string, y: string): boolean {
  try {
    createPublicKey({ key: { kty: 'EC', crv, x, y }, format: 'jwk' });
    return true;
  } catch {
    return false;
  }
}

function withY(y: string, delta: bigint, size: number): string {
  const v = big(y) + delta;
  return Buffer.from(v.toString(16).padStart(size * 2, '0'), 'hex').toString('base64url');
}

describe('parseTeePubKey EC point check', () => {
  it.each(CURVES)('agrees with OpenSSL on keys of %s and on the same points moved off the curve', (crv) => {
    const size = crv === 'P-256' ? 32 : crv === 'P-384' ? 48 : 66;
    for (let i = 0; i < 20; i++) {
      const jwk = generateKeyPairSync('ec', { namedCurve: crv }).publicKey.export({ format: 'jwk' });
      const x = jwk.x as string;
      const y = jwk.y as string;
      expect(isOnCurve(crv, big(x), big(y))).toBe(true);
      expect(parseTeePubKey({ kty: 'EC', crv, alg: 'ECDH-ES+A256KW', x, y })).toMatchObject({ x, y });
      const off = withY(y, big(y) > 1n ? -1n : 1n, size);
      expect(opensslAccepts(crv, x, off)).toBe(false);
      expect(isOnCurve(crv, big(x), big(off))).toBe(false);
      expect(() => parseTeePubKey({ kty: 'EC', crv, alg: 'ECDH-ES+A256KW', x, y: off })).toThrow(
        `point is not on curve ${crv}`,
      );
    }
  });

  it('refuses the origin and small coordinates that OpenSSL also refuses', () => {
    for (const crv of CURVES) {
      const size = crv === 'P-256' ? 32 : crv === 'P-384' ? 48 : 66;
      for (const [xv, yv] of [
        [0n, 0n],
        [1n, 1n],
        [3n, 0n],
      ] as const) {
        const enc = (v: bigint) =>
          Buffer.from(v.toString(16).padStart(size * 2, '0'), 'hex').toString('base64url');
        expect(opensslAccepts(crv, enc(xv), enc(yv))).toBe(false);
        expect(() => parseTeePubKey({ kty: 'EC', crv, alg: 'ES256', x: enc(xv), y: enc(yv) })).toThrow(
          /not on curve/,
        );
      }
    }
  });
});
