/**
 * Failures of the agent's operations. The ttrpc layer reports each as
 * INTERNAL `[ERROR:attestation-agent] <upstream wording>: <message>`, so
 * messages name what failed and never carry tokens or keys.
 */

/** What an attestation agent operation failed at; callers branch on it (or on the class), never on `name`. */
export type AttestationAgentErrorCode =
  /** `GetToken` with a type other than `kbs` or `coco_as` (`UnsupportedTokenType`). */
  | 'UNSUPPORTED_TOKEN_TYPE'
  /** The token type's `[token_configs.*]` table is absent (`TokenConfigMissing`). */
  | 'TOKEN_CONFIG_MISSING'
  /** `GetEvidence` runtime data above the bound (`RuntimeDataTooLarge`). */
  | 'RUNTIME_DATA_TOO_LARGE'
  /** A register index no TEE has (`InvalidRegisterIndex`). */
  | 'INVALID_REGISTER_INDEX'
  /** The CoCo attestation service gave no usable token (`CocoAsTokenFailed`). */
  | 'COCO_AS_TOKEN_FAILED'
  /** The init-data is unreadable or does not match the TEE (`InitDataBindingFailed`). */
  | 'INITDATA_BINDING_FAILED'
  /** The event log cannot be written or the TEE cannot extend it (`EventlogError`). */
  | 'EVENTLOG_FAILED'
  /** An event the log refuses (`InvalidAaelEvent`). */
  | 'INVALID_AAEL_EVENT'
  /** `aa.toml` is unreadable or not a valid configuration (`AaConfigError`). */
  | 'CONFIG_INVALID'
  /** `aa_kbc_params` is not `<kbc>::<uri>` (`AaKbcParamsError`). */
  | 'KBC_PARAMS_INVALID'
  /** The agent's socket address is not a `unix://` path. */
  | 'SOCKET_ADDRESS_INVALID'
  /** Any other failure. */
  | 'AGENT_FAILED';

/** The base of every error of this package: `code` says what failed; branch on it or on the class, never on `name`. */
export class AttestationAgentError extends Error {
  override readonly name: string = 'AttestationAgentError';
  readonly code: AttestationAgentErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: AttestationAgentErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'AGENT_FAILED';
  }
}

/** `GetToken` with a type other than `kbs` or `coco_as`. */
export class UnsupportedTokenType extends AttestationAgentError {
  override readonly code: AttestationAgentErrorCode = 'UNSUPPORTED_TOKEN_TYPE';
  override readonly name: string = 'UnsupportedTokenType';
  readonly tokenType: string;
  constructor(tokenType: string) {
    super(`Unsupported token type ${JSON.stringify(tokenType.slice(0, 64))}`);
    this.tokenType = tokenType;
  }
}

/** `GetToken` for a token type whose `[token_configs.*]` table is absent. */
export class TokenConfigMissing extends AttestationAgentError {
  override readonly code: AttestationAgentErrorCode = 'TOKEN_CONFIG_MISSING';
  override readonly name: string = 'TokenConfigMissing';
  constructor(tokenType: string) {
    super(`${tokenType} token config not configured in config file`);
  }
}

/** `GetEvidence` runtime data above the agent's bound. */
export class RuntimeDataTooLarge extends AttestationAgentError {
  override readonly code: AttestationAgentErrorCode = 'RUNTIME_DATA_TOO_LARGE';
  override readonly name: string = 'RuntimeDataTooLarge';
}

/** `ExtendRuntimeMeasurement` with a register index no TEE has. */
export class InvalidRegisterIndex extends AttestationAgentError {
  override readonly code: AttestationAgentErrorCode = 'INVALID_REGISTER_INDEX';
  override readonly name: string = 'InvalidRegisterIndex';
}

/** The CoCo attestation service refused the evidence or answered something unusable. */
export class CocoAsTokenFailed extends AttestationAgentError {
  override readonly code: AttestationAgentErrorCode = 'COCO_AS_TOKEN_FAILED';
  override readonly name: string = 'CocoAsTokenFailed';
}

/** The init-data given at start-up could not be read, or does not match the TEE. */
export class InitDataBindingFailed extends AttestationAgentError {
  override readonly code: AttestationAgentErrorCode = 'INITDATA_BINDING_FAILED';
  override readonly name: string = 'InitDataBindingFailed';
}
