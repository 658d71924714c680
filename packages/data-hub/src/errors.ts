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

export class DataHubError extends Error {
  override readonly name: string = 'DataHubError';
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
  readonly reason: string;
  constructor(reason: string, options?: { cause?: unknown }) {
    super('Get Resource failed', options);
    this.reason = reason;
  }
}

/** The URI is not a `kbs:///repository/type/tag` resource URI (upstream kms wording). */
export class IllegalResourceUri extends DataHubError {
  override readonly name: string = 'IllegalResourceUri';
  constructor(uri: string, why: string, options?: { cause?: unknown }) {
    super(`illegal kbs resource uri: ${shown(uri)} (${why})`, options);
  }
}

/** The attestation agent did not give a usable token (upstream `AATokenProvider` wording). */
export class AaTokenProviderError extends DataHubError {
  override readonly name: string = 'AaTokenProviderError';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`Attestation Agent token provider error: ${detail}`, options);
  }
}

/** Start-up failed (upstream `Error::InitializationFailed`): bad credential path, fetch or write failure. */
export class HubInitializationFailed extends DataHubError {
  override readonly name: string = 'HubInitializationFailed';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`init Hub failed: ${detail}`, options);
  }
}

/** The KBC cannot serve resources as configured (no KBS URL, unreadable offline resource file). */
export class KbcUnavailable extends DataHubError {
  override readonly name: string = 'KbcUnavailable';
}

/** offline_fs_kbc has no such resource (upstream wording). */
export class OfflineResourceNotFound extends DataHubError {
  override readonly name: string = 'OfflineResourceNotFound';
  constructor(path: string) {
    super(`offline-fs-kbc: resource not found ${path}`);
  }
}
