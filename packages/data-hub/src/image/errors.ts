/**
 * Failures of `PullImage`, worded as the CDH words them (they reach kata and
 * the pod's events as `[CDH] [ERROR]: <message>`). Kept apart from the
 * service so the hub's index can export them without loading the image
 * library at start-up.
 */
import { DataHubError } from '../errors.js';

/** image-rs `PullImageError` Displays, wrapped by the CDH as `Image Pull error: …`. */
export class ImagePullFailed extends DataHubError {
  override readonly name: string = 'ImagePullFailed';
  override readonly code = 'IMAGE_PULL_FAILED';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`Image Pull error: ${detail}`, options);
  }
}

/** The image client could not be set up (CDH `Image Client error: …`). */
export class ImageClientFailed extends DataHubError {
  override readonly name: string = 'ImageClientFailed';
  override readonly code = 'IMAGE_CLIENT_FAILED';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(`Image Client error: ${detail}`, options);
  }
}
