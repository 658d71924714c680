/**
 * Errors of the data hub. Messages follow guest-components' `Display` texts
 * where upstream has one, because they reach callers verbatim: the ttrpc
 * status `[CDH] [ERROR]: <message>`, then api-server-rest's 500 body, which
 * any container of the pod can read. None of them carries resource contents
 * or tokens. `GetResource` and `UnsealSecret` failures say no more than
 * upstream's (`Get Resource failed`, `Unseal Secret failed`): the reason
 * (KBS answers, key sizes, sockets, the hub's own state) is for the hub's
 * log only.
 */

/** The `SecureMount` step that failed, for callers and logs. */
export type SecureMountStep =
  | 'options'
  | 'device'
  | 'key'
  | 'probe'
  | 'format'
  | 'open'
  | 'mkfs'
  | 'mount'
  | 'symlink';

/** The encrypted-disk step that failed. */
export type EncryptedDiskStep = 'initdata' | 'device' | 'mount' | 'record';

/** Why a data hub operation failed; callers branch on it (or on the subclass), never on `name`. */
export type DataHubErrorCode =
  /** `GetResource` failed (`GetResourceFailed`). */
  | 'GET_RESOURCE_FAILED'
  /** Not a `kbs:///repository/type/tag` resource URI (`IllegalResourceUri`). */
  | 'ILLEGAL_RESOURCE_URI'
  /** The attestation agent gave no usable token (`AaTokenProviderError`). */
  | 'AA_TOKEN_FAILED'
  /** A call to the attestation agent failed (runtime measurement). */
  | 'AA_CLIENT_FAILED'
  /** Start-up failed (`HubInitializationFailed`). */
  | 'INIT_FAILED'
  /** The KBC cannot serve resources as configured (`KbcUnavailable`). */
  | 'KBC_UNAVAILABLE'
  /** offline_fs_kbc has no such resource (`OfflineResourceNotFound`). */
  | 'OFFLINE_RESOURCE_NOT_FOUND'
  /** The KBS protocol failed (`KbcError`). */
  | 'KBC_FAILED'
  /** `PullImage` failed (`ImagePullFailed`). */
  | 'IMAGE_PULL_FAILED'
  /** The image client could not be set up (`ImageClientFailed`). */
  | 'IMAGE_CLIENT_FAILED'
  /** `UnsealSecret` failed (`UnsealSecretFailed`). */
  | 'UNSEAL_FAILED'
  /** `cdh.toml` or the kernel command line is not a valid configuration (`CdhConfigError`). */
  | 'CONFIG_INVALID'
  /** An image decryption key or its provider is unusable (`DecryptionKeyError`). */
  | 'DECRYPTION_KEY_INVALID'
  /** The registries configuration is not valid (`RegistryConfigError`). */
  | 'REGISTRY_CONFIG_INVALID'
  /** A resource the image client needs (policy, auth file) could not be had (`ResourceError`). */
  | 'RESOURCE_UNAVAILABLE'
  /** The hub was closed before the call. */
  | 'HUB_CLOSED'
  /** A key provider `UnWrapKey` request that is not valid JSON of the expected shape. */
  | 'UNWRAP_REQUEST_INVALID'
  /** Undoing a step after a failure (closing a volume) failed too. */
  | 'CLEANUP_FAILED'
  /** Any other failure. */
  | 'DATA_HUB_FAILED'
  /** `SecureMount`: the step that failed (`SecureMountFailed`). */
  | SecureMountStep
  /** The encrypted-disk step that failed (`EncryptedDiskFailed`). */
  | EncryptedDiskStep;

/** The base of every data hub error: `code` says what failed. */
export class DataHubError extends Error {
  override readonly name: string = 'DataHubError';
  readonly code: DataHubErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: DataHubErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'DATA_HUB_FAILED';
  }
}

/** The text of a value for a message: bounded, with control characters made visible. */
export function shown(value: string, max = 256): string {
  const clean = value.replace(
    /[\u0000-\u001f\u007f]/g,
    (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
}

/** `GetResource` failed: the message is upstream's Display, the reason is for the log. */
export class GetResourceFailed extends DataHubError {
  override readonly name: string = 'GetResourceFailed';
  override readonly code = 'GET_RESOURCE_FAILED';
  readonly reason: string;
  constructor(reason: string, options?: { cause?: unknown }) {
    super('Get Resource failed', options);
    this.reason = reason;
  }
}

/** The URI is not a `kbs:///repository/type/tag` resource URI (upstream kms wording). */
export class IllegalResourceUri extends DataHubError {
  override readonly name: string = 'IllegalResourceUri';
  override readonly code = 'ILLEGAL_RESOURCE_URI';
  constructor(uri: string, why: string, options?: { cause?: unknown }) {
    super(`illegal kbs resource uri: ${shown(uri)} (${why})`, options);
  }
}

/** The attestation agent did not give a usable token (upstream `AATokenProvider` wording). */
export class AaTokenProviderError extends DataHubError {
  override readonly name: string = 'AaTokenProviderError';
  override readonly code = 'AA_TOKEN_FAILED';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`Attestation Agent token provider error: ${detail}`, options);
  }
}

/** Start-up failed (upstream `Error::InitializationFailed`): bad credential path, fetch or write failure. */
export class HubInitializationFailed extends DataHubError {
  override readonly name: string = 'HubInitializationFailed';
  override readonly code = 'INIT_FAILED';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`init Hub failed: ${detail}`, options);
  }
}

/** The KBC cannot serve resources as configured (no KBS URL, unreadable offline resource file). */
export class KbcUnavailable extends DataHubError {
  override readonly name: string = 'KbcUnavailable';
  override readonly code = 'KBC_UNAVAILABLE';
}

/** offline_fs_kbc has no such resource (upstream wording). */
export class OfflineResourceNotFound extends DataHubError {
  override readonly name: string = 'OfflineResourceNotFound';
  override readonly code = 'OFFLINE_RESOURCE_NOT_FOUND';
  constructor(path: string) {
    super(`offline-fs-kbc: resource not found ${path}`);
  }
}
