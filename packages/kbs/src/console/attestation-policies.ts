// The console's attestation policies: list the stored ids, read one, check an edited text with the
// attestation service's own Rego compile, and dry run it on a recorded verdict: the edited policy
// appraises that verdict's annotated evidence (the claims the stored policy saw, as scrubbed for the
// log) with the reference values registered now. Saving goes through the admin API's
// `POST /kbs/v0/attestation-policy`, which compiles again before storing.
import {
  type CompiledPolicy,
  checkAttestationPolicy,
  checkPolicyId,
  compilePolicy,
  limitErrorOf,
  limitFailures,
  limitRefusal,
  MAX_POLICY_LENGTH,
  statusOf,
  type TrustVector,
  type TrustVectorRow,
  trustVectorFromPolicy,
  trustVectorRows,
} from '@broker/attestation';
import { KbsServiceError } from '../errors.js';

export interface AttestationPolicyAccess {
  list(): Promise<string[]>;
  get(id: string): Promise<string | undefined>;
  /** A registered reference value, as the policy builtin `query_reference_value` sees it. */
  referenceValue(name: string): Promise<unknown>;
}

/** Compiles as the attestation service does; throws with the engine's message. */
export function compileAttestationPolicy(text: string): CompiledPolicy {
  if (text.length > MAX_POLICY_LENGTH)
    throw new KbsServiceError('POLICY_CHECK_FAILED', `larger than ${MAX_POLICY_LENGTH} characters`);
  return compilePolicy('console-check.rego', text);
}

/** The checks the attestation service makes before storing a policy (see checkAttestationPolicy). */
export function checkAttestationPolicyText(text: string): CompiledPolicy {
  return checkAttestationPolicy('console-check', text);
}

export interface AttestationDryRun {
  /** The appraisal (submod) evaluated, e.g. `cpu0`. */
  readonly submod: string;
  readonly status?: string;
  readonly trustVector?: TrustVector;
  /** The vector as rows of claim, value, tier and AR4SI meaning. */
  readonly vector?: readonly TrustVectorRow[];
  readonly error?: string;
  /** The limit the evaluation exceeded (now or in an earlier check, upload or dry run of this text). */
  readonly limit?: string;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Lookups one dry run may make, as the attestation service bounds them. */
const MAX_LOOKUPS = 256;
const MAX_ROUNDS = 16;

/**
 * The edited policy's appraisal of one submod of recorded EAR claims. Reference values are fetched
 * before each evaluation: a round that asked for a new one is repeated with it (Rego builtins are
 * synchronous, the store is not).
 */
export async function dryRunAttestationPolicy(
  text: string,
  claims: unknown,
  submod: string | undefined,
  referenceValue: (name: string) => Promise<unknown>,
): Promise<AttestationDryRun | undefined> {
  const submods = isObject(claims) && isObject(claims.submods) ? claims.submods : undefined;
  if (submods === undefined) return undefined;
  const name = submod ?? Object.keys(submods).sort()[0];
  const appraisal = name !== undefined && Object.hasOwn(submods, name) ? submods[name] : undefined;
  const input = isObject(appraisal) ? appraisal['ear.veraison.annotated-evidence'] : undefined;
  if (name === undefined || input === undefined) return undefined;
  const known = limitFailures.get('attestation', text);
  if (known !== undefined) {
    return { submod: name, error: limitRefusal('the policy', known, true).message, limit: known.limit };
  }
  try {
    const compiled = compileAttestationPolicy(text);
    const values = new Map<string, unknown>();
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const misses = new Set<string>();
      const result = compiled.evaluate(input, (n) => {
        if (values.has(n)) return { found: true, value: values.get(n) };
        if (values.size + misses.size >= MAX_LOOKUPS)
          throw new KbsServiceError('POLICY_CHECK_FAILED', 'too many reference values queried');
        misses.add(n);
        return { found: false };
      });
      if (misses.size === 0) {
        const trustVector = trustVectorFromPolicy(result.trustClaims, 'edited policy');
        return {
          submod: name,
          status: statusOf(trustVector),
          trustVector,
          vector: trustVectorRows(trustVector),
        };
      }
      for (const n of misses) values.set(n, await referenceValue(n));
    }
    throw new KbsServiceError('POLICY_CHECK_FAILED', 'the policy kept asking for new reference values');
  } catch (e) {
    const limit = limitErrorOf(e);
    if (limit !== undefined) {
      limitFailures.remember('attestation', text, limit);
      return { submod: name, error: limitRefusal('the policy', limit, false).message, limit: limit.limit };
    }
    return { submod: name, error: (e as Error).message };
  }
}

/** A policy id from a request path segment, or undefined when it is not a valid id. */
export function policyIdOf(segment: string | undefined): string | undefined {
  if (segment === undefined) return undefined;
  try {
    checkPolicyId(segment);
    return segment;
  } catch {
    return undefined;
  }
}
