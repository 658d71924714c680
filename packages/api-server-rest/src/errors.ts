// Errors of the guest REST API: one base class whose `code` says what failed.

/** What the guest REST API failed at; callers branch on it (or on the class), never on `name`. */
export type ApiServerErrorCode =
  /** A call to the data hub or the attestation agent failed (`BackendError`). */
  | 'BACKEND_FAILED'
  /** The request body is larger than the cap (`BodyTooLargeError`). */
  | 'BODY_TOO_LARGE'
  /** The body of `POST /aa/aael` is malformed (`AaelEventError`). */
  | 'AAEL_EVENT_INVALID'
  /** `runtime_data` could not be turned into bytes (`RuntimeDataError`). */
  | 'RUNTIME_DATA_INVALID'
  /** `--bind` is not an `IP:port` socket address (`InvalidBindAddress`). */
  | 'BIND_ADDRESS_INVALID'
  /** `API_SERVER_REST_TTRPC_TIMEOUT_MS` is not a positive number of milliseconds. */
  | 'TIMEOUT_INVALID'
  /** `--features` names none of the features. */
  | 'FEATURES_UNKNOWN'
  /** `--plugins` names something that cannot be an allowed KBS plugin, or the resource feature is off. */
  | 'PLUGINS_INVALID'
  /** The HTTP server cannot listen on `--bind`. */
  | 'LISTEN_FAILED'
  /** Any other failure. */
  | 'API_SERVER_FAILED';

/** The base of every error of this package: `code` says what failed; branch on it or on the class, never on `name`. */
export class ApiServerError extends Error {
  override readonly name: string = 'ApiServerError';
  readonly code: ApiServerErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: ApiServerErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'API_SERVER_FAILED';
  }
}
