export type RvpsErrorCode =
  /** The message is not JSON, not an object, or misses `type`/`payload`. */
  | 'MESSAGE_MALFORMED'
  /** The message or its payload exceeds a size, count or depth limit. */
  | 'MESSAGE_TOO_LARGE'
  /** `version` is not 0.1.0. */
  | 'VERSION_MISMATCH'
  /** A provenance type this RVPS does not extract (swid, corim, unknown). */
  | 'UNSUPPORTED_TYPE'
  /** The payload is not valid for its type (bad base64, bad JSON, bad names). */
  | 'PAYLOAD_MALFORMED'
  /** A stored reference value cannot be read back. */
  | 'RECORD_CORRUPT'
  /** The RVPS configuration file cannot be used (`RvpsConfigError`). */
  | 'CONFIG_INVALID'
  /** A gRPC request's bytes do not decode (the health check's). */
  | 'REQUEST_MALFORMED'
  /** A call to an RVPS failed: the gRPC status it answered (`RvpsClientError`). */
  | number;

/**
 * A reference value could not be registered or read; the KBS reports it as `RvpsError`. Every error
 * of this package extends it (`RvpsClientError` too, whose `code` is the numeric gRPC status of a
 * failed call); callers branch on `code` or on the class, never on `name`.
 */
export class RvpsError extends Error {
  override readonly name: string = 'RvpsError';
  readonly code: RvpsErrorCode;
  constructor(code: RvpsErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export function quote(s: string, max = 64): string {
  return JSON.stringify(s.length > max ? `${s.slice(0, max)}…` : s);
}

/** The RVPS configuration file cannot be used. */
export class RvpsConfigError extends RvpsError {
  override readonly name: string = 'RvpsConfigError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONFIG_INVALID', message, options);
  }
}
