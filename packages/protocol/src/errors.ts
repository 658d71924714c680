/**
 * Error classes of the protocol library. Each names what failed so callers can
 * map them to KBS error kinds without parsing messages. They share
 * `ProtocolLibraryError`, whose `code` says what failed; callers branch on
 * `code` or on the class, never on `name`.
 */

export type ProtocolErrorCode =
  /** A KBS protocol message (request, challenge, attestation, JWK, JSON) is malformed (`ProtocolError`). */
  | 'MESSAGE_MALFORMED'
  /** A resource URI or resource path does not follow the KBS rules (`InvalidResourceUri`). */
  | 'RESOURCE_URI_INVALID'
  /** The JWE JSON or its protected header is malformed (`JweInvalid`). */
  | 'JWE_INVALID'
  /** The JWE or key uses an algorithm, curve or key type this library does not support (`JweNotSupported`). */
  | 'JWE_NOT_SUPPORTED'
  /** A JWE did not decrypt (`JweDecryptionFailed`). */
  | 'JWE_DECRYPTION_FAILED'
  /** Initdata TOML, digest or annotation is malformed or unsupported (`InitDataError`). */
  | 'INIT_DATA_INVALID'
  /** A KBS error response, sent or received; its `kind` names trustee's variant (`KbsError`). */
  | 'KBS_ERROR';

/** Base class of the protocol library's errors. */
export class ProtocolLibraryError extends Error {
  override readonly name: string = 'ProtocolLibraryError';
  readonly code: ProtocolErrorCode;
  constructor(code: ProtocolErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** A KBS protocol message (request, challenge, attestation, JWK, JSON) is malformed. */
export class ProtocolError extends ProtocolLibraryError {
  override readonly name: string = 'ProtocolError';
  /** Dotted path of the offending member, e.g. `runtime-data.tee-pubkey.x`. */
  readonly field: string;
  constructor(field: string, message: string, options?: { cause?: unknown }) {
    super('MESSAGE_MALFORMED', field ? `${field}: ${message}` : message, options);
    this.field = field;
  }
}

/** A resource URI or resource path does not follow the KBS rules. */
export class InvalidResourceUri extends ProtocolLibraryError {
  override readonly name: string = 'InvalidResourceUri';
  readonly input: string;
  constructor(input: string, message: string) {
    super(
      'RESOURCE_URI_INVALID',
      `invalid resource URI ${JSON.stringify(input.length > 200 ? `${input.slice(0, 200)}…` : input)}: ${message}`,
    );
    this.input = input;
  }
}

/** Base class of JWE failures. */
export class JweError extends ProtocolLibraryError {
  override readonly name: string = 'JweError';
  declare readonly code: 'JWE_INVALID' | 'JWE_NOT_SUPPORTED' | 'JWE_DECRYPTION_FAILED';
  constructor(
    code: 'JWE_INVALID' | 'JWE_NOT_SUPPORTED' | 'JWE_DECRYPTION_FAILED',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

/** The JWE JSON or its protected header is malformed. */
export class JweInvalid extends JweError {
  override readonly name: string = 'JweInvalid';
  constructor(message: string, options?: { cause?: unknown }) {
    super('JWE_INVALID', message, options);
  }
}

/** The JWE or key uses an algorithm, curve or key type this library does not support. */
export class JweNotSupported extends JweError {
  override readonly name: string = 'JweNotSupported';
  constructor(message: string, options?: { cause?: unknown }) {
    super('JWE_NOT_SUPPORTED', message, options);
  }
}

/**
 * Decryption failed: wrong key, tampered header, key, IV, ciphertext or tag.
 * Deliberately carries no detail about which step failed (no padding oracle).
 */
export class JweDecryptionFailed extends JweError {
  override readonly name: string = 'JweDecryptionFailed';
  constructor() {
    super('JWE_DECRYPTION_FAILED', 'JWE decryption failed');
  }
}

/** Initdata TOML, digest or annotation is malformed or unsupported. */
export class InitDataError extends ProtocolLibraryError {
  override readonly name: string = 'InitDataError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('INIT_DATA_INVALID', message, options);
  }
}
