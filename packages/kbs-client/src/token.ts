/**
 * The attestation token as the guest sees it: an opaque JWT whose `exp` and
 * `nbf` are read *without* verifying the signature (only the KBS verifies
 * it), to decide when to re-attest, exactly as guest-components' `Token`.
 */
import { InvalidToken } from './errors.js';

/** Tokens are passed around in headers; trustee's head limit is 128 KiB. */
export const MAX_TOKEN_LENGTH = 128 * 1024;

export interface AttestationToken {
  /** The JWT text. */
  readonly content: string;
  /** `exp` in seconds since the epoch, when present. */
  readonly exp: number | undefined;
  /** `nbf` in seconds since the epoch, when present. */
  readonly nbf: number | undefined;
}

function numericClaim(claims: Record<string, unknown>, name: string): number | undefined {
  const v = claims[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new InvalidToken(`token claim ${name} is not a number`);
  return v;
}

/** Decode a token's timing claims; fails on anything that is not a JWS compact JWT with a JSON object payload. */
export function parseAttestationToken(token: string): AttestationToken {
  if (typeof token !== 'string' || token.length === 0) throw new InvalidToken('token is empty');
  if (token.length > MAX_TOKEN_LENGTH)
    throw new InvalidToken(`token longer than ${MAX_TOKEN_LENGTH} characters`);
  const parts = token.split('.');
  const payload = parts[1];
  if (parts.length !== 3 || payload === undefined) throw new InvalidToken('token is not a compact JWT');
  if (!/^[A-Za-z0-9_-]*$/.test(payload)) throw new InvalidToken('token payload is not base64url');
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidToken('token payload is not JSON');
  }
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) {
    throw new InvalidToken('token payload is not a JSON object');
  }
  const c = claims as Record<string, unknown>;
  return { content: token, exp: numericClaim(c, 'exp'), nbf: numericClaim(c, 'nbf') };
}

/** Whether the token is inside its exp/nbf window at `nowMs` (no leeway, as upstream). */
export function isTokenValid(token: AttestationToken, nowMs: number): boolean {
  const now = Math.floor(nowMs / 1000);
  if (token.exp !== undefined && token.exp < now) return false;
  if (token.nbf !== undefined && token.nbf > now) return false;
  return true;
}
