/**
 * Errors of the token and certificate checks. They share `AuthError`, whose
 * `code` says what failed; callers branch on `code` (or on the class), never
 * on `name`. Messages keep trustee's texts where the KBS answers with them.
 */
export type AuthErrorCode =
  /** An admin request refused or admin access that cannot be set up (`AdminError`). */
  | 'ADMIN_FAILED'
  /** The admin token is missing, invalid, or its role is not allowed (`AdminAccessDenied`). */
  | 'ADMIN_ACCESS_DENIED'
  /** A JWT that does not verify (`JwtVerificationError`). */
  | 'JWT_INVALID'
  /** A JWT past `exp` plus the leeway (`JwtExpired`). */
  | 'JWT_EXPIRED'
  /** An `x5c` chain or certificate that cannot be parsed or does not reach a trusted root (`X5cError`). */
  | 'X5C_INVALID'
  /** Trust material (keys, JWK sets, certificates) that cannot be read (`TrustMaterialError`). */
  | 'TRUST_MATERIAL_UNAVAILABLE'
  /** A write without a credential (`WriteAuthError`). */
  | 'UNAUTHENTICATED'
  /** A write with a credential that is not accepted for writes (`WriteAuthError`). */
  | 'PERMISSION_DENIED'
  /** Write authentication configured wrongly (`WriteAuthError`). */
  | 'INVALID_CONFIG'
  /** A key to sign admin tokens with that cannot be read or signs no algorithm the KBS accepts (`InvalidAdminKey`). */
  | 'INVALID_ADMIN_KEY'
  /** Any other failure (the base class used directly). */
  | 'AUTH_FAILED';

export class AuthError extends Error {
  override readonly name: string = 'AuthError';
  readonly code: AuthErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: AuthErrorCode }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    // Each subclass names its code once, as a static; an explicit `code` wins.
    const fallback = (new.target as { readonly defaultCode?: AuthErrorCode }).defaultCode;
    this.code = options?.code ?? fallback ?? 'AUTH_FAILED';
  }
}
