/** What went wrong while building an image; callers branch on `code`. */
export type ImageBuildErrorCode =
  | 'DEBIAN_PACKAGE'
  | 'NODE_RUNTIME'
  | 'SHARED_LIBRARY'
  | 'SEA_INJECT'
  | 'SIGNING_KEY'
  | 'LAYOUT'
  | 'SOURCE_DATE'
  /** A platform the images are not built for. */
  | 'UNKNOWN_PLATFORM'
  /** An image name that is not one of the images. */
  | 'UNKNOWN_IMAGE'
  /** The single executable lacks a command an image runs. */
  | 'MISSING_COMMAND';

export class ImageBuildError extends Error {
  override readonly name = 'ImageBuildError';
  constructor(
    readonly code: ImageBuildErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
