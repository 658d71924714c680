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
  | 'VERIFIER_NOT_SUPPORTED'
  /** A binary structure inside the evidence (SNP report, HCL report, TPM quote or signature) is truncated or inconsistent. */
  | 'REPORT_MALFORMED'
  /** The evidence or report version is one this verifier does not handle. */
  | 'UNSUPPORTED_VERSION'
  /** The report names a processor generation without known AMD roots. */
  | 'UNSUPPORTED_PROCESSOR'
  /** A signature or key algorithm this verifier does not accept. */
  | 'UNSUPPORTED_ALGORITHM'
  /** The hardware report's signature does not verify with the endorsement key (VCEK/VLEK). */
  | 'REPORT_SIGNATURE_INVALID'
  /** The TPM quote's signature does not verify with the attestation key. */
  | 'QUOTE_SIGNATURE_INVALID'
  /** The attestation key is missing or not a usable public key. */
  | 'AK_INVALID'
  /** The PCR values sent do not hash to the quote's PCR digest, or do not match its PCR selection. */
  | 'PCR_DIGEST_MISMATCH'
  /** The HCL runtime claims (variable data) are not the ones the SNP report vouches for. */
  | 'HCL_DATA_MISMATCH'
  /** A certificate cannot be parsed, or lacks or garbles a required extension. */
  | 'CERT_MALFORMED'
  /** The evidence carries no VCEK and no configured source (offline store, KDS) supplied one. */
  | 'VCEK_UNAVAILABLE'
  /** The endorsement key certificate does not chain to a trusted root. */
  | 'CERT_CHAIN_INVALID'
  /** A certificate of the chain is not valid at the verification time. */
  | 'CERT_NOT_VALID_AT_TIME'
  /** The TCB in the endorsement key certificate differs from the report's reported TCB. */
  | 'TCB_MISMATCH'
  /** The VCEK was issued for another chip than the one that produced the report. */
  | 'CHIP_ID_MISMATCH'
  /** The report was not requested at the required VMPL. */
  | 'VMPL_MISMATCH'
  /** The initdata digest is not the one bound into the evidence (PCR8, HOST_DATA, MR_CONFIG_ID). */
  | 'INIT_DATA_MISMATCH'
  /** TDX: no Intel collateral (TCB info, QE identity) is configured. */
  | 'COLLATERAL_UNAVAILABLE'
  /** TDX: a collateral document is malformed, unsigned, or signed by an untrusted certificate. */
  | 'COLLATERAL_INVALID'
  /** TDX: the collateral is not for this platform (no TCB info for its FMSPC, another PCE id). */
  | 'COLLATERAL_MISMATCH'
  /** TDX: the quoting enclave is not the one the QE identity describes. */
  | 'QE_IDENTITY_MISMATCH'
  /** TDX: no TCB level of the collateral covers the platform, QE or TDX module. */
  | 'TCB_NOT_SUPPORTED'
  /** TDX: the platform, QE or TDX module TCB is revoked. */
  | 'TCB_REVOKED'
  /** TDX: replaying the event log does not give the quote's RTMRs. */
  | 'EVENT_LOG_MISMATCH'
  /** A certificate of the chain is on its issuer's revocation list. */
  | 'CERT_REVOKED';

/** What failed in this package: a verdict on the evidence (`VerificationErrorCode`) or a failure around it. */
export type VerifierErrorCode =
  | VerificationErrorCode
  /** A collateral request (PCS, PCCS, KDS) brought no complete answer: connection, TLS, timeout or size (`HttpGetError`). */
  | 'HTTP_GET_FAILED'
  /** Roots or certificates built into this program do not verify: a build defect, not bad evidence. */
  | 'BUILTIN_CERTS_INVALID'
  /** One configured VCEK source (offline store, KDS) could not give the VCEK; the next one is tried. */
  | 'VCEK_SOURCE_FAILED';

/**
 * The base of every error of this package. Its subclass `VerificationError` is a verdict on the
 * evidence; the others (an HTTP failure, a build defect) are not, so catch sites that turn
 * `VerificationError`s into rejections leave them alone.
 */
export class VerifierError extends Error {
  override readonly name: string = 'VerifierError';
  readonly code: VerifierErrorCode;
  constructor(code: VerifierErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export class VerificationError extends VerifierError {
  override readonly name: string = 'VerificationError';
  override readonly code: VerificationErrorCode;
  constructor(code: VerificationErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
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
