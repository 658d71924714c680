/**
 * Errors of the KBS client. Each class names what failed; a KBS rejection
 * carries the error type and detail from the response body so callers can
 * branch on `kind` (trustee's variant) without parsing messages.
 */
import type { KbsErrorKind } from '@broker/protocol';

export class KbsClientError extends Error {
  override readonly name: string = 'KbsClientError';
}

/** The KBS could not be reached: DNS, TCP, TLS (e.g. an untrusted certificate), timeout, reset. */
export class KbsUnreachable extends KbsClientError {
  override readonly name: string = 'KbsUnreachable';
}

/** The KBS answered with something the client cannot use: oversize, not JSON, wrong shape, bad token. */
export class KbsBadResponse extends KbsClientError {
  override readonly name: string = 'KbsBadResponse';
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
  readonly status: number;
  readonly type: string | null;
  readonly kind: KbsErrorKind | null;
  readonly detail: string;
  constructor(what: string, rejection: KbsRejection, options?: { cause?: unknown }) {
    const label = rejection.kind ?? rejection.type ?? 'no KBS error type';
    super(`${what}: HTTP ${rejection.status} (${label}): ${rejection.detail}`, options);
    this.status = rejection.status;
    this.type = rejection.type;
    this.kind = rejection.kind;
    this.detail = rejection.detail;
  }
}

/** 401 from the KBS (after the retries the operation allows). */
export class KbsUnauthorized extends KbsRejected {
  override readonly name: string = 'KbsUnauthorized';
}

/** 404 for a resource: trustee's `InvalidRequestPath` or `PluginNotFound`. */
export class KbsResourceNotFound extends KbsRejected {
  override readonly name: string = 'KbsResourceNotFound';
}

/** The RCAR handshake (auth, evidence, attest) failed on every attempt. */
export class RcarHandshakeFailed extends KbsClientError {
  override readonly name: string = 'RcarHandshakeFailed';
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
}

/** Collecting evidence from the attester failed. */
export class EvidenceFailed extends KbsClientError {
  override readonly name: string = 'EvidenceFailed';
}

/** The resource response is not a JWE this client's TEE key can open. */
export class ResourceDecryptionFailed extends KbsClientError {
  override readonly name: string = 'ResourceDecryptionFailed';
}

/** A TEE key file or algorithm name is unusable. */
export class InvalidTeeKey extends KbsClientError {
  override readonly name: string = 'InvalidTeeKey';
}

/** An attestation token could not be decoded (the client reads exp/nbf without verifying). */
export class InvalidToken extends KbsClientError {
  override readonly name: string = 'InvalidToken';
}

/** A resource path or URI the client refuses to request. */
export class InvalidResourcePath extends KbsClientError {
  override readonly name: string = 'InvalidResourcePath';
}
