/**
 * Short-lived admin JWTs signed with a local private key, for kbs-client's
 * `config --auth-private-key` and the services' `--rvps-auth-private-key`. trustee's kbs-client did this before it moved
 * to `--admin-token-file` (EdDSA, `iat` and `exp` = iat + 2 h); today's KBS
 * verifies admin tokens as bearer JWTs and requires a `role` claim, so the
 * token carries `role` (default `admin`) and, when given, `iss` and `aud`.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { describeKeyKind, jwsAlgorithmOf } from '@broker/protocol';
import { SignJWT } from 'jose';
import { AuthError, type AuthErrorCode } from './errors.js';

/** Lifetime of upstream's signed admin tokens (`ADMIN_TOKEN_EXPIRY_SECS`). */
export const ADMIN_TOKEN_LIFETIME_SECONDS = 7200;
export const DEFAULT_ADMIN_ROLE = 'admin';
const MAX_KEY_PEM_LENGTH = 16 * 1024;

export class InvalidAdminKey extends AuthError {
  override readonly name: string = 'InvalidAdminKey';
  static readonly defaultCode: AuthErrorCode = 'INVALID_ADMIN_KEY';
}

export interface AdminTokenOptions {
  readonly role?: string;
  readonly issuer?: string;
  readonly audience?: string;
  readonly lifetimeSeconds?: number;
  /** Clock in epoch milliseconds. */
  readonly now?: () => number;
}

/**
 * The JWS algorithm a key signs with: Ed25519 → EdDSA, EC → ES256/ES384 by curve, RSA → RS256 (what
 * the KBS's admin token verifier accepts).
 */
export function adminSigningAlgorithm(key: KeyObject): string {
  const alg = jwsAlgorithmOf(key);
  if (alg !== undefined) return alg;
  throw new InvalidAdminKey(
    `unsupported admin key: ${describeKeyKind(key)} (use Ed25519, EC P-256 or P-384, or RSA)`,
  );
}

export function parseAdminPrivateKey(pem: string): KeyObject {
  if (pem.length > MAX_KEY_PEM_LENGTH)
    throw new InvalidAdminKey(`admin key PEM longer than ${MAX_KEY_PEM_LENGTH} characters`);
  try {
    return createPrivateKey({ key: pem, format: 'pem' });
  } catch (cause) {
    throw new InvalidAdminKey('admin key is not an unencrypted PEM private key', { cause });
  }
}

/** Sign an admin bearer token with `key` (a PEM text or a private KeyObject). */
export async function signAdminToken(
  key: string | KeyObject,
  options: AdminTokenOptions = {},
): Promise<string> {
  const privateKey = typeof key === 'string' ? parseAdminPrivateKey(key) : key;
  const alg = adminSigningAlgorithm(privateKey);
  const iat = Math.floor((options.now ?? Date.now)() / 1000);
  const claims: Record<string, unknown> = { role: options.role ?? DEFAULT_ADMIN_ROLE };
  if (options.issuer !== undefined) claims.iss = options.issuer;
  if (options.audience !== undefined) claims.aud = options.audience;
  claims.iat = iat;
  claims.exp = iat + (options.lifetimeSeconds ?? ADMIN_TOKEN_LIFETIME_SECONDS);
  return new SignJWT(claims).setProtectedHeader({ alg, typ: 'JWT' }).sign(privateKey);
}
