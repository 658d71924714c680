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

export class SealedSecretError extends Error {
  override readonly name: string = 'SealedSecretError';
}

/** `ParseFailed`: "parse SealedSecret failed: <reason>". */
export class SealedSecretParseFailed extends SealedSecretError {
  override readonly name: string = 'SealedSecretParseFailed';
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
  constructor(options?: { cause?: unknown }) {
    super('Signature Error: signature error', options);
  }
}

/** `JsonError`: the verification key is not a JSON document. */
export class KeyJsonError extends SealedSecretError {
  override readonly name: string = 'KeyJsonError';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`JSON Parsing Error: ${detail}`, options);
  }
}

/** `KmsError`: the verification key could not be fetched from the KBS. */
export class KeyFetchFailed extends SealedSecretError {
  override readonly name: string = 'KeyFetchFailed';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`Failed to get key from KMS: ${detail}`, options);
  }
}

/** `IoError`: the verification key file could not be resolved or read. */
export class KeyFileError extends SealedSecretError {
  override readonly name: string = 'KeyFileError';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`IO Operation Failed: ${detail}`, options);
  }
}

/** `VersionError`. */
export class SecretVersionError extends SealedSecretError {
  override readonly name: string = 'SecretVersionError';
  constructor() {
    super('version not supported, only 0.1.0 supported');
  }
}

/** `UnsealVaultFailed`: "unseal vault secret failed", then the provider's failure. */
export class UnsealVaultFailed extends SealedSecretError {
  override readonly name: string = 'UnsealVaultFailed';
  readonly detail: string;
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`unseal vault secret failed: ${detail}`, options);
    this.detail = detail;
  }
}

/** `UnsealEnvelopeFailed`: "unseal envelope secret failed", then the step that failed. */
export class UnsealEnvelopeFailed extends SealedSecretError {
  override readonly name: string = 'UnsealEnvelopeFailed';
  readonly detail: string;
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`unseal envelope secret failed: ${detail}`, options);
    this.detail = detail;
  }
}

/** A payload cannot be sealed (not the fields upstream serializes, bad settings JSON, bad key). */
export class SealFailed extends SealedSecretError {
  override readonly name: string = 'SealFailed';
}

/** A key provider failure below the secret layer; upstream kms `Error` Display texts. */
export class KmsError extends SealedSecretError {
  override readonly name: string = 'KmsError';
  static kbsClient(detail: string, options?: { cause?: unknown }): KmsError {
    return new KmsError(`Kbs client error: ${detail}`, options);
  }
  static unsupportedProvider(provider: string, why: string): KmsError {
    return new KmsError(`Unsupported provider: ${shown(provider, 64)} (${why})`);
  }
}
