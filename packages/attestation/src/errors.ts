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
export class AttestationFailed extends Error {
  override readonly name: string = 'AttestationFailed';
  readonly reason: AttestationFailureReason;
  constructor(reason: AttestationFailureReason, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.reason = reason;
  }
}

/** A Rego attestation policy does not compile; nothing was stored. */
export class ParsePolicyError extends Error {
  override readonly name: string = 'ParsePolicyError';
  readonly policyId: string;
  constructor(policyId: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.policyId = policyId;
  }
}

/** A policy id that cannot name a stored policy. */
export class InvalidPolicyId extends Error {
  override readonly name: string = 'InvalidPolicyId';
}

export type RemoteWriteRefusedCode = 'UNAUTHENTICATED' | 'PERMISSION_DENIED';

/**
 * The remote attestation service (`coco_as_grpc`) refused a policy or reference value write: it requires
 * a credential the KBS did not present (`UNAUTHENTICATED`) or one it does not accept for writes
 * (`PERMISSION_DENIED`). The message names the configuration keys to set.
 */
export class RemoteWriteRefused extends Error {
  override readonly name: string = 'RemoteWriteRefused';
  readonly code: RemoteWriteRefusedCode;
  constructor(code: RemoteWriteRefusedCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}
