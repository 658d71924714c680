// The errors of the storage backends. They share KvStorageError, whose `code` says what failed;
// callers branch on `code` (or on the class), never on `name`.

export type PostgresStorageErrorCode =
  /** The connection URI (POSTGRES_URL) is not a `postgres://` or `postgresql://` URL. */
  | 'INVALID_URL'
  /** A namespace name that is not a plain SQL identifier (never one of the KBS's own). */
  | 'INVALID_TABLE'
  /** The namespace's table is missing and the database user may not create it. */
  | 'MISSING_TABLE'
  /** A row whose `value` is NULL (trustee's schema allows it; no value written by a KBS is). */
  | 'MALFORMED_VALUE'
  /** The database refused the statement (rights, schema that differs from trustee's). */
  | 'QUERY_FAILED';

export type KvStorageErrorCode =
  /** The backend cannot be reached or did not answer in time (`StorageUnavailable`). */
  | 'STORAGE_UNAVAILABLE'
  /** A key no backend may hold (`InvalidStorageKey`). */
  | 'INVALID_KEY'
  /** The LocalFs backend cannot read, write or list its folder (`LocalFsStorageError`). */
  | 'LOCAL_FS_FAILED'
  /** The LocalJson backend cannot read or write its files (`LocalJsonStorageError`). */
  | 'LOCAL_JSON_FAILED'
  /** The PostgreSQL backend's failures about the database's content or rights (`PostgresStorageError`). */
  | PostgresStorageErrorCode;

export class KvStorageError extends Error {
  override readonly name: string = 'KvStorageError';
  readonly code: KvStorageErrorCode;
  constructor(code: KvStorageErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** The backend cannot be reached or did not answer in time; the operation may succeed later. */
export class StorageUnavailable extends KvStorageError {
  override readonly name: string = 'StorageUnavailable';
  constructor(message: string, options?: { cause?: unknown }) {
    super('STORAGE_UNAVAILABLE', message, options);
  }
}

/** Failures of the volume under a file store that an operator has to fix (free space, remount). */
export type StorageFaultCode = 'ENOSPC' | 'EDQUOT' | 'EROFS' | 'EIO';

const FAULTS: Record<StorageFaultCode, string> = {
  ENOSPC: 'the storage volume is full',
  EDQUOT: 'the storage quota is used up',
  EROFS: 'the storage volume is read-only',
  EIO: 'the storage volume reports an I/O error',
};

export interface StorageFault {
  readonly code: StorageFaultCode;
  /** For the admin answer and the log, e.g. `the storage volume is full (ENOSPC)`. */
  readonly message: string;
}

/** The volume fault in an error or its causes, if any. */
export function storageFault(e: unknown): StorageFault | undefined {
  let cur: unknown = e;
  for (let i = 0; i < 8 && typeof cur === 'object' && cur !== null; i++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string' && Object.hasOwn(FAULTS, code)) {
      const c = code as StorageFaultCode;
      return { code: c, message: `${FAULTS[c]} (${c})` };
    }
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}
