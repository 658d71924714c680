/**
 * Errors of the KBS client. They share one base class with a typed `code`,
 * so callers branch on `code` (or `instanceof` a subclass) without parsing
 * messages; a KBS rejection also carries the error type and detail from the
 * response body, `kind` being trustee's variant.
 */
import type { KbsErrorKind } from '@broker/protocol';

export type KbsClientErrorCode =
  /** The KBS could not be reached: DNS, TCP, reset, timeout. */
  | 'KBS_UNREACHABLE'
  /** TLS: the KBS's certificate does not verify against the trusted roots (or its name does not match). */
  | 'TLS_UNTRUSTED'
  /** The KBS answered with something unusable: oversize, not JSON, wrong shape. */
  | 'BAD_RESPONSE'
  /** The KBS refused the request with an error status. */
  | 'REJECTED'
  /** The KBS answered 401 (after the retries the operation allows). */
  | 'UNAUTHORIZED'
  /** The resource is not there: a 404, or trustee's 401 `PluginInternalError` for a resource read. */
  | 'RESOURCE_NOT_FOUND'
  /** The RCAR handshake (auth, evidence, attest) failed on every attempt. */
  | 'HANDSHAKE_FAILED'
  /** The challenge names a hash algorithm the client does not know. */
  | 'INVALID_HASH_ALGORITHM'
  /** The attester could not produce evidence. */
  | 'EVIDENCE_FAILED'
  /** The resource response is not a JWE the TEE key opens. */
  | 'DECRYPTION_FAILED'
  /** A TEE key file or algorithm is unusable. */
  | 'INVALID_TEE_KEY'
  /** An attestation token could not be decoded. */
  | 'INVALID_TOKEN'
  /** A resource path or URI the client refuses to request. */
  | 'INVALID_RESOURCE_PATH'
  /** A file or value given on the command line is unusable. */
  | 'INVALID_INPUT'
  /** Any other failure (the base class used directly). */
  | 'CLIENT_FAILURE';

export class KbsClientError extends Error {
  override readonly name: string = 'KbsClientError';
  readonly code: KbsClientErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: KbsClientErrorCode }) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    // Each subclass names its code once, as a static; an explicit `code` wins.
    const fallback = (new.target as { readonly defaultCode?: KbsClientErrorCode }).defaultCode;
    this.code = options?.code ?? fallback ?? 'CLIENT_FAILURE';
  }
}

/** The KBS could not be reached: DNS, TCP, TLS (e.g. an untrusted certificate), timeout, reset. */
export class KbsUnreachable extends KbsClientError {
  override readonly name: string = 'KbsUnreachable';
  static readonly defaultCode: KbsClientErrorCode = 'KBS_UNREACHABLE';
}

/** The KBS's TLS certificate does not verify against the trusted roots; retrying cannot help. */
export class KbsUntrustedCertificate extends KbsUnreachable {
  override readonly name: string = 'KbsUntrustedCertificate';
  static override readonly defaultCode: KbsClientErrorCode = 'TLS_UNTRUSTED';
}

/** The KBS answered with something the client cannot use: oversize, not JSON, wrong shape, bad token. */
export class KbsBadResponse extends KbsClientError {
  override readonly name: string = 'KbsBadResponse';
  static readonly defaultCode: KbsClientErrorCode = 'BAD_RESPONSE';
}

export interface KbsRejection {
  readonly status: number;
  /** The `type` URI from the error body, or null when the body was not a KBS error body. */
  readonly type: string | null;
  /** trustee's variant named by `type`, or null when unknown. */
  readonly kind: KbsErrorKind | null;
  /** The `detail` from the error body, or the (truncated) body text. */
  readonly detail: string;
}

/** The KBS refused a request with an error status. */
export class KbsRejected extends KbsClientError implements KbsRejection {
  override readonly name: string = 'KbsRejected';
  static readonly defaultCode: KbsClientErrorCode = 'REJECTED';
  readonly status: number;
  readonly type: string | null;
  readonly kind: KbsErrorKind | null;
  readonly detail: string;
  /** What the user can do about it, when the caller knows. */
  readonly hint: string | undefined;
  constructor(what: string, rejection: KbsRejection, options?: { cause?: unknown; hint?: string }) {
    const label = rejection.kind ?? rejection.type ?? 'no KBS error type';
    super(
      `${what}: HTTP ${rejection.status} (${label}): ${rejection.detail}`,
      options?.cause !== undefined ? { cause: options.cause } : undefined,
    );
    this.hint = options?.hint;
    this.status = rejection.status;
    this.type = rejection.type;
    this.kind = rejection.kind;
    this.detail = rejection.detail;
  }
}

/** 401 from the KBS (after the retries the operation allows). */
export class KbsUnauthorized extends KbsRejected {
  override readonly name: string = 'KbsUnauthorized';
  static override readonly defaultCode: KbsClientErrorCode = 'UNAUTHORIZED';
}

/** 404 for a resource: trustee's `InvalidRequestPath` or `PluginNotFound`. */
export class KbsResourceNotFound extends KbsRejected {
  override readonly name: string = 'KbsResourceNotFound';
  static override readonly defaultCode: KbsClientErrorCode = 'RESOURCE_NOT_FOUND';
}

/**
 * The 401 `PluginInternalError` trustee's resource plugin answers for a path it has nothing stored
 * at (or whose storage failed): still a 401 as upstream's clients see it, but final, since another
 * handshake cannot make the resource appear.
 */
export class KbsResourceMissing extends KbsUnauthorized {
  override readonly name: string = 'KbsResourceMissing';
  static override readonly defaultCode: KbsClientErrorCode = 'RESOURCE_NOT_FOUND';
}

/** The RCAR handshake (auth, evidence, attest) failed on every attempt. */
export class RcarHandshakeFailed extends KbsClientError {
  override readonly name: string = 'RcarHandshakeFailed';
  static readonly defaultCode: KbsClientErrorCode = 'HANDSHAKE_FAILED';
  readonly attempts: number;
  constructor(attempts: number, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    // Upstream words the two cases differently: the retried handshake of get_token, and the
    // single re-handshake after a 401 on a resource.
    super(
      attempts > 1
        ? `Unable to get token. RCAR handshake retried ${attempts} times. Final attempt failed with: ${why}`
        : `RCAR handshake failed: ${why}`,
      { cause },
    );
    this.attempts = attempts;
  }
}

/** The challenge selected a hash algorithm the client does not know, or gave it in the wrong JSON type. */
export class InvalidHashAlgorithm extends KbsClientError {
  override readonly name: string = 'InvalidHashAlgorithm';
  static readonly defaultCode: KbsClientErrorCode = 'INVALID_HASH_ALGORITHM';
}

/** Collecting evidence from the attester failed. */
export class EvidenceFailed extends KbsClientError {
  override readonly name: string = 'EvidenceFailed';
  static readonly defaultCode: KbsClientErrorCode = 'EVIDENCE_FAILED';
}

/** The resource response is not a JWE this client's TEE key can open. */
export class ResourceDecryptionFailed extends KbsClientError {
  override readonly name: string = 'ResourceDecryptionFailed';
  static readonly defaultCode: KbsClientErrorCode = 'DECRYPTION_FAILED';
}

/** A TEE key file or algorithm name is unusable. */
export class InvalidTeeKey extends KbsClientError {
  override readonly name: string = 'InvalidTeeKey';
  static readonly defaultCode: KbsClientErrorCode = 'INVALID_TEE_KEY';
}

/** An attestation token could not be decoded (the client reads exp/nbf without verifying). */
export class InvalidToken extends KbsClientError {
  override readonly name: string = 'InvalidToken';
  static readonly defaultCode: KbsClientErrorCode = 'INVALID_TOKEN';
}

/** A resource path or URI the client refuses to request. */
export class InvalidResourcePath extends KbsClientError {
  override readonly name: string = 'InvalidResourcePath';
  static readonly defaultCode: KbsClientErrorCode = 'INVALID_RESOURCE_PATH';
}
