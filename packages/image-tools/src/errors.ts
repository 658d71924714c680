// Errors of the image command-line tools: one base class whose `code` says what failed.

/** What an image tool failed at; callers branch on it (or on the class), never on `name`. */
export type ImageToolsErrorCode =
  /** A `kbs:///` key path was given without `--kbs-url`. */
  | 'KBS_URL_MISSING'
  /** A signing key that cannot be used (encrypted, or not a private key). */
  | 'SIGNING_KEY_UNUSABLE'
  /** Any other failure. */
  | 'IMAGE_TOOLS_FAILED';

/** The base of every error of this package: `code` says what failed; branch on it or on the class, never on `name`. */
export class ImageToolsError extends Error {
  override readonly name: string = 'ImageToolsError';
  readonly code: ImageToolsErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: ImageToolsErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'IMAGE_TOOLS_FAILED';
  }
}
