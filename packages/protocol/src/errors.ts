/**
 * Error classes of the protocol library. Each names what failed so callers can
 * map them to KBS error kinds without parsing messages.
 */

/** A KBS protocol message (request, challenge, attestation, JWK, JSON) is malformed. */
export class ProtocolError extends Error {
  override readonly name: string = 'ProtocolError';
  /** Dotted path of the offending member, e.g. `runtime-data.tee-pubkey.x`. */
  readonly field: string;
  constructor(field: string, message: string, options?: { cause?: unknown }) {
    super(field ? `${field}: ${message}` : message, options);
    this.field = field;
  }
}

/** A resource URI or resource path does not follow the KBS rules. */
export class InvalidResourceUri extends Error {
  override readonly name: string = 'InvalidResourceUri';
  readonly input: string;
  constructor(input: string, message: string) {
    super(
      `invalid resource URI ${JSON.stringify(input.length > 200 ? `${input.slice(0, 200)}…` : input)}: ${message}`,
    );
    this.input = input;
  }
}

/** Base class of JWE failures. */
export class JweError extends Error {
  override readonly name: string = 'JweError';
}

/** The JWE JSON or its protected header is malformed. */
export class JweInvalid extends JweError {
  override readonly name: string = 'JweInvalid';
}

/** The JWE or key uses an algorithm, curve or key type this library does not support. */
export class JweNotSupported extends JweError {
  override readonly name: string = 'JweNotSupported';
}

/**
 * Decryption failed: wrong key, tampered header, key, IV, ciphertext or tag.
 * Deliberately carries no detail about which step failed (no padding oracle).
 */
export class JweDecryptionFailed extends JweError {
  override readonly name: string = 'JweDecryptionFailed';
  constructor() {
    super('JWE decryption failed');
  }
}

/** Initdata TOML, digest or annotation is malformed or unsupported. */
export class InitDataError extends Error {
  override readonly name: string = 'InitDataError';
}
