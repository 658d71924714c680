/**
 * The failure of `UnsealSecret`. Upstream's ttrpc message stops at
 * "Unseal Secret failed" and keeps the cause for its log; as for
 * `Get Resource failed`, we append the cause (a `SecretError` Display text
 * from `@broker/sealed-secret`), so callers see why. It never holds the
 * secret, the DEK or a key.
 */
import { DataHubError } from '../errors.js';

export class UnsealSecretFailed extends DataHubError {
  override readonly name: string = 'UnsealSecretFailed';
  readonly reason: string;
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`Unseal Secret failed: ${reason}`, options);
    this.reason = reason;
  }
}
