/**
 * The `tee-pubkey` JWK forms of kbs-types `TeePubKey` (tagged by `kty`).
 * Parsing keeps only the known members, so the JWK hashed into report data is
 * the same one the KBS later encrypts to.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { decodeBase64UrlStrict } from './base64.js';
import { ProtocolError } from './errors.js';

export type EcCurve = 'P-256' | 'P-384' | 'P-521';

export interface EcPublicJwk {
  kty: 'EC';
  crv: EcCurve;
  alg: string;
  x: string;
  y: string;
}

export interface RsaPublicJwk {
  kty: 'RSA';
  alg: string;
  n: string;
  e: string;
}

export type TeePubKey = EcPublicJwk | RsaPublicJwk;

/**
 * Coordinate length in bytes, field prime and curve constant `b` of each supported curve (SEC 2 /
 * FIPS 186-4; all three are `y^2 = x^3 - 3x + b` with cofactor 1).
 */
const CURVES: Record<EcCurve, { size: number; p: bigint; b: bigint }> = {
  'P-256': {
    size: 32,
    p: 2n ** 256n - 2n ** 224n + 2n ** 192n + 2n ** 96n - 1n,
    b: 0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604bn,
  },
  'P-384': {
    size: 48,
    p: 2n ** 384n - 2n ** 128n - 2n ** 96n + 2n ** 32n - 1n,
    b: 0xb3312fa7e23ee7e4988e056be3f82d19181d9c6efe8141120314088f5013875ac656398d8a2ed19d2a85c8edd3ec2aefn,
  },
  'P-521': {
    size: 66,
    p: 2n ** 521n - 1n,
    b: 0x0051953eb9618e1c9a1f929a21a0b68540eea2da725b99b315f3b8b489918ef109e156193951ec7e937b1652c0bd3bb1bf073573df883d2c34f1ef451fd46b503f00n,
  },
};

/**
 * Whether the affine point (x, y), both already below p, satisfies the curve equation. With cofactor 1
 * every such point is in the prime-order group, so this is the whole check OpenSSL makes on import,
 * without the cost of an import (tens of microseconds per key, paid on every /attest).
 */
export function isOnCurve(crv: EcCurve, x: bigint, y: bigint): boolean {
  const { p, b } = CURVES[crv];
  const rhs = (((((x * x) % p) * x - 3n * x + b) % p) + p) % p;
  return (y * y) % p === rhs;
}

export const RSA_MIN_MODULUS_BITS = 2048;
export const RSA_MAX_MODULUS_BITS = 8192;
const MAX_ALG_LENGTH = 64;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(obj: Record<string, unknown>, key: string, field: string, maxLen: number): string {
  const v = obj[key];
  if (typeof v !== 'string') throw new ProtocolError(`${field}.${key}`, 'must be a string');
  if (v.length > maxLen) throw new ProtocolError(`${field}.${key}`, `longer than ${maxLen} characters`);
  return v;
}

function b64(obj: Record<string, unknown>, key: string, field: string, maxLen: number): Buffer {
  const s = str(obj, key, field, maxLen);
  const bytes = decodeBase64UrlStrict(s);
  if (bytes === null) throw new ProtocolError(`${field}.${key}`, 'is not base64url without padding');
  return bytes;
}

function bigFromBytes(b: Uint8Array): bigint {
  return b.length === 0 ? 0n : BigInt(`0x${Buffer.from(b).toString('hex')}`);
}

function isCurve(s: string): s is EcCurve {
  return Object.hasOwn(CURVES, s);
}

/**
 * Parse an untrusted `tee-pubkey` JWK. Unknown members are dropped; the
 * coordinates must have the curve's exact length and lie on the curve; RSA
 * moduli must be 2048..8192 bits with a small odd public exponent.
 * @param field name used in error messages
 */
export function parseTeePubKey(jwk: unknown, field = 'tee-pubkey'): TeePubKey {
  if (!isRecord(jwk)) throw new ProtocolError(field, 'must be a JSON object');
  const kty = jwk.kty;
  if (kty === 'EC') {
    const crv = str(jwk, 'crv', field, 16);
    if (!isCurve(crv)) throw new ProtocolError(`${field}.crv`, `unsupported curve ${JSON.stringify(crv)}`);
    const alg = str(jwk, 'alg', field, MAX_ALG_LENGTH);
    const { size, p } = CURVES[crv];
    const maxChars = Math.ceil((size * 4) / 3);
    const x = b64(jwk, 'x', field, maxChars);
    const y = b64(jwk, 'y', field, maxChars);
    if (x.length !== size) throw new ProtocolError(`${field}.x`, `must be ${size} bytes for ${crv}`);
    if (y.length !== size) throw new ProtocolError(`${field}.y`, `must be ${size} bytes for ${crv}`);
    const xInt = bigFromBytes(x);
    const yInt = bigFromBytes(y);
    if (xInt >= p || yInt >= p) {
      throw new ProtocolError(field, 'coordinate is not a field element');
    }
    if (!isOnCurve(crv, xInt, yInt)) throw new ProtocolError(field, `point is not on curve ${crv}`);
    return { kty: 'EC', crv, alg, x: x.toString('base64url'), y: y.toString('base64url') };
  }
  if (kty === 'RSA') {
    const alg = str(jwk, 'alg', field, MAX_ALG_LENGTH);
    const n = b64(jwk, 'n', field, Math.ceil(((RSA_MAX_MODULUS_BITS / 8 + 1) * 4) / 3));
    const e = b64(jwk, 'e', field, 8);
    const nInt = bigFromBytes(n);
    const bits = nInt.toString(2).length;
    if (nInt === 0n || bits < RSA_MIN_MODULUS_BITS || bits > RSA_MAX_MODULUS_BITS) {
      throw new ProtocolError(
        `${field}.n`,
        `modulus must be ${RSA_MIN_MODULUS_BITS}..${RSA_MAX_MODULUS_BITS} bits`,
      );
    }
    if ((nInt & 1n) === 0n) throw new ProtocolError(`${field}.n`, 'modulus must be odd');
    const eInt = bigFromBytes(e);
    if (eInt < 3n || (eInt & 1n) === 0n || eInt >= nInt) {
      throw new ProtocolError(`${field}.e`, 'public exponent must be odd and at least 3');
    }
    if (e.length > 4) throw new ProtocolError(`${field}.e`, 'public exponent longer than 32 bits');
    const key: RsaPublicJwk = { kty: 'RSA', alg, n: n.toString('base64url'), e: e.toString('base64url') };
    try {
      createPublicKey({ key: { ...key }, format: 'jwk' });
    } catch (cause) {
      throw new ProtocolError(field, 'not a valid RSA public key', { cause });
    }
    return key;
  }
  if (typeof kty !== 'string') throw new ProtocolError(`${field}.kty`, 'must be a string');
  throw new ProtocolError(`${field}.kty`, `unsupported key type ${JSON.stringify(kty.slice(0, 32))}`);
}

/** The members of a TeePubKey only, in a fixed order (drops anything a caller added). */
export function teePubKeyMembers(jwk: TeePubKey): TeePubKey {
  return jwk.kty === 'EC'
    ? { kty: 'EC', crv: jwk.crv, alg: jwk.alg, x: jwk.x, y: jwk.y }
    : { kty: 'RSA', alg: jwk.alg, n: jwk.n, e: jwk.e };
}

/** Node public KeyObject for a (parsed) TeePubKey. */
export function teePubKeyToKeyObject(jwk: TeePubKey): KeyObject {
  const m = teePubKeyMembers(jwk);
  const key = m.kty === 'EC' ? { kty: m.kty, crv: m.crv, x: m.x, y: m.y } : { kty: m.kty, n: m.n, e: m.e };
  return createPublicKey({ key, format: 'jwk' });
}
