import { KbsServiceError } from '../errors.js';

/** A mounted file (resource, policy, reference values) that cannot be applied; the previous value stays. */
export class MountedFileError extends KbsServiceError {
  override readonly name: string = 'MountedFileError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('MOUNTED_FILE_INVALID', message, options);
  }
}
