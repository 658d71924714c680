// Error classes of the Rego engine. Each names what failed; messages carry the position when one is known.
// They share `RegoError`, whose `code` is OPA's name for the failure; callers branch on `code` or the class.

/** Every code a Rego engine error carries: OPA's load-time and topdown codes, and `limit_exceeded`. */
export type RegoErrorCode = RegoLoadErrorCode | RegoEvalErrorCode | 'limit_exceeded';

/** Base class of the Rego engine's errors. */
export class RegoError extends Error {
  readonly code: RegoErrorCode;
  constructor(code: RegoErrorCode, message: string) {
    super(message);
    this.code = code;
    this.name = 'RegoError';
  }
}

/** OPA's codes for load-time errors. */
export type RegoLoadErrorCode =
  | 'rego_parse_error'
  | 'rego_compile_error'
  | 'rego_type_error'
  | 'rego_unsafe_var_error'
  | 'rego_recursion_error';

/** A policy or query that does not parse or does not compile. */
export class RegoParseError extends RegoError {
  declare readonly code: RegoLoadErrorCode;
  constructor(
    readonly file: string,
    readonly line: number,
    readonly col: number,
    readonly detail: string,
    code: RegoLoadErrorCode = 'rego_parse_error',
  ) {
    super(code, `${file}:${line}:${col}: ${detail}`);
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
export class RegoEvalError extends RegoError {
  declare readonly code: RegoEvalErrorCode;
  constructor(
    code: RegoEvalErrorCode,
    message: string,
    readonly file?: string,
    readonly line?: number,
    readonly col?: number,
  ) {
    super(code, file !== undefined ? `${file}:${line}:${col}: ${message}` : message);
    this.detail = message;
    this.name = 'RegoEvalError';
  }

  /** The message without the position. */
  readonly detail: string;
}

/**
 * How error messages read: `regorus` (the default) as regorus words them, `file:row:col: message`;
 * `opa` as OPA prints them, `file:row: code: message` (load-time errors prefixed `1 error occurred: `),
 * with OPA's wording for conflicts.
 */
export type ErrorStyle = 'regorus' | 'opa';

/** OPA's text of an engine error. */
export function opaErrorText(e: RegoParseError | RegoEvalError): string {
  if (e instanceof RegoParseError) return `1 error occurred: ${e.file}:${e.line}: ${e.code}: ${e.detail}`;
  const where = e.file !== undefined ? `${e.file}:${e.line}: ` : '';
  return `${where}${e.code}: ${e.detail}`;
}

export type RegoLimitKind =
  | 'policy_size'
  | 'nesting_depth'
  | 'steps'
  | 'call_depth'
  | 'collection_size'
  | 'memory'
  | 'input_size'
  | 'regex_size';

/** A configured limit was exceeded; evaluation stops and the result is an error, never a partial answer. */
export class RegoLimitError extends RegoError {
  declare readonly code: 'limit_exceeded';
  constructor(
    readonly limit: RegoLimitKind,
    message: string,
  ) {
    super('limit_exceeded', message);
    this.name = 'RegoLimitError';
  }
}
