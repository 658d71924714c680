/**
 * Errors of the standalone attestation service's front ends (configuration,
 * gRPC and REST requests). They share `AttestationServiceError`, whose `code`
 * says what failed; callers branch on `code` (or on the class), never on
 * `name`. The errors of the service itself come from `@broker/attestation`
 * (`AttestationError`).
 */
export type AttestationServiceErrorCode =
  /** The AS configuration file cannot be used (`AsConfigError`). */
  | 'CONFIG_INVALID'
  /** A gRPC request that cannot be parsed; answered with status ABORTED and the message. */
  | 'REQUEST_ABORTED'
  /** A REST request refused with an HTTP status (413 for a large body, 400 for a malformed one). */
  | 'HTTP_REQUEST_REFUSED'
  /** A REST request answered 500, as trustee's service answers it (an undecodable policy, a TEE it does not serve). */
  | 'REQUEST_FAILED'
  /** The address to listen on is not HOST:PORT. */
  | 'ADDRESS_INVALID';

export class AttestationServiceError extends Error {
  override readonly name: string = 'AttestationServiceError';
  readonly code: AttestationServiceErrorCode;
  constructor(code: AttestationServiceErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}
