// Error classes of the Rego engine. Each names what failed; messages carry the position when one is known.

/** A policy or query that does not parse or does not compile. */
export class RegoParseError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly col: number,
    readonly detail: string,
  ) {
    super(`${file}:${line}:${col}: ${detail}`);
    this.name = 'RegoParseError';
  }
}

/** Topdown error codes as OPA names them, plus the compile-time ones raised during evaluation. */
export type RegoEvalErrorCode =
  | 'eval_type_error'
  | 'eval_builtin_error'
  | 'eval_conflict_error'
  | 'eval_internal_error'
  | 'rego_recursion_error'
  | 'rego_type_error'
  | 'rego_unsafe_var_error'
  | 'rego_compile_error';

/** An error raised while evaluating a query (conflicts, builtin errors in strict mode, recursion). */
export class RegoEvalError extends Error {
  constructor(
    readonly code: RegoEvalErrorCode,
    message: string,
    readonly file?: string,
    readonly line?: number,
    readonly col?: number,
  ) {
    super(file !== undefined ? `${file}:${line}:${col}: ${message}` : message);
    this.name = 'RegoEvalError';
  }
}

export type RegoLimitKind =
  | 'policy_size'
  | 'nesting_depth'
  | 'steps'
  | 'call_depth'
  | 'collection_size'
  | 'input_size'
  | 'regex_size';

/** A configured limit was exceeded; evaluation stops and the result is an error, never a partial answer. */
export class RegoLimitError extends Error {
  constructor(
    readonly limit: RegoLimitKind,
    message: string,
  ) {
    super(message);
    this.name = 'RegoLimitError';
  }
}
