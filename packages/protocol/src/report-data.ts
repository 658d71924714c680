/**
 * The report-data binding: the guest puts H(JCS(runtime_data)) into its TEE
 * evidence and the verifier recomputes it from the Attestation it receives.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from './jcs.js';
import { type TeePubKey, teePubKeyMembers } from './jwk.js';

export type HashAlgorithm = 'sha256' | 'sha384' | 'sha512';
/** kbs-types also lists SM3 for the report-data binding; Node's OpenSSL provides it. */
export type ReportDataHashAlgorithm = HashAlgorithm | 'sm3';

/** `supported-hash-algorithms` as the guest sends them in the Request's extra-params. */
export const SUPPORTED_HASH_ALGORITHMS: readonly ReportDataHashAlgorithm[] = Object.freeze([
  'sha256',
  'sha384',
  'sha512',
  'sm3',
] as const);

export const HASH_ALGORITHMS: readonly HashAlgorithm[] = Object.freeze([
  'sha256',
  'sha384',
  'sha512',
] as const);

/** The default when the challenge selects none (kbs-types `HashAlgorithm::default()`). */
export const DEFAULT_REPORT_DATA_HASH: ReportDataHashAlgorithm = 'sha384';

export const HASH_LENGTHS: Readonly<Record<ReportDataHashAlgorithm, number>> = Object.freeze({
  sha256: 32,
  sha384: 48,
  sha512: 64,
  sm3: 32,
});

export function isHashAlgorithm(s: unknown): s is HashAlgorithm {
  return s === 'sha256' || s === 'sha384' || s === 'sha512';
}

/** kbs-types parses hash names ASCII-case-insensitively. */
export function parseReportDataHashAlgorithm(s: unknown): ReportDataHashAlgorithm | null {
  if (typeof s !== 'string') return null;
  const lower = s.toLowerCase();
  return lower === 'sha256' || lower === 'sha384' || lower === 'sha512' || lower === 'sm3' ? lower : null;
}

/** Runtime data as hashed: `additional-evidence` is present for the primary evidence only. */
export interface RuntimeDataInput {
  nonce: string;
  'tee-pubkey': TeePubKey;
  'additional-evidence'?: string;
}

/** The object whose JCS form is hashed; the TEE key is reduced to its known members. */
export function runtimeDataClaims(runtimeData: RuntimeDataInput): Record<string, unknown> {
  const out: Record<string, unknown> = {
    nonce: runtimeData.nonce,
    'tee-pubkey': teePubKeyMembers(runtimeData['tee-pubkey']),
  };
  if (runtimeData['additional-evidence'] !== undefined) {
    out['additional-evidence'] = runtimeData['additional-evidence'];
  }
  return out;
}

/** H(JCS(runtime_data)). SHA-384 unless the challenge negotiated another algorithm. */
export function runtimeDataDigest(
  runtimeData: RuntimeDataInput,
  alg: ReportDataHashAlgorithm = DEFAULT_REPORT_DATA_HASH,
): Buffer {
  return createHash(alg)
    .update(canonicalJson(runtimeDataClaims(runtimeData)), 'utf8')
    .digest();
}

/**
 * Fit a digest into a fixed report field: zero-pad the tail when short,
 * truncate the tail when long (TDX/SNP REPORTDATA 64, TPM nonce 32, MRCONFIGID 48).
 */
export function padReportData(digest: Uint8Array, size: 32 | 48 | 64 | number): Buffer {
  if (!Number.isInteger(size) || size <= 0) throw new RangeError('size must be a positive integer');
  const out = Buffer.alloc(size);
  out.set(digest.subarray(0, size));
  return out;
}
