/**
 * The KBS's own errors, inside the process. What a client sees on the wire is
 * trustee's `{"type": …/errors/<Variant>, "detail": …}` body, built from
 * `KbsError` (`@broker/protocol`, branched on by `kind`); these errors are the
 * failures behind it and the ones that stop start-up. They share
 * `KbsServiceError`, whose `code` says what failed; callers branch on `code`
 * or on the class, never on `name`.
 */
export type KbsServiceErrorCode =
  /** The KBS cannot start: configuration, keys, storage or a plugin (`KbsStartupError`). */
  | 'STARTUP_FAILED'
  /** The HTTP(S) listener cannot be bound or its TLS material loaded (`HttpStartupError`). */
  | 'HTTP_STARTUP_FAILED'
  /** A request body is larger than `payload_request_size`. */
  | 'PAYLOAD_TOO_LARGE'
  /** The verdict log query has an unknown parameter or a value out of range (`BadVerdictQuery`). */
  | 'BAD_VERDICT_QUERY'
  /** The resource policy cannot be parsed or evaluated (trustee's `PolicyError`, `PolicyEngineError`). */
  | 'POLICY_ENGINE_FAILED'
  /** The resource repository failed, e.g. a missing resource (`ResourcePluginError`). */
  | 'RESOURCE_PLUGIN_FAILED'
  /** The attestation token carries no usable TEE public key (`TeeKeyError`). */
  | 'TEE_KEY_INVALID'
  /** A built-in plugin refused the caller's request; the message is safe to show (`PluginRequestError`). */
  | 'PLUGIN_REQUEST_REFUSED'
  /** An external plugin's call failed or it answered a non-2xx status (`PluginCallError`). */
  | 'PLUGIN_CALL_FAILED'
  /** The `nebula-cert` tool could not be run or refused (`NebulaCertError`). */
  | 'NEBULA_CERT_FAILED'
  /** A mounted file (resource, policy, reference values) cannot be applied (`MountedFileError`). */
  | 'MOUNTED_FILE_INVALID'
  /** The operator console has as many sign-ins as it keeps (`ConsoleSessionError`). */
  | 'TOO_MANY_SESSIONS'
  /** The configuration (file, options or environment) is not one the KBS accepts (`KbsConfigError`). */
  | 'CONFIG_INVALID'
  /** A request the KBS refuses before any policy: a method or parameter it does not support. */
  | 'REQUEST_INVALID'
  /** A plugin (built-in or external) could not be initialised at start-up. */
  | 'PLUGIN_INIT_FAILED'
  /** A built-in plugin was asked for something it cannot produce. */
  | 'PLUGIN_INTERNAL'
  /** A TLS certificate or key file cannot be used. */
  | 'TLS_FILE_INVALID'
  /** A policy edited in the operator console is refused before or while it is tried. */
  | 'POLICY_CHECK_FAILED';

export class KbsServiceError extends Error {
  override readonly name: string = 'KbsServiceError';
  readonly code: KbsServiceErrorCode;
  constructor(code: KbsServiceErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** The KBS's configuration is refused; `cause` is the reader's error (a `ConfigError` of `@broker/cli`). */
export class KbsConfigError extends KbsServiceError {
  override readonly name: string = 'KbsConfigError';
  constructor(message?: string, options?: { cause?: unknown }) {
    super('CONFIG_INVALID', message, options);
  }
}
