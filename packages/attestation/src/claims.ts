// The per-TEE claims object that is both the policy input and the token's
// annotated evidence (trustee `transform_claims`): `report_data` and
// `init_data` lifted out of the verifier claims, runtime and initdata claims
// added beside them, the rest under the TEE name.
import type { Tee } from '@broker/protocol';
import { AttestationFailed } from './errors.js';

function defineOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  // Plain assignment of "__proto__" would change the prototype instead of adding a member.
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * A copy with object members sorted, as serde_json's BTreeMap-backed objects
 * serialize. Depth is bounded so hostile claims cannot overflow the stack.
 */
export function sortKeysDeep(value: unknown, depth = 0): unknown {
  if (depth > 128) throw new AttestationFailed('EVIDENCE', 'claims are nested too deeply');
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => sortKeysDeep(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value).sort()) {
    defineOwn(out, k, sortKeysDeep((value as Record<string, unknown>)[k], depth + 1));
  }
  return out;
}

export interface TransformInput {
  readonly tee: Tee;
  readonly claims: Record<string, unknown>;
  readonly runtimeDataClaims: unknown;
  readonly initDataClaims: unknown;
  readonly verbose: boolean;
}

export function transformClaims(t: TransformInput): Record<string, unknown> {
  const rest: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(t.claims)) defineOwn(rest, k, v);
  const out: Record<string, unknown> = {};

  // Only a verifier that bound the initdata (or, for sample, exposed it) reports `init_data`.
  if (Object.hasOwn(rest, 'init_data')) {
    const initData = rest.init_data;
    if (typeof initData !== 'string')
      throw new AttestationFailed('EVIDENCE', 'verifier claim init_data is not a string');
    delete rest.init_data;
    out.init_data = initData;
    out.init_data_claims = t.initDataClaims;
  }
  if (Object.hasOwn(rest, 'report_data')) {
    const reportData = rest.report_data;
    if (typeof reportData !== 'string') {
      throw new AttestationFailed('EVIDENCE', 'verifier claim report_data is not a string');
    }
    delete rest.report_data;
    out.report_data = reportData;
    let runtime = t.runtimeDataClaims;
    // Device evidence can make tokens exceed HTTP header limits; non-verbose tokens leave it out.
    if (!t.verbose && runtime !== null && typeof runtime === 'object' && !Array.isArray(runtime)) {
      const copy: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(runtime)) if (k !== 'additional-evidence') defineOwn(copy, k, v);
      runtime = copy;
    }
    out.runtime_data_claims = runtime;
  }
  defineOwn(out, t.tee, rest);
  return sortKeysDeep(out) as Record<string, unknown>;
}
