/**
 * Errors of sealed-secret handling. Each class is one variant of
 * guest-components' `SecretError` (`confidential-data-hub/hub/src/secret/
 * error.rs`), and its message starts with that variant's Display text, so
 * callers that grep upstream's wording find it. Where upstream's Display
 * stops at a fixed text and keeps the cause for its log only ("unseal vault
 * secret failed"), we append the cause after `: `, as the data hub does for
 * `Get Resource failed`.
 *
 * No message carries a plaintext, a DEK or a private key. Values taken from a
 * pointer (kid, resource names) are shown bounded and with control
 * characters escaped.
 */

/** The text of an untrusted value for a message: bounded, control characters visible. */
export function shown(value: string, max = 256): string {
  const clean = value.replace(
    /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
}

/** What failed; callers branch on it (or on the subclass), never on `name`. */
export type SealedSecretErrorCode =
  /** The sealed secret is not `sealed.<header>.<payload>.<signature>` with a valid payload (`SealedSecretParseFailed`). */
  | 'PARSE_FAILED'
  /** The signing key is unusable (`SigningKeyError`). */
  | 'BAD_SIGNING_KEY'
  /** The signature does not verify (`SignatureVerificationFailed`). */
  | 'SIGNATURE_INVALID'
  /** The verification key is not JSON (`KeyJsonError`). */
  | 'KEY_JSON_INVALID'
  /** The verification key could not be fetched from the KBS (`KeyFetchFailed`). */
  | 'KEY_FETCH_FAILED'
  /** The verification key file could not be read (`KeyFileError`). */
  | 'KEY_FILE_UNREADABLE'
  /** The secret's version is not 0.1.0 (`SecretVersionError`). */
  | 'VERSION_UNSUPPORTED'
  /** A vault secret could not be unsealed (`UnsealVaultFailed`). */
  | 'UNSEAL_VAULT_FAILED'
  /** An envelope secret could not be unsealed (`UnsealEnvelopeFailed`). */
  | 'UNSEAL_ENVELOPE_FAILED'
  /** A payload cannot be sealed (`SealFailed`). */
  | 'SEAL_FAILED'
  /** A key provider failed (`KmsError`). */
  | 'KMS_FAILED'
  /** A decryption step of an envelope failed (`EnvelopeCryptoError`). */
  | 'ENVELOPE_CRYPTO_FAILED'
  /** A JSON text has the wrong shape or depth (`JsonShapeError`). */
  | 'JSON_SHAPE_INVALID'
  /** A payload is not a `Secret` (`PayloadShapeError`). */
  | 'PAYLOAD_SHAPE_INVALID'
  /** A Kubernetes name or key is not valid (`InvalidK8sName`). */
  | 'K8S_NAME_INVALID'
  /** A folder was moved or replaced while in use (`FolderMovedError`). */
  | 'FOLDER_MOVED'
  /** A command's input or output file could not be used. */
  | 'CLI_FAILED'
  /** The confidential data hub or the attestation agent cannot be reached on its socket. */
  | 'SERVICE_UNREACHABLE'
  /** A name inside a held folder that is not a plain file name. */
  | 'FILE_NAME_INVALID'
  /** A folder cannot be held open (no /proc/self/fd). */
  | 'FOLDER_UNHOLDABLE'
  /** An unsealed value for an environment variable is not UTF-8 text without NUL bytes. */
  | 'SECRET_NOT_TEXT';

/** The base of every sealed-secret error: `code` says what failed. */
export class SealedSecretError extends Error {
  override readonly name: string = 'SealedSecretError';
  readonly code: SealedSecretErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: SealedSecretErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'SEAL_FAILED';
  }
}

/** `ParseFailed`: "parse SealedSecret failed: <reason>". */
export class SealedSecretParseFailed extends SealedSecretError {
  override readonly name: string = 'SealedSecretParseFailed';
  override readonly code = 'PARSE_FAILED';
  /** Upstream's reason text, without the prefix. */
  readonly reason: string;
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`parse SealedSecret failed: ${reason}`, options);
    this.reason = reason;
  }
}

/** `BadSigningKey`: "Signing key error: <reason>" (wrong `alg`, not a P-256 key, unusable key). */
export class SigningKeyError extends SealedSecretError {
  override readonly name: string = 'SigningKeyError';
  override readonly code = 'BAD_SIGNING_KEY';
  readonly reason: string;
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`Signing key error: ${reason}`, options);
    this.reason = reason;
  }
}

/**
 * `SignatureError`: the signature is not 64 bytes, not a valid (r, s), or
 * does not verify. p256's error Display is "signature error" in every case.
 */
export class SignatureVerificationFailed extends SealedSecretError {
  override readonly name: string = 'SignatureVerificationFailed';
  override readonly code = 'SIGNATURE_INVALID';
  constructor(options?: { cause?: unknown }) {
    super('Signature Error: signature error', options);
  }
}

/** `JsonError`: the verification key is not a JSON document. */
export class KeyJsonError extends SealedSecretError {
  override readonly name: string = 'KeyJsonError';
  override readonly code = 'KEY_JSON_INVALID';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`JSON Parsing Error: ${detail}`, options);
  }
}

/** `KmsError`: the verification key could not be fetched from the KBS. */
export class KeyFetchFailed extends SealedSecretError {
  override readonly name: string = 'KeyFetchFailed';
  override readonly code = 'KEY_FETCH_FAILED';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`Failed to get key from KMS: ${detail}`, options);
  }
}

/** `IoError`: the verification key file could not be resolved or read. */
export class KeyFileError extends SealedSecretError {
  override readonly name: string = 'KeyFileError';
  override readonly code = 'KEY_FILE_UNREADABLE';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`IO Operation Failed: ${detail}`, options);
  }
}

/** `VersionError`. */
export class SecretVersionError extends SealedSecretError {
  override readonly name: string = 'SecretVersionError';
  override readonly code = 'VERSION_UNSUPPORTED';
  constructor() {
    super('version not supported, only 0.1.0 supported');
  }
}

/** `UnsealVaultFailed`: "unseal vault secret failed", then the provider's failure. */
export class UnsealVaultFailed extends SealedSecretError {
  override readonly name: string = 'UnsealVaultFailed';
  override readonly code = 'UNSEAL_VAULT_FAILED';
  readonly detail: string;
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`unseal vault secret failed: ${detail}`, options);
    this.detail = detail;
  }
}

/** `UnsealEnvelopeFailed`: "unseal envelope secret failed", then the step that failed. */
export class UnsealEnvelopeFailed extends SealedSecretError {
  override readonly name: string = 'UnsealEnvelopeFailed';
  override readonly code = 'UNSEAL_ENVELOPE_FAILED';
  readonly detail: string;
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`unseal envelope secret failed: ${detail}`, options);
    this.detail = detail;
  }
}

/** A payload cannot be sealed (not the fields upstream serializes, bad settings JSON, bad key). */
export class SealFailed extends SealedSecretError {
  override readonly name: string = 'SealFailed';
  override readonly code = 'SEAL_FAILED';
}

/** A key provider failure below the secret layer; upstream kms `Error` Display texts. */
export class KmsError extends SealedSecretError {
  override readonly name: string = 'KmsError';
  override readonly code = 'KMS_FAILED';
  static kbsClient(detail: string, options?: { cause?: unknown }): KmsError {
    return new KmsError(`Kbs client error: ${detail}`, options);
  }
  static unsupportedProvider(provider: string, why: string): KmsError {
    return new KmsError(`Unsupported provider: ${shown(provider, 64)} (${why})`);
  }
}
