// The one place that knows the Rego engine's API: compile a policy with
// trustee's settings (regorus defaults: Rego v1, strict builtin errors) and
// the `query_reference_value` host builtin, then evaluate it per request.
import { Engine, fromJSON, RegoEvalError, toJSON, type Value } from '@broker/rego';

export const TRUST_CLAIMS_RULE = 'data.policy.trust_claims';
export const EXTENSIONS_RULE = 'data.policy.extensions';

/** Answers the builtin from the evaluation's snapshot; `found: false` records a miss. */
export type ReferenceValueLookup = (name: string) => { found: true; value: unknown } | { found: false };

export interface CompiledPolicy {
  /** Synchronous: `lookup` is only called while this runs. Results are plain JSON. */
  evaluate(input: unknown, lookup: ReferenceValueLookup): { trustClaims: unknown; extensions: unknown };
}

export function compilePolicy(path: string, text: string): CompiledPolicy {
  // The builtin is registered once; each evaluation points it at its own lookup.
  let current: ReferenceValueLookup | undefined;
  const engine = new Engine({ regoVersion: 'v1', strictBuiltinErrors: true, gatherPrints: false });
  engine.registerBuiltin('query_reference_value', 1, (args: readonly Value[]): Value => {
    const name = args[0];
    if (typeof name !== 'string') {
      throw new TypeError('query_reference_value: operand 1 must be string');
    }
    if (current === undefined) throw new Error('query_reference_value called outside an evaluation');
    const r = current(name);
    // An absent value reads as null, as trustee's extension returns.
    return r.found && r.value !== undefined ? fromJSON(r.value) : null;
  });
  engine.addPolicy(path, text);
  // Compile now so unknown functions and unsafe variables fail setPolicy, not the first attestation.
  engine.prepare();

  return {
    evaluate(input, lookup) {
      const e = engine.clone();
      e.setInput(input);
      current = lookup;
      try {
        const trust = evalOptionalRule(e, TRUST_CLAIMS_RULE);
        const ext = evalOptionalRule(e, EXTENSIONS_RULE);
        return {
          trustClaims: trust === undefined ? undefined : toJSON(trust),
          extensions: ext === undefined ? undefined : toJSON(ext),
        };
      } finally {
        current = undefined;
      }
    },
  };
}

/** A rule the policy does not define reads as undefined, as trustee treats regorus' "not a valid rule path". */
function evalOptionalRule(e: Engine, ref: string): Value | undefined {
  try {
    return e.evalRule(ref);
  } catch (err) {
    if (err instanceof RegoEvalError && err.message.startsWith('not a valid rule path')) return undefined;
    throw err;
  }
}
