/**
 * The failure of `UnsealSecret`. As upstream's ttrpc server, the caller gets
 * `Unseal Secret failed` and nothing more; the cause (a `SecretError`
 * Display text from `@broker/sealed-secret`, which may name key sizes or KBS
 * answers) goes to the hub's log. It never holds the secret, the DEK or a
 * key.
 */
import { DataHubError } from '../errors.js';

export class UnsealSecretFailed extends DataHubError {
  override readonly name: string = 'UnsealSecretFailed';
  override readonly code = 'UNSEAL_FAILED';
  readonly reason: string;
  constructor(reason: string, options?: { cause?: unknown }) {
    super('Unseal Secret failed', options);
    this.reason = reason;
  }
}
