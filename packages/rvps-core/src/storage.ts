// The store behind the RVPS: the KBS's own key-value backends, in the `reference_value` namespace.
import {
  DEFAULT_POSTGRES_CONFIG,
  type KvStorage,
  LocalFsStorage,
  LocalJsonStorage,
  MemoryStorage,
  type PostgresEvent,
  PostgresStorage,
  postgresTarget,
} from '@broker/kv-storage';
import type { StorageBackendSettings } from './config.js';

export interface OpenStorageOptions {
  /** Told about a shared database's connection state (for logs); never given credentials. */
  readonly onEvent?: (event: PostgresEvent) => void;
}

export async function openRvpsStorage(
  config: StorageBackendSettings,
  options: OpenStorageOptions = {},
): Promise<KvStorage> {
  switch (config.storageType) {
    case 'Memory':
      return new MemoryStorage();
    case 'LocalFs':
      return LocalFsStorage.open({ dirPath: config.localFsDir as string });
    case 'LocalJson':
      return LocalJsonStorage.open({ dirPath: config.localJsonDir as string });
    case 'Postgres':
      // trustee's override: POSTGRES_URL (which may hold a password) replaces the configured fields.
      return PostgresStorage.open({
        target: postgresTarget(config.postgres ?? DEFAULT_POSTGRES_CONFIG),
        ...(options.onEvent !== undefined && { onEvent: options.onEvent }),
      });
  }
}
