/** A mounted file (resource, policy, reference values) that cannot be applied; the previous value stays. */
export class MountedFileError extends Error {
  override readonly name = 'MountedFileError';
}
