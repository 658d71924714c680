// Failures of a storage backend that are about reaching it, not about the data.

/** The backend cannot be reached or did not answer in time; the operation may succeed later. */
export class StorageUnavailable extends Error {
  override readonly name = 'StorageUnavailable';
}
