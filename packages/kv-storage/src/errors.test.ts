// Every error of the storage backends shares KvStorageError and carries a `code`, so callers branch
// on it (or on the class), never on `name`; a volume fault is still found through the causes.
import { describe, expect, it } from 'vitest';
import { KvStorageError, type KvStorageErrorCode, StorageUnavailable, storageFault } from './errors.js';
import { InvalidStorageKey } from './keys.js';
import { LocalFsStorageError } from './local-fs.js';
import { LocalJsonStorageError } from './local-json.js';
import { PostgresStorageError } from './postgres.js';

describe('storage errors', () => {
  const cases: [KvStorageError, KvStorageErrorCode, string][] = [
    [new StorageUnavailable('why'), 'STORAGE_UNAVAILABLE', 'StorageUnavailable'],
    [new InvalidStorageKey('../x', 'why'), 'INVALID_KEY', 'InvalidStorageKey'],
    [new LocalFsStorageError('why'), 'LOCAL_FS_FAILED', 'LocalFsStorageError'],
    [new LocalJsonStorageError('why'), 'LOCAL_JSON_FAILED', 'LocalJsonStorageError'],
    [new PostgresStorageError('MISSING_TABLE', 'why'), 'MISSING_TABLE', 'PostgresStorageError'],
    [new PostgresStorageError('QUERY_FAILED', 'why'), 'QUERY_FAILED', 'PostgresStorageError'],
  ];

  it.each(cases)('%s: shares KvStorageError and names what failed in code', (e, code, name) => {
    expect(e).toBeInstanceOf(KvStorageError);
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe(code);
    expect(e.name).toBe(name);
  });

  it('keeps the message, the key and the cause', () => {
    const key = new InvalidStorageKey('../x', 'leaves the folder');
    expect(key.message).toBe('invalid storage key "../x": leaves the folder');
    expect(key.key).toBe('../x');
    const cause = Object.assign(new Error('write failed'), { code: 'ENOSPC' });
    const e = new LocalFsStorageError('cannot write', { cause });
    expect(e.message).toBe('cannot write');
    expect(e.cause).toBe(cause);
  });

  it('finds the volume fault under a storage error whose own code is not one', () => {
    const cause = Object.assign(new Error('write failed'), { code: 'ENOSPC' });
    expect(storageFault(new LocalJsonStorageError('cannot write', { cause }))).toEqual({
      code: 'ENOSPC',
      message: 'the storage volume is full (ENOSPC)',
    });
    expect(storageFault(new LocalJsonStorageError('cannot write'))).toBeUndefined();
  });
});
