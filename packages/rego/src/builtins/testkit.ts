// Helpers for the builtin unit tests: call a builtin by name with JSON-ish arguments.
import { fromJSON, ObjectValue, SetValue, type Value } from '../value.js';
import { type BuiltinContext, BuiltinError } from './api.js';
import { BUILTINS } from './index.js';
import { termString } from './text.js';

export function testContext(overrides: Partial<BuiltinContext> = {}): BuiltinContext {
  return { nowNs: 1_700_000_000_123_456_789n, maxRegexLength: 10_000, cache: new Map(), ...overrides };
}

function toValue(x: unknown): Value {
  if (x instanceof SetValue || x instanceof ObjectValue || typeof x === 'bigint') return x;
  if (Array.isArray(x)) return x.map(toValue);
  if (x !== null && typeof x === 'object') {
    const o = new ObjectValue();
    for (const [k, v] of Object.entries(x as Record<string, unknown>)) o.set(k, toValue(v));
    return o;
  }
  return fromJSON(x);
}

/** Calls a builtin with arguments converted from JS (arrays, plain objects, SetValue, bigint). */
export function call(name: string, ...args: unknown[]): Value | undefined {
  return callIn(testContext(), name, ...args);
}

export function callIn(ctx: BuiltinContext, name: string, ...args: unknown[]): Value | undefined {
  const def = BUILTINS.get(name);
  if (def === undefined) throw new Error(`no builtin ${name}`);
  if (def.arity !== args.length)
    throw new Error(`${name} takes ${def.arity} arguments, test gave ${args.length}`);
  return def.fn(args.map(toValue), ctx);
}

/** The BuiltinError a call throws (fails the test if it returns). */
export function failure(name: string, ...args: unknown[]): BuiltinError {
  try {
    const r = call(name, ...args);
    throw new Error(`${name} returned ${r === undefined ? 'undefined' : termString(r)} instead of failing`);
  } catch (e) {
    if (e instanceof BuiltinError) return e;
    throw e;
  }
}

/** A result in Rego's own notation, e.g. `{"a": [1, 2]}` or `{1, 2}` for a set. */
export function show(v: Value | undefined): string {
  return v === undefined ? 'undefined' : termString(v);
}

export function set(...xs: unknown[]): SetValue {
  return SetValue.of(xs.map(toValue));
}

export { toValue };
