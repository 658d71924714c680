/**
 * P-256 signing keys as JWKs: generation in the shape upstream's
 * `secret keygen` writes, and import with upstream's checks and wording.
 */
import {
  createECDH,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';
import { decodeBase64UrlStrict } from '@broker/protocol';
import { KeyJsonError, SealedSecretError, SealFailed, SigningKeyError } from './errors.js';
import { isJsonMap, type JsonMap, parseStrictJson } from './json.js';

/** Upstream's default `--kid` of `secret keygen`. */
export const DEFAULT_SIGNING_KID = 'sealed-signing';
/** A JWK is a few hundred bytes; a key file or resource far larger is not one. */
export const MAX_JWK_BYTES = 64 * 1024;

export interface PublicSigningJwk {
  readonly kty: 'EC';
  readonly crv: 'P-256';
  readonly alg: 'ES256';
  readonly use: 'sig';
  readonly kid: string;
  readonly x: string;
  readonly y: string;
}

export interface PrivateSigningJwk extends PublicSigningJwk {
  readonly d: string;
}

export interface SigningKeyPair {
  readonly privateJwk: PrivateSigningJwk;
  readonly publicJwk: PublicSigningJwk;
}

/**
 * A fresh P-256 key pair. Member order is that of upstream's `json!` literal
 * (`kty, crv, alg, use, kid`, then `d, x, y`); the public JWK is the same
 * object without `d`.
 */
export function generateSigningKey(kid: string = DEFAULT_SIGNING_KID): SigningKeyPair {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = privateKey.export({ format: 'jwk' });
  const { x, y, d } = jwk;
  if (typeof x !== 'string' || typeof y !== 'string' || typeof d !== 'string') {
    throw new SealedSecretError('the P-256 key export has no x, y or d', { code: 'BAD_SIGNING_KEY' });
  }
  const head = { kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig', kid } as const;
  return { privateJwk: { ...head, d, x, y }, publicJwk: { ...head, x, y } };
}

/** A JWK written as upstream's `serde_json::to_string_pretty` plus a newline. */
export function formatJwkFile(jwk: PublicSigningJwk | PrivateSigningJwk): string {
  return `${JSON.stringify(jwk, null, 2)}\n`;
}

function coordinate(jwk: JsonMap, name: 'x' | 'y' | 'd'): Buffer | null {
  const v = jwk[name];
  if (typeof v !== 'string') return null;
  const bytes = decodeBase64UrlStrict(v);
  return bytes !== null && bytes.length === 32 ? bytes : null;
}

function isP256(jwk: JsonMap): boolean {
  return jwk.kty === 'EC' && jwk.crv === 'P-256';
}

/** Parses key bytes (a key file or KBS resource) as JSON; `JSON Parsing Error` otherwise. */
export function parseJwkBytes(bytes: Uint8Array | string): JsonMap {
  const size = typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.byteLength;
  if (size > MAX_JWK_BYTES) throw new KeyJsonError(`the key is larger than ${MAX_JWK_BYTES} bytes`);
  let value: unknown;
  try {
    const text = typeof bytes === 'string' ? bytes : new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    value = parseStrictJson(text);
  } catch (cause) {
    // JSON.parse messages quote the input, and a key file may hold a private key: say less.
    throw new KeyJsonError('the key is not a JSON document', { cause });
  }
  if (!isJsonMap(value)) throw new KeyJsonError('the key is not a JSON object');
  if (typeof value.kty !== 'string') throw new KeyJsonError('the key has no `kty` string');
  return value;
}

/**
 * The verification key of a JWK, as upstream's `validate_es256` takes it:
 * EC P-256 or "Key must be P256"; `x`/`y` that do not form a point on the
 * curve give "Could not parse verification key.". A private JWK is accepted
 * (upstream's own tests verify with one); only `x` and `y` are used, and
 * `alg`, `use` and `key_ops` are not checked, as upstream.
 */
export function verificationKeyFromJwk(jwk: JsonMap): KeyObject {
  if (!isP256(jwk)) throw new SigningKeyError('Key must be P256');
  const x = coordinate(jwk, 'x');
  const y = coordinate(jwk, 'y');
  if (x === null || y === null) throw new SigningKeyError('Could not parse verification key.');
  try {
    return createPublicKey({
      key: { kty: 'EC', crv: 'P-256', x: x.toString('base64url'), y: y.toString('base64url') },
      format: 'jwk',
    });
  } catch (cause) {
    throw new SigningKeyError('Could not parse verification key.', { cause });
  }
}

/**
 * The signing key of a private JWK (`secret seal --signing-jwk-path`):
 * EC P-256 with `d`, or "Key must be EC P256 private key". The public
 * coordinates must belong to `d`, so that a pointer never carries a
 * signature its published key cannot verify.
 */
export function signingKeyFromJwk(value: unknown): KeyObject {
  if (!isJsonMap(value) || !isP256(value) || typeof value.d !== 'string') {
    throw new SigningKeyError('Key must be EC P256 private key');
  }
  const x = coordinate(value, 'x');
  const y = coordinate(value, 'y');
  const d = coordinate(value, 'd');
  if (x === null || y === null || d === null) throw new SigningKeyError('Could not parse verification key.');
  // OpenSSL keeps the x/y given with d unchecked: derive the public point from d to compare.
  let point: Buffer;
  try {
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(d);
    point = ecdh.getPublicKey();
  } catch (cause) {
    throw new SigningKeyError('Could not parse verification key.', { cause });
  }
  if (!point.subarray(1, 33).equals(x) || !point.subarray(33, 65).equals(y)) {
    throw new SealFailed('the private JWK is inconsistent: x and y are not the public key of d');
  }
  try {
    return createPrivateKey({
      key: {
        kty: 'EC',
        crv: 'P-256',
        x: x.toString('base64url'),
        y: y.toString('base64url'),
        d: d.toString('base64url'),
      },
      format: 'jwk',
    });
  } catch (cause) {
    throw new SigningKeyError('Could not parse verification key.', { cause });
  }
}
