// Failures of a storage backend that are about reaching it, not about the data.

/** The backend cannot be reached or did not answer in time; the operation may succeed later. */
export class StorageUnavailable extends Error {
  override readonly name = 'StorageUnavailable';
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
