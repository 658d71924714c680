export type PolicyCheckCode =
  /** The policy does not define the rule its kind is evaluated by. */
  | 'missing_rule'
  /** Its evaluation on the representative input (or an earlier one) exceeded a limit. */
  | 'limit_exceeded'
  /** Too many checks and dry runs are waiting; try again. */
  | 'busy';

/**
 * What failed in the attestation service. Every error of this package extends
 * `AttestationError`; callers branch on `code` (or on the class), never on
 * `name`. `PolicyCheckError` and `RemoteWriteRefused` keep the codes they
 * always had (their `PolicyCheckCode` and `RemoteWriteRefusedCode`).
 */
export type AttestationErrorCode =
  /** Evidence was not turned into a token (`AttestationFailed`; `reason` says which step). */
  | 'ATTESTATION_FAILED'
  /** A Rego attestation policy does not compile (`ParsePolicyError`). */
  | 'POLICY_PARSE_FAILED'
  /** A policy id that cannot name a stored policy (`InvalidPolicyId`). */
  | 'INVALID_POLICY_ID'
  /** The remote attestation service refused a write (`RemoteWriteRefused`). */
  | RemoteWriteRefusedCode
  /** A policy was refused before it is stored or dry run (`PolicyCheckError`). */
  | PolicyCheckCode;

export class AttestationError extends Error {
  override readonly name: string = 'AttestationError';
  readonly code: AttestationErrorCode;
  constructor(code: AttestationErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export type AttestationFailureReason =
  /** No verifier for the TEE, or the verifier rejected the evidence. */
  | 'EVIDENCE'
  /** Runtime data could not be hashed, or initdata is malformed or in an unsupported format. */
  | 'REQUEST'
  /** The attestation policy is missing, failed to evaluate, or returned unusable results. */
  | 'POLICY'
  /** The token could not be built or signed. */
  | 'TOKEN';

/**
 * Evidence was not turned into a token. The KBS reports it as `AttestationError`
 * (401). The message is safe to return to the guest; `cause` is for logs.
 */
export class AttestationFailed extends AttestationError {
  override readonly name: string = 'AttestationFailed';
  readonly reason: AttestationFailureReason;
  constructor(reason: AttestationFailureReason, message: string, options?: { cause?: unknown }) {
    super('ATTESTATION_FAILED', message, options);
    this.reason = reason;
  }
}

/** A Rego attestation policy does not compile; nothing was stored. */
export class ParsePolicyError extends AttestationError {
  override readonly name: string = 'ParsePolicyError';
  readonly policyId: string;
  constructor(policyId: string, message: string, options?: { cause?: unknown }) {
    super('POLICY_PARSE_FAILED', message, options);
    this.policyId = policyId;
  }
}

/** A policy id that cannot name a stored policy. */
export class InvalidPolicyId extends AttestationError {
  override readonly name: string = 'InvalidPolicyId';
  constructor(message: string, options?: { cause?: unknown }) {
    super('INVALID_POLICY_ID', message, options);
  }
}

export type RemoteWriteRefusedCode = 'UNAUTHENTICATED' | 'PERMISSION_DENIED';

/**
 * The remote attestation service (`coco_as_grpc`) refused a policy or reference value write: it requires
 * a credential the KBS did not present (`UNAUTHENTICATED`) or one it does not accept for writes
 * (`PERMISSION_DENIED`). The message names the configuration keys to set.
 */
export class RemoteWriteRefused extends AttestationError {
  override readonly name: string = 'RemoteWriteRefused';
  declare readonly code: RemoteWriteRefusedCode;
  constructor(code: RemoteWriteRefusedCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}
