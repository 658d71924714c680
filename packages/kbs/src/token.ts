// Attestation tokens on resource requests (trustee kbs/src/token): verified on every request, then the
// TEE public key is read from the claims at the first pointer that exists.

import { JwtVerifier } from '@broker/auth';
import type { TeePubKey } from '@broker/protocol';
import type { AttestationTokenConfig } from './config.js';
import { KbsServiceError } from './errors.js';

/** trustee's built-in pointers, tried after the configured `extra_teekey_paths`, in this order. */
export const BUILTIN_TEE_KEY_POINTERS: readonly string[] = Object.freeze([
  '/tdx/attester_runtime_data/tee-pubkey',
  '/tdx/attester_user_data/tee-pubkey',
  '/customized_claims/runtime_data/tee-pubkey',
  '/submods/cpu0/ear.veraison.annotated-evidence/runtime_data_claims/tee-pubkey',
  '/tee-pubkey',
]);

export class TeeKeyError extends KbsServiceError {
  override readonly name: string = 'TeeKeyError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('TEE_KEY_INVALID', message, options);
  }
}

/** RFC 6901 evaluation; undefined when the pointer does not resolve. */
export function jsonPointer(doc: unknown, pointer: string): unknown {
  if (pointer === '') return doc;
  if (!pointer.startsWith('/')) return undefined;
  let cur: unknown = doc;
  for (const raw of pointer.slice(1).split('/')) {
    const token = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
      cur = cur[Number(token)];
    } else if (typeof cur === 'object' && cur !== null && Object.hasOwn(cur, token)) {
      cur = (cur as Record<string, unknown>)[token];
    } else {
      return undefined;
    }
    if (cur === undefined) return undefined;
  }
  return cur;
}

const MAX_MEMBER_LENGTH = 4096;

function member(o: Record<string, unknown>, k: string): string | undefined {
  const v = o[k];
  return typeof v === 'string' && v.length <= MAX_MEMBER_LENGTH ? v : undefined;
}

/**
 * The TEE key as trustee deserializes it from the claims: the `kty`-tagged shape with its known members.
 * The key itself (curve point, modulus) is checked when the JWE is made, where a bad key is a JweError as
 * upstream; the token that carries it was signed by a trusted attestation service anyway.
 */
export function teeKeyShape(v: unknown): TeePubKey | undefined {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  const alg = member(o, 'alg');
  if (alg === undefined) return undefined;
  if (o.kty === 'EC') {
    const crv = member(o, 'crv');
    const x = member(o, 'x');
    const y = member(o, 'y');
    if (crv !== 'P-256' && crv !== 'P-384' && crv !== 'P-521') return undefined;
    return x === undefined || y === undefined ? undefined : { kty: 'EC', crv, alg, x, y };
  }
  if (o.kty === 'RSA') {
    const n = member(o, 'n');
    const e = member(o, 'e');
    return n === undefined || e === undefined ? undefined : { kty: 'RSA', alg, n, e };
  }
  return undefined;
}

export class AttestationTokenVerifier {
  private readonly pointers: readonly string[];
  /** TEE keys per (frozen, cached) claims object. */
  private readonly teeKeys = new WeakMap<object, TeePubKey>();

  private constructor(
    private readonly jwt: JwtVerifier,
    extraTeekeyPaths: readonly string[],
  ) {
    this.pointers = [...extraTeekeyPaths, ...BUILTIN_TEE_KEY_POINTERS];
  }

  /** Loads the trust material; refuses a configuration that could verify nothing. */
  static async create(config: AttestationTokenConfig, now?: () => number): Promise<AttestationTokenVerifier> {
    const jwt = await JwtVerifier.create({
      trustedJwkSets: config.trustedJwkSets,
      trustedCertsPaths: config.trustedCertsPaths,
      insecureHeaderJwk: config.insecureHeaderJwk,
      ...(now !== undefined && { now }),
    });
    return new AttestationTokenVerifier(jwt, config.extraTeekeyPaths);
  }

  /** The verified claims (frozen), or a JwtVerificationError. */
  verify(token: string): Record<string, unknown> {
    return this.jwt.verify(token);
  }

  /** The TEE key at the first pointer present in the claims; a present but malformed key is an error. */
  teePublicKey(claims: Record<string, unknown>): TeePubKey {
    const known = this.teeKeys.get(claims);
    if (known !== undefined) return known;
    const key = this.findTeeKey(claims);
    if (Object.isFrozen(claims)) this.teeKeys.set(claims, key);
    return key;
  }

  private findTeeKey(claims: Record<string, unknown>): TeePubKey {
    for (const p of this.pointers) {
      const v = jsonPointer(claims, p);
      if (v === undefined) continue;
      const key = teeKeyShape(v);
      if (key === undefined) throw new TeeKeyError('Failed to parse Tee public key');
      return key;
    }
    throw new TeeKeyError('Tee public key not found in Attestation Token');
  }
}
