// The store behind the RVPS: the KBS's own key-value backends, in the `reference_value` namespace.
import { type KvStorage, LocalFsStorage, LocalJsonStorage, MemoryStorage } from '@broker/kbs';
import type { StorageBackendSettings } from './config.js';

export async function openRvpsStorage(config: StorageBackendSettings): Promise<KvStorage> {
  switch (config.storageType) {
    case 'Memory':
      return new MemoryStorage();
    case 'LocalFs':
      return LocalFsStorage.open({ dirPath: config.localFsDir as string });
    case 'LocalJson':
      return LocalJsonStorage.open({ dirPath: config.localJsonDir as string });
  }
}
