// The contract between the evaluator and builtin functions.
import { type TypeName, type Value, typeName } from '../value.js';

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

export class BuiltinError extends Error {
  constructor(
    readonly code: BuiltinCode,
    message: string,
  ) {
    super(message);
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
  return new BuiltinError('eval_type_error', `${name}: operand ${pos} must be ${want} but got ${ARTICLE[typeName(got)]}`);
}

export function builtinError(name: string, message: string): BuiltinError {
  return new BuiltinError('eval_builtin_error', `${name}: ${message}`);
}
