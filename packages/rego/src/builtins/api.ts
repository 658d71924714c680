// The contract between the evaluator and builtin functions.
import { RegoError } from '../errors.js';
import { ObjectValue, SetValue, type TypeName, typeName, type Value } from '../value.js';

export interface BuiltinContext {
  /** Evaluation time in nanoseconds since the epoch, fixed for one query as OPA does. */
  readonly nowNs: bigint;
  /** Maximum regex pattern length accepted by regex builtins. */
  readonly maxRegexLength: number;
  /** Per-query cache, e.g. for compiled regexes. */
  readonly cache: Map<string, unknown>;
}

export interface BuiltinDef {
  /** Number of arguments; the evaluator checks it at load time. */
  readonly arity: number;
  /**
   * Returns the result, or `undefined` when the call is undefined (e.g. a failed lookup).
   * Throws BuiltinError for errors; the evaluator applies strict/non-strict semantics.
   */
  readonly fn: (args: readonly Value[], ctx: BuiltinContext) => Value | undefined;
  /** True when the result depends on something other than the arguments (time, random). */
  readonly nondeterministic?: boolean;
}

export type BuiltinCode = 'eval_type_error' | 'eval_builtin_error';

export class BuiltinError extends RegoError {
  declare readonly code: BuiltinCode;

  constructor(code: BuiltinCode, message: string) {
    // Builtin errors are expected outcomes (non-strict evaluation turns them into undefined), thrown on
    // hot paths; the message names the builtin, so a stack trace would only cost time.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(code, message);
    Error.stackTraceLimit = limit;
    this.name = 'BuiltinError';
  }
}

const ARTICLE: Record<TypeName, string> = {
  null: 'null',
  boolean: 'boolean',
  number: 'number',
  string: 'string',
  array: 'array',
  object: 'object',
  set: 'set',
};

/** OPA's wording: `<name>: operand 1 must be string but got number`. */
export function typeError(name: string, pos: number, want: string, got: Value): BuiltinError {
  return new BuiltinError(
    'eval_type_error',
    `${name}: operand ${pos} must be ${want} but got ${ARTICLE[typeName(got)]}`,
  );
}

export function builtinError(name: string, message: string): BuiltinError {
  return new BuiltinError('eval_builtin_error', `${name}: ${message}`);
}

/** OPA's wording for several accepted types: `operand 1 must be one of {array, set} but got number`. */
export function typeErrorOneOf(name: string, pos: number, want: readonly string[], got: Value): BuiltinError {
  return new BuiltinError(
    'eval_type_error',
    `${name}: operand ${pos} must be one of {${want.join(', ')}} but got ${ARTICLE[typeName(got)]}`,
  );
}

/** A free-form operand error (`name: operand N <text>`), reported as a type error as OPA does. */
export function operandError(name: string, pos: number, text: string): BuiltinError {
  return new BuiltinError('eval_type_error', `${name}: operand ${pos} ${text}`);
}

/** OPA's wording for a wrong element in a composite operand. */
export function elementError(
  name: string,
  pos: number,
  composite: Value,
  want: string,
  got: Value,
): BuiltinError {
  const t = ARTICLE[typeName(composite)];
  return new BuiltinError(
    'eval_type_error',
    `${name}: operand ${pos} must be ${t} of ${want}s but got ${t} containing ${ARTICLE[typeName(got)]}`,
  );
}

// Operand accessors: each returns the narrowed value or throws OPA's type error for that operand.
export function argString(name: string, args: readonly Value[], i: number): string {
  const v = args[i] ?? null;
  if (typeof v !== 'string') throw typeError(name, i + 1, 'string', v);
  return v;
}

export function argNumber(name: string, args: readonly Value[], i: number): number | bigint {
  const v = args[i] ?? null;
  if (typeof v !== 'number' && typeof v !== 'bigint') throw typeError(name, i + 1, 'number', v);
  return v;
}

export function argBoolean(name: string, args: readonly Value[], i: number): boolean {
  const v = args[i] ?? null;
  if (typeof v !== 'boolean') throw typeError(name, i + 1, 'boolean', v);
  return v;
}

export function argArray(name: string, args: readonly Value[], i: number): readonly Value[] {
  const v = args[i] ?? null;
  if (!Array.isArray(v)) throw typeError(name, i + 1, 'array', v);
  return v;
}

export function argSet(name: string, args: readonly Value[], i: number): SetValue {
  const v = args[i] ?? null;
  if (!(v instanceof SetValue)) throw typeError(name, i + 1, 'set', v);
  return v;
}

export function argObject(name: string, args: readonly Value[], i: number): ObjectValue {
  const v = args[i] ?? null;
  if (!(v instanceof ObjectValue)) throw typeError(name, i + 1, 'object', v);
  return v;
}

/** An integral number as a bigint; OPA's wording for a non-number or a fractional number. */
export function argInt(name: string, args: readonly Value[], i: number): bigint {
  const v = argNumber(name, args, i);
  if (typeof v === 'bigint') return v;
  if (!Number.isInteger(v))
    throw operandError(name, i + 1, 'must be integer number but got floating-point number');
  return BigInt(v);
}

/** OPA's BigIntOperand: a non-number is reported as "must be integer", a fraction as a floating-point number. */
export function argBigInt(name: string, args: readonly Value[], i: number): bigint {
  const v = args[i] ?? null;
  if (typeof v !== 'number' && typeof v !== 'bigint') throw typeError(name, i + 1, 'integer', v);
  return argInt(name, args, i);
}

/** A number that must be an integer fitting a JS safe integer (lengths, indices, counts). */
export function argSmallInt(name: string, args: readonly Value[], i: number): number {
  const v = argNumber(name, args, i);
  if (typeof v === 'bigint') {
    // Beyond the safe range no index can be meaningful; clamp so callers see "out of range" behaviour.
    return v < 0n ? Number.MIN_SAFE_INTEGER : Number.MAX_SAFE_INTEGER;
  }
  if (!Number.isInteger(v))
    throw operandError(name, i + 1, 'must be integer number but got floating-point number');
  return v;
}

/** Members of an array or set operand. */
export function argCollection(name: string, args: readonly Value[], i: number): readonly Value[] {
  const v = args[i] ?? null;
  if (Array.isArray(v)) return v;
  if (v instanceof SetValue) return v.sorted();
  throw typeErrorOneOf(name, i + 1, ['array', 'set'], v);
}

/** An array or set of strings, as OPA's StringSliceOperand. */
export function argStrings(name: string, args: readonly Value[], i: number): string[] {
  const v = args[i] ?? null;
  const items = argCollection(name, args, i);
  return items.map((x) => {
    if (typeof x !== 'string') throw elementError(name, i + 1, v, 'string', x);
    return x;
  });
}

export type BuiltinTable = Readonly<Record<string, BuiltinDef>>;
