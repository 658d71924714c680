// The one place that knows the Rego engine's API: compile a policy with
// trustee's settings (regorus defaults: Rego v1, strict builtin errors) and
// the `query_reference_value` host builtin, then evaluate it per request.
//
// An evaluation's result is a function of what it read: the values at the input paths the policy looked
// at and the reference values it asked for (the policy text is fixed, and a policy that reads the clock,
// draws random numbers or uses `with` is never reused). So each evaluation records those reads, and the
// next one first checks the last few records: when every path of one holds an equal value in the new
// input and every reference value is unchanged, the evaluation would take the same course, and its
// result is reused. Evidence fields a policy never looks at (report data, nonces, keys) do not matter;
// those it does look at decide.
import {
  Engine,
  equals,
  fromJSON,
  type InputReadListener,
  toJSON,
  type Value,
  valueAtPath,
} from '@broker/rego';
import { AttestationFailed } from './errors.js';
import { POLICY_EVAL_LIMITS } from './limits.js';

export const TRUST_CLAIMS_RULE = 'data.policy.trust_claims';
export const EXTENSIONS_RULE = 'data.policy.extensions';
const REFERENCE_VALUE_BUILTIN = 'query_reference_value';

/** Answers the builtin from the evaluation's snapshot; `found: false` records a miss. */
export type ReferenceValueLookup = (name: string) => { found: true; value: unknown } | { found: false };

export interface CompiledPolicy {
  /** The rules the attestation service reads (TRUST_CLAIMS_RULE, EXTENSIONS_RULE) that the policy defines. */
  readonly rules: readonly string[];
  /** Synchronous: `lookup` is only called while this runs. Results are plain JSON. */
  evaluate(input: unknown, lookup: ReferenceValueLookup): { trustClaims: unknown; extensions: unknown };
}

/** What one evaluation read, and what it gave. */
interface Trace {
  /** Input paths read and the value found (undefined when absent), in first-read order. */
  readonly inputReads: readonly (readonly [readonly string[], Value | undefined])[];
  /** Reference values asked for: the stored JSON the lookup gave and the value the builtin returned. */
  readonly referenceReads: readonly (readonly [string, unknown, Value])[];
  readonly values: readonly (Value | undefined)[];
}

/** Records kept per policy: distinct platforms (TEE types, configurations) that attest against it. */
const TRACES_KEPT = 8;
/** An evaluation that read more than this many input paths is not recorded (checking would cost too). */
const MAX_TRACED_READS = 512;

/** The builtin's answer for a lookup: an absent value reads as null, as trustee's extension returns. */
function referenceValue(r: ReturnType<ReferenceValueLookup>): { raw: unknown; value: Value } {
  const raw = r.found ? r.value : undefined;
  return { raw, value: raw !== undefined ? fromJSON(raw) : null };
}

export function compilePolicy(path: string, text: string): CompiledPolicy {
  // The builtin is registered once; each evaluation points it at its own lookup.
  let current: ReferenceValueLookup | undefined;
  /** Set while an evaluation is being recorded. */
  let recording: { reads: (readonly [string, unknown, Value])[]; missed: boolean } | undefined;
  const engine = new Engine({
    regoVersion: 'v1',
    strictBuiltinErrors: true,
    gatherPrints: false,
    limits: POLICY_EVAL_LIMITS,
  });
  engine.registerBuiltin(REFERENCE_VALUE_BUILTIN, 1, (args: readonly Value[]): Value => {
    const name = args[0];
    if (typeof name !== 'string') {
      throw new TypeError('query_reference_value: operand 1 must be string');
    }
    if (current === undefined) {
      throw new AttestationFailed('POLICY', 'query_reference_value called outside an evaluation');
    }
    const r = current(name);
    const { raw, value } = referenceValue(r);
    if (recording !== undefined) {
      if (!r.found) recording.missed = true;
      recording.reads.push([name, raw, value]);
    }
    return value;
  });
  engine.addPolicy(path, text);
  // Compile now so unknown functions and unsafe variables fail setPolicy, not the first attestation.
  engine.prepare();
  // A rule the policy does not define reads as undefined, as trustee treats regorus' "not a valid rule
  // path"; the rules it does define are evaluated together, sharing the rules both depend on.
  const present = [TRUST_CLAIMS_RULE, EXTENSIONS_RULE].filter((r) => engine.hasRule(r));
  const reusable = engine.isDeterministic(new Set([REFERENCE_VALUE_BUILTIN])) && !engine.usesWith();
  const traces: Trace[] = [];

  /** Whether an evaluation of `input` would read what `t` read, so give what it gave. */
  const sameCourse = (t: Trace, input: Value | undefined, lookup: ReferenceValueLookup): boolean => {
    for (const [p, v] of t.inputReads) {
      const now = valueAtPath(input, p);
      if (now === undefined ? v !== undefined : v === undefined || !equals(now, v)) return false;
    }
    for (const [name, raw, value] of t.referenceReads) {
      const r = lookup(name);
      if (!r.found) return false;
      const nowRaw = r.value;
      if (nowRaw !== raw && !equals(referenceValue(r).value, value)) return false;
    }
    return true;
  };

  const results = (values: readonly (Value | undefined)[]) => {
    const resultOf = (rule: string) => {
      const v = values[present.indexOf(rule)];
      return v === undefined ? undefined : toJSON(v);
    };
    return { trustClaims: resultOf(TRUST_CLAIMS_RULE), extensions: resultOf(EXTENSIONS_RULE) };
  };

  return {
    rules: present,
    evaluate(input, lookup) {
      const inputValue = input === undefined ? undefined : engine.inputValue(input);
      if (reusable) {
        for (const t of traces) if (sameCourse(t, inputValue, lookup)) return results(t.values);
      }
      current = lookup;
      const inputReads = new Map<string, readonly [readonly string[], Value | undefined]>();
      const onInputRead: InputReadListener | undefined = reusable
        ? (p, v) => {
            const key = JSON.stringify(p);
            if (!inputReads.has(key)) inputReads.set(key, [[...p], v]);
          }
        : undefined;
      recording = reusable ? { reads: [], missed: false } : undefined;
      try {
        const values = engine.evalRules(present, inputValue, onInputRead);
        // A run that missed a reference value is repeated by the caller once the value is fetched.
        if (recording !== undefined && !recording.missed && inputReads.size <= MAX_TRACED_READS) {
          traces.unshift({ inputReads: [...inputReads.values()], referenceReads: recording.reads, values });
          if (traces.length > TRACES_KEPT) traces.pop();
        }
        return results(values);
      } finally {
        current = undefined;
        recording = undefined;
      }
    },
  };
}
