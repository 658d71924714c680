/**
 * Why a verification failed. Callers branch on `code`; the message is for logs
 * and never carries secrets (evidence is not secret, but we still keep
 * messages short and bounded).
 */
export type VerificationErrorCode =
  /** The evidence is not the JSON shape this TEE's verifier expects. */
  | 'EVIDENCE_MALFORMED'
  /** A member of the evidence exceeds the verifier's size limit. */
  | 'EVIDENCE_TOO_LARGE'
  /** The report data bound into the evidence is not the expected digest. */
  | 'REPORT_DATA_MISMATCH'
  /** No verifier for this TEE is built into this program. */
  | 'VERIFIER_NOT_SUPPORTED';

export class VerificationError extends Error {
  override readonly name: string = 'VerificationError';
  readonly code: VerificationErrorCode;
  constructor(code: VerificationErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export class VerifierNotSupported extends VerificationError {
  override readonly name: string = 'VerifierNotSupported';
  readonly tee: string;
  constructor(tee: string) {
    super('VERIFIER_NOT_SUPPORTED', `no verifier for TEE ${quote(tee)} in this build`);
    this.tee = tee;
  }
}

/** JSON-quotes a string for a message, cut to a bounded length. */
export function quote(s: string, max = 64): string {
  return JSON.stringify(s.length > max ? `${s.slice(0, max)}…` : s);
}
