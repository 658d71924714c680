/**
 * A ttrpc connection opened on first use and replaced when it is lost, as
 * upstream's cached client does: the server starts even when the CDH or AA is
 * not up yet, and a restarted CDH/AA is picked up by the next request.
 *
 * Error texts follow upstream's anyhow contexts ("ttrpc connect to CDH addr:
 * … failed", "ttrpc request error", …) with the cause appended, so a client
 * sees why a call failed rather than only the outer context.
 */
import { TtrpcClosedError, TtrpcError } from '@broker/ttrpc';
import { BackendError } from './backends.js';

export interface LazyConnectionOptions<C> {
  /** Service name used in error texts: `CDH` or `Attestation Agent` upstream. */
  readonly name: string;
  /** Address shown in error texts, e.g. `unix:///run/confidential-containers/cdh.sock`. */
  readonly address: string;
  readonly connect: () => Promise<C>;
  readonly close: (client: C) => void | Promise<void>;
  /** Whether a cached client is known to be dead; it is then replaced before the call is sent. */
  readonly isClosed?: (client: C) => boolean;
}

export interface LazyCallOptions {
  /**
   * Retry once on a new connection when the connection drops while the call
   * is in flight. Safe only for calls that may run twice; a call on a
   * connection already known to be closed is always moved to a new one.
   */
  readonly retryInFlight: boolean;
}

/** Text for an error from a ttrpc call: `<CODE>: <message>` for a ttrpc status, the message otherwise. */
export function describeCallError(err: unknown): string {
  if (err instanceof TtrpcError) return `${err.codeName}: ${err.message}`;
  if (err instanceof Error) return err.message;
  return String(err);
}

export class LazyConnection<C> {
  readonly #opts: LazyConnectionOptions<C>;
  #current: Promise<C> | null = null;
  #closed = false;

  constructor(options: LazyConnectionOptions<C>) {
    this.#opts = options;
  }

  async call<T>(fn: (client: C) => Promise<T>, options: LazyCallOptions): Promise<T> {
    const { name } = this.#opts;
    const first = await this.#acquire(`ttrpc connect to ${name} addr: ${this.#opts.address} failed`);
    try {
      return await fn(first.client);
    } catch (err) {
      if (!(err instanceof TtrpcClosedError)) {
        throw new BackendError(`ttrpc request error: ${describeCallError(err)}`, { cause: err });
      }
      this.#drop(first.handle);
      if (!options.retryInFlight) {
        throw new BackendError(`ttrpc request error: ${describeCallError(err)}`, { cause: err });
      }
    }
    const second = await this.#acquire(`failed to reconnect to ${name} after LocalClosed`);
    try {
      return await fn(second.client);
    } catch (err) {
      if (err instanceof TtrpcClosedError) this.#drop(second.handle);
      throw new BackendError(`ttrpc request error after reconnect: ${describeCallError(err)}`, {
        cause: err,
      });
    }
  }

  /** Closes the current connection; later calls fail. */
  async close(): Promise<void> {
    this.#closed = true;
    const current = this.#current;
    this.#current = null;
    if (current === null) return;
    const client = await current.catch(() => null);
    if (client !== null) await Promise.resolve(this.#opts.close(client)).catch(() => undefined);
  }

  async #acquire(context: string): Promise<{ client: C; handle: Promise<C> }> {
    if (this.#closed) throw new BackendError(`${context}: the API server is shutting down`);
    for (let attempt = 0; ; attempt++) {
      let handle = this.#current;
      if (handle === null) {
        handle = this.#opts.connect();
        this.#current = handle;
      }
      let client: C;
      try {
        client = await handle;
      } catch (err) {
        // Forget the failed attempt so the next request tries again.
        if (this.#current === handle) this.#current = null;
        throw new BackendError(`${context}: ${describeCallError(err)}`, { cause: err });
      }
      if (this.#closed) {
        await Promise.resolve(this.#opts.close(client)).catch(() => undefined);
        throw new BackendError(`${context}: the API server is shutting down`);
      }
      // One replacement only: a peer that closes every new connection at once fails the call instead.
      if (attempt === 0 && this.#opts.isClosed?.(client) === true) {
        this.#drop(handle);
        continue;
      }
      return { client, handle };
    }
  }

  #drop(handle: Promise<C>): void {
    if (this.#current !== handle) return;
    this.#current = null;
    handle.then((c) => this.#opts.close(c)).catch(() => undefined);
  }
}
