// Compact JWS/JWT decoding and signature checks on node:crypto. Only asymmetric algorithms exist here:
// `none` and the HMAC family cannot be expressed, so a token can never choose its own trust.
import { createPublicKey, constants as cryptoConstants, type KeyObject, verify } from 'node:crypto';
import { p1363ToDer } from '@broker/protocol';
import { AuthError, type AuthErrorCode } from './errors.js';

export class JwtVerificationError extends AuthError {
  override readonly name: string = 'JwtVerificationError';
  static readonly defaultCode: AuthErrorCode = 'JWT_INVALID';
}

/** The token is past `exp` plus the leeway. */
export class JwtExpired extends JwtVerificationError {
  override readonly name: string = 'JwtExpired';
  static override readonly defaultCode: AuthErrorCode = 'JWT_EXPIRED';
}

export type JwsAlgorithm =
  | 'ES256'
  | 'ES384'
  | 'RS256'
  | 'RS384'
  | 'RS512'
  | 'PS256'
  | 'PS384'
  | 'PS512'
  | 'EdDSA';

const ALGORITHMS: ReadonlySet<string> = new Set<JwsAlgorithm>([
  'ES256',
  'ES384',
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'EdDSA',
]);

export function isJwsAlgorithm(s: unknown): s is JwsAlgorithm {
  return typeof s === 'string' && ALGORITHMS.has(s);
}

/** Largest token accepted, in characters (the HTTP head is capped at 128 KiB anyway). */
export const MAX_JWT_LENGTH = 128 * 1024;
/** trustee (jsonwebtoken's default) accepts tokens up to 60 s past `exp`. */
export const EXP_LEEWAY_SECONDS = 60;

export interface DecodedJwt {
  readonly header: Record<string, unknown>;
  readonly payload: Record<string, unknown>;
  /** `<header>.<payload>` as ASCII, the signed bytes. */
  readonly signingInput: string;
  readonly signature: Buffer;
}

const B64URL_RE = /^[A-Za-z0-9_-]*$/;

function b64url(part: string, what: string): Buffer {
  if (!B64URL_RE.test(part) || part.length % 4 === 1) {
    throw new JwtVerificationError(`${what} is not base64url`);
  }
  return Buffer.from(part, 'base64url');
}

function jsonObject(bytes: Buffer, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new JwtVerificationError(`${what} is not JSON`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new JwtVerificationError(`${what} is not an object`);
  return v as Record<string, unknown>;
}

/**
 * Splits and decodes a compact JWT without checking anything but its shape. With `known`, a token whose
 * signed part equals `known.signingInput` reuses its decoded header and payload.
 */
export function decodeJwt(token: string, known?: DecodedJwt): DecodedJwt {
  if (typeof token !== 'string' || token.length === 0) throw new JwtVerificationError('token is empty');
  if (token.length > MAX_JWT_LENGTH)
    throw new JwtVerificationError(`token is longer than ${MAX_JWT_LENGTH} characters`);
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first < 0 || second < 0 || token.indexOf('.', second + 1) >= 0) {
    throw new JwtVerificationError('token is not a compact JWS (three dot-separated parts)');
  }
  if (known !== undefined && known.signingInput === token.slice(0, second)) {
    return { ...known, signature: b64url(token.slice(second + 1), 'signature') };
  }
  const header = jsonObject(b64url(token.slice(0, first), 'header'), 'header');
  const payload = jsonObject(b64url(token.slice(first + 1, second), 'payload'), 'payload');
  const signature = b64url(token.slice(second + 1), 'signature');
  return { header, payload, signingInput: token.slice(0, second), signature };
}

/** Whether `key` can carry `alg` (key type and, for ECDSA, curve). */
export function keyFitsAlgorithm(key: KeyObject, alg: JwsAlgorithm): boolean {
  const type = key.asymmetricKeyType;
  switch (alg) {
    case 'ES256':
      return type === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1';
    case 'ES384':
      return type === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'secp384r1';
    case 'EdDSA':
      return type === 'ed25519';
    default:
      return type === 'rsa' || (type === 'rsa-pss' && alg.startsWith('PS'));
  }
}

const HASH: Record<JwsAlgorithm, string | null> = {
  ES256: 'sha256',
  ES384: 'sha384',
  RS256: 'sha256',
  RS384: 'sha384',
  RS512: 'sha512',
  PS256: 'sha256',
  PS384: 'sha384',
  PS512: 'sha512',
  EdDSA: null,
};

type VerifyKey = KeyObject | { key: KeyObject; padding: number; saltLength: number };

/**
 * node:crypto verify arguments for `alg` (the signature in the form OpenSSL takes), or undefined when the
 * signature cannot be one (wrong size).
 */
function verifyArgs(
  jwt: DecodedJwt,
  key: KeyObject,
  alg: JwsAlgorithm,
): [string | null, VerifyKey, Uint8Array] | undefined {
  if (!keyFitsAlgorithm(key, alg)) throw new JwtVerificationError(`key type does not fit algorithm ${alg}`);
  if (alg === 'EdDSA') return [null, key, jwt.signature];
  if (alg.startsWith('ES')) {
    if (jwt.signature.length !== (alg === 'ES256' ? 64 : 96)) return undefined;
    return [HASH[alg], key, p1363ToDer(jwt.signature)];
  }
  if (alg.startsWith('PS')) {
    return [
      HASH[alg],
      {
        key,
        padding: cryptoConstants.RSA_PKCS1_PSS_PADDING,
        saltLength: cryptoConstants.RSA_PSS_SALTLEN_DIGEST,
      },
      jwt.signature,
    ];
  }
  return [HASH[alg], key, jwt.signature];
}

const BAD_SIGNATURE = 'signature does not verify';

/** Checks the signature of a decoded token; throws when it does not verify under `key` with `alg`. */
export function verifySignature(jwt: DecodedJwt, key: KeyObject, alg: JwsAlgorithm): void {
  const args = verifyArgs(jwt, key, alg);
  let ok = false;
  if (args !== undefined) {
    try {
      ok = verify(args[0], Buffer.from(jwt.signingInput, 'ascii'), args[1], args[2]);
    } catch {
      ok = false;
    }
  }
  if (!ok) throw new JwtVerificationError(BAD_SIGNATURE);
}

/**
 * jsonwebtoken's default validation as trustee uses it: `exp` required, an integer, not more than the
 * leeway in the past; `nbf`, `aud` and `iss` are not checked here.
 */
export function checkExpiry(
  payload: Record<string, unknown>,
  nowSeconds: number,
  leeway = EXP_LEEWAY_SECONDS,
): void {
  const exp = payload.exp;
  if (exp === undefined) throw new JwtVerificationError('exp claim is missing');
  if (typeof exp !== 'number' || !Number.isSafeInteger(exp) || exp < 0) {
    throw new JwtVerificationError('exp claim is not a timestamp');
  }
  if (exp < nowSeconds - leeway) throw new JwtExpired('token has expired');
}

/** The header's `alg`, which must name an allowed asymmetric algorithm. */
export function headerAlgorithm(header: Record<string, unknown>): JwsAlgorithm {
  const alg = header.alg;
  if (!isJwsAlgorithm(alg)) {
    throw new JwtVerificationError(`header alg ${JSON.stringify(String(alg).slice(0, 16))} is not allowed`);
  }
  return alg;
}

export interface PublicJwk {
  readonly kty: string;
  readonly alg?: string;
  readonly kid?: string;
  readonly x5c?: readonly string[];
  readonly [member: string]: unknown;
}

/** A public KeyObject from a JWK; refuses symmetric and private keys. */
export function publicKeyFromJwk(jwk: Record<string, unknown>): KeyObject {
  const kty = jwk.kty;
  if (kty !== 'EC' && kty !== 'RSA' && kty !== 'OKP') {
    throw new JwtVerificationError(`JWK kty ${JSON.stringify(String(kty).slice(0, 16))} is not supported`);
  }
  if ('d' in jwk) throw new JwtVerificationError('JWK carries a private key');
  const members =
    kty === 'EC'
      ? { kty, crv: jwk.crv, x: jwk.x, y: jwk.y }
      : kty === 'RSA'
        ? { kty, n: jwk.n, e: jwk.e }
        : { kty, crv: jwk.crv, x: jwk.x };
  try {
    return createPublicKey({ key: members as import('node:crypto').JsonWebKey, format: 'jwk' });
  } catch (e) {
    throw new JwtVerificationError(`JWK is not a valid ${kty} public key: ${(e as Error).message}`);
  }
}
