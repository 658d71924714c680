// The one place that knows the Rego engine's API: compile a policy with
// trustee's settings (regorus defaults: Rego v1, strict builtin errors) and
// the `query_reference_value` host builtin, then evaluate it per request.
import { Engine, fromJSON, toJSON, type Value } from '@broker/rego';

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
  // A rule the policy does not define reads as undefined, as trustee treats regorus' "not a valid rule
  // path"; the rules it does define are evaluated together, sharing the rules both depend on.
  const present = [TRUST_CLAIMS_RULE, EXTENSIONS_RULE].filter((r) => engine.hasRule(r));

  return {
    evaluate(input, lookup) {
      const inputValue = input === undefined ? undefined : engine.inputValue(input);
      current = lookup;
      try {
        const values = engine.evalRules(present, inputValue);
        const resultOf = (rule: string) => {
          const v = values[present.indexOf(rule)];
          return v === undefined ? undefined : toJSON(v);
        };
        return { trustClaims: resultOf(TRUST_CLAIMS_RULE), extensions: resultOf(EXTENSIONS_RULE) };
      } finally {
        current = undefined;
      }
    },
  };
}
