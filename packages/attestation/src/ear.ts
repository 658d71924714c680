// EAR (EAT Attestation Result) appraisals as trustee's broker builds them with
// veraison/rust-ear: AR4SI trust vectors, tiers, extensions and the claim
// layout of the JWT payload (member order as rust-ear serializes it).
import { AttestationFailed } from './errors.js';

/** AR4SI trustworthiness claims, in rust-ear's serialization order. */
export const TRUST_CLAIM_NAMES = [
  'instance-identity',
  'configuration',
  'executables',
  'file-system',
  'hardware',
  'runtime-opaque',
  'storage-opaque',
  'sourced-data',
] as const;
export type TrustClaimName = (typeof TRUST_CLAIM_NAMES)[number];
export type TrustVector = Partial<Record<TrustClaimName, number>>;
export type TrustTier = 'none' | 'affirming' | 'warning' | 'contraindicated';

const TIER_RANK: Readonly<Record<TrustTier, number>> = {
  none: 0,
  affirming: 1,
  warning: 2,
  contraindicated: 3,
};

/** rust-ear `TrustClaim::tier`: −1..1 none, |v| < 32 affirming, < 96 warning, else contraindicated. */
export function tierOf(value: number): TrustTier {
  if (value >= -1 && value <= 1) return 'none';
  if (value >= -32 && value < 32) return 'affirming';
  if (value >= -96 && value < 96) return 'warning';
  return 'contraindicated';
}

/** The worst tier over the vector; unset claims count as none. */
export function statusOf(vector: TrustVector): TrustTier {
  let worst: TrustTier = 'none';
  for (const name of TRUST_CLAIM_NAMES) {
    const v = vector[name];
    if (v === undefined) continue;
    const t = tierOf(v);
    if (TIER_RANK[t] > TIER_RANK[worst]) worst = t;
  }
  return worst;
}

function isTrustClaimName(s: string): s is TrustClaimName {
  return (TRUST_CLAIM_NAMES as readonly string[]).includes(s);
}

/**
 * `data.policy.trust_claims` → trust vector. Undefined (no such rule) sets
 * every claim to 0, as trustee does; an empty object is refused because an
 * appraisal must assert something.
 */
export function trustVectorFromPolicy(result: unknown, policyId: string): TrustVector {
  if (result === undefined) {
    return Object.fromEntries(TRUST_CLAIM_NAMES.map((n) => [n, 0])) as TrustVector;
  }
  if (result === null || typeof result !== 'object' || Array.isArray(result)) {
    throw new AttestationFailed('POLICY', `policy ${policyId}: trust_claims is not an object`);
  }
  const vector: TrustVector = {};
  for (const [name, v] of Object.entries(result)) {
    if (!isTrustClaimName(name)) {
      throw new AttestationFailed(
        'POLICY',
        `policy ${policyId}: unknown trust claim ${JSON.stringify(name.slice(0, 64))}`,
      );
    }
    // AR4SI values are signed bytes; rust-ear would wrap a larger number silently, we refuse it.
    if (typeof v !== 'number' || !Number.isInteger(v) || v < -128 || v > 127) {
      throw new AttestationFailed(
        'POLICY',
        `policy ${policyId}: trust claim ${name} is not an integer in -128..127`,
      );
    }
    vector[name] = v;
  }
  if (Object.keys(vector).length === 0) {
    throw new AttestationFailed('POLICY', `policy ${policyId}: at least one trust claim must be set`);
  }
  return vector;
}

/** Members an extension may not shadow. */
const APPRAISAL_MEMBERS = new Set([
  'ear.status',
  'ear.trustworthiness-vector',
  'ear.appraisal-policy-id',
  'ear.veraison.annotated-evidence',
  'ear.veraison.policy-claims',
  'ear.veraison.key-attestation',
]);

/**
 * `data.policy.extensions` → appraisal members, sorted by name as rust-ear's
 * registry writes them. Each entry is `{name, key, value}`; names and keys
 * must be unique; a null value is left out.
 */
export function extensionsFromPolicy(result: unknown, policyId: string): [string, unknown][] {
  if (result === undefined) return [];
  if (!Array.isArray(result))
    throw new AttestationFailed('POLICY', `policy ${policyId}: extensions is not an array`);
  const names = new Set<string>();
  const keys = new Set<number>();
  const out: [string, unknown][] = [];
  for (const ext of result) {
    if (ext === null || typeof ext !== 'object' || Array.isArray(ext)) {
      throw new AttestationFailed('POLICY', `policy ${policyId}: an extension is not an object`);
    }
    const { name, key } = ext as Record<string, unknown>;
    if (typeof name !== 'string' || name.length === 0 || name.length > 256) {
      throw new AttestationFailed('POLICY', `policy ${policyId}: an extension has no valid name`);
    }
    if (typeof key !== 'number' || !Number.isInteger(key) || key < -(2 ** 31) || key >= 2 ** 31) {
      throw new AttestationFailed(
        'POLICY',
        `policy ${policyId}: extension ${JSON.stringify(name)} has no valid key`,
      );
    }
    if (!Object.hasOwn(ext, 'value')) {
      throw new AttestationFailed(
        'POLICY',
        `policy ${policyId}: extension ${JSON.stringify(name)} has no value`,
      );
    }
    if (names.has(name) || keys.has(key) || APPRAISAL_MEMBERS.has(name)) {
      throw new AttestationFailed(
        'POLICY',
        `policy ${policyId}: extension ${JSON.stringify(name)} is registered twice`,
      );
    }
    names.add(name);
    keys.add(key);
    const value = (ext as Record<string, unknown>).value;
    if (value !== null) out.push([name, value]);
  }
  return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

export interface Appraisal {
  readonly status: TrustTier;
  readonly vector: TrustVector;
  readonly policyId: string;
  readonly annotatedEvidence: Record<string, unknown>;
  readonly extensions: readonly [string, unknown][];
}

function defineOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

export function appraisalJson(a: Appraisal): Record<string, unknown> {
  const vector: Record<string, number> = {};
  for (const name of TRUST_CLAIM_NAMES) {
    const v = a.vector[name];
    if (v !== undefined) vector[name] = v;
  }
  const out: Record<string, unknown> = { 'ear.status': a.status };
  if (Object.keys(vector).length > 0) out['ear.trustworthiness-vector'] = vector;
  out['ear.appraisal-policy-id'] = a.policyId;
  if (Object.keys(a.annotatedEvidence).length > 0)
    out['ear.veraison.annotated-evidence'] = a.annotatedEvidence;
  for (const [name, value] of a.extensions) defineOwn(out, name, value);
  return out;
}

export interface EarClaims {
  readonly profile: string;
  readonly iat: number;
  readonly developer: string;
  readonly build: string;
  /** Submodule name (`cpu0`, `gpu0`, …) → appraisal. */
  readonly submods: ReadonlyMap<string, Appraisal>;
  readonly exp: number;
  readonly iss: string;
}

/** The JWT payload, members in rust-ear's order (`exp`, `iss` are registered extensions, sorted). */
export function earJson(c: EarClaims): Record<string, unknown> {
  const submods: Record<string, unknown> = {};
  for (const name of [...c.submods.keys()].sort()) submods[name] = appraisalJson(c.submods.get(name)!);
  return {
    eat_profile: c.profile,
    iat: c.iat,
    'ear.verifier-id': { developer: c.developer, build: c.build },
    submods,
    exp: c.exp,
    iss: c.iss,
  };
}
