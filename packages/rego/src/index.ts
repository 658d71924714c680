// Public face of @broker/rego: a pure-TypeScript Rego interpreter.
export type { BuiltinContext, BuiltinDef } from './builtins/api.js';
export { type CaseFormat, type CaseOutcome, type RunOptions, runCaseFile } from './cases.js';
export { type CliIO, main } from './cli.js';
export {
  DEFAULT_LIMITS,
  Engine,
  type EngineLimits,
  type EngineOptions,
  type ExpressionResult,
  type QueryResult,
  type QueryResults,
} from './engine.js';
export {
  RegoError,
  type RegoErrorCode,
  RegoEvalError,
  type RegoEvalErrorCode,
  RegoLimitError,
  type RegoLimitKind,
  RegoParseError,
} from './errors.js';
export { type HostFunction, type InputReadListener, valueAtPath } from './interpreter.js';
export {
  compare,
  equals,
  fromJSON,
  ObjectValue,
  parseJSON,
  SetValue,
  serialize,
  toJSON,
  type Value,
} from './value.js';
