// Errors of the guest API clients: one base class whose `code` says what failed.

/** What a guest API client failed at; callers branch on it (or on the class), never on `name`. */
export type GuestApiErrorCode =
  /** `GetToken("kbs")` bytes that are not `{"token", "tee_keypair"}` (`InvalidKbsTokenReply`). */
  | 'KBS_TOKEN_REPLY_INVALID'
  /** Any other failure. */
  | 'GUEST_API_FAILED';

/** The base of every error of this package: `code` says what failed; branch on it or on the class, never on `name`. */
export class GuestApiError extends Error {
  override readonly name: string = 'GuestApiError';
  readonly code: GuestApiErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: GuestApiErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'GUEST_API_FAILED';
  }
}
