/**
 * Failures of the agent's operations. The ttrpc layer reports each as
 * INTERNAL `[ERROR:attestation-agent] <upstream wording>: <message>`, so
 * messages name what failed and never carry tokens or keys.
 */

export class AttestationAgentError extends Error {
  override readonly name: string = 'AttestationAgentError';
}

/** `GetToken` with a type other than `kbs` or `coco_as`. */
export class UnsupportedTokenType extends AttestationAgentError {
  override readonly name = 'UnsupportedTokenType';
  readonly tokenType: string;
  constructor(tokenType: string) {
    super(`Unsupported token type ${JSON.stringify(tokenType.slice(0, 64))}`);
    this.tokenType = tokenType;
  }
}

/** `GetToken` for a token type whose `[token_configs.*]` table is absent. */
export class TokenConfigMissing extends AttestationAgentError {
  override readonly name = 'TokenConfigMissing';
  constructor(tokenType: string) {
    super(`${tokenType} token config not configured in config file`);
  }
}

/** `GetEvidence` runtime data above the agent's bound. */
export class RuntimeDataTooLarge extends AttestationAgentError {
  override readonly name = 'RuntimeDataTooLarge';
}

/** `ExtendRuntimeMeasurement` with a register index no TEE has. */
export class InvalidRegisterIndex extends AttestationAgentError {
  override readonly name = 'InvalidRegisterIndex';
}

/** The CoCo attestation service refused the evidence or answered something unusable. */
export class CocoAsTokenFailed extends AttestationAgentError {
  override readonly name = 'CocoAsTokenFailed';
}

/** The init-data given at start-up could not be read, or does not match the TEE. */
export class InitDataBindingFailed extends AttestationAgentError {
  override readonly name = 'InitDataBindingFailed';
}
