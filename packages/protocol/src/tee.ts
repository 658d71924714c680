/** KBS protocol version spoken by trustee and guest-components (kbs-types 0.1x). */
export const PROTOCOL_VERSION = '0.4.0';

/** TEE names as serialized by kbs-types `Tee`. */
export type Tee =
  | 'az-snp-vtpm'
  | 'az-tdx-vtpm'
  | 'nvidia'
  | 'sgx'
  | 'snp'
  | 'tdx'
  | 'cca'
  | 'csv'
  | 'se'
  | 'hygondcu'
  | 'tpm'
  | 'sample'
  | 'sampledevice';

export const TEES: readonly Tee[] = Object.freeze([
  'az-snp-vtpm',
  'az-tdx-vtpm',
  'nvidia',
  'sgx',
  'snp',
  'tdx',
  'cca',
  'csv',
  'se',
  'hygondcu',
  'tpm',
  'sample',
  'sampledevice',
] as const);

const TEE_SET: ReadonlySet<string> = new Set(TEES);

/** Exact, case-sensitive match, as serde does. */
export function isTee(s: unknown): s is Tee {
  return typeof s === 'string' && TEE_SET.has(s);
}
