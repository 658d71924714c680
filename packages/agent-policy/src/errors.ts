// Errors of the agent-policy gate: one base class whose `code` says what failed.

/** What the agent-policy gate failed at; callers branch on it (or on the class), never on `name`. */
export type AgentPolicyErrorCode =
  /** A policy source exists but cannot be used (`InitialPolicyError`). */
  | 'INITIAL_POLICY_UNUSABLE'
  /** The ops are not a JSON Patch document (`InvalidPatchError`). */
  | 'PATCH_INVALID'
  /** A JSON Patch operation could not be applied (`PatchApplyError`). */
  | 'PATCH_APPLY_FAILED'
  /** The policy could not decide (`PolicyEvaluationError`). */
  | 'POLICY_EVALUATION_FAILED'
  /** A new policy was rejected (`PolicyLoadError`). */
  | 'POLICY_LOAD_FAILED'
  /** A CopyFile request with invalid symlink content (`CopyFileInputError`). */
  | 'COPY_FILE_INPUT_INVALID'
  /** The bytes are not an acceptable encoding of the request (`RequestDecodeError`). */
  | 'REQUEST_DECODE_FAILED'
  /** A value does not fit the message being encoded (`RequestEncodeError`). */
  | 'REQUEST_ENCODE_FAILED'
  /** The agent's message schema does not hold together (an unresolved type, a profile edit that no longer applies). */
  | 'SCHEMA_INVALID'
  /** A file given to the command is larger than it accepts. */
  | 'FILE_TOO_LARGE'
  /** The gate cannot listen on an address it was given. */
  | 'LISTEN_FAILED'
  /** The Go stand-in agent cannot be built (no Go toolchain or sources). */
  | 'GO_AGENT_UNAVAILABLE'
  /** Any other failure. */
  | 'AGENT_POLICY_FAILED';

/** The base of every error of this package: `code` says what failed; branch on it or on the class, never on `name`. */
export class AgentPolicyError extends Error {
  override readonly name: string = 'AgentPolicyError';
  readonly code: AgentPolicyErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: AgentPolicyErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'AGENT_POLICY_FAILED';
  }
}
