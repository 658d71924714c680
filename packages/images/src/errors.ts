/** What went wrong while building an image; callers branch on `code`. */
export type ImageBuildErrorCode =
  | 'DEBIAN_PACKAGE'
  | 'NODE_RUNTIME'
  | 'SHARED_LIBRARY'
  | 'SEA_INJECT'
  | 'SIGNING_KEY'
  | 'LAYOUT'
  | 'SOURCE_DATE';

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
