/**
 * A process's stdout or stderr as ReadStdout/ReadStderr serve it: the pipe is read into a buffer of at
 * most `limit` bytes; when it is full the pipe is paused, so a process nobody reads blocks on write
 * (as it would on kata's pipe) instead of growing the agent's memory.
 */
import type { Readable } from 'node:stream';

export const DEFAULT_OUTPUT_LIMIT = 1024 * 1024;

export class OutputBuffer {
  #chunks: Buffer[] = [];
  #size = 0;
  #ended = false;
  #source: Readable | undefined;
  #waiters: (() => void)[] = [];
  #onFirst: (at: number) => void = () => {};
  /** Resolves with performance.now() when the first byte arrives (for the time-to-first-output log). */
  readonly first: Promise<number> = new Promise((resolve) => {
    this.#onFirst = resolve;
  });
  #gotData = false;

  constructor(readonly limit = DEFAULT_OUTPUT_LIMIT) {}

  /** Starts reading `source` (once). */
  attach(source: Readable): void {
    this.#source = source;
    source.on('data', (chunk: Buffer) => {
      if (!this.#gotData) {
        this.#gotData = true;
        this.#onFirst(performance.now());
      }
      this.#chunks.push(chunk);
      this.#size += chunk.length;
      if (this.#size >= this.limit) source.pause();
      this.#wake();
    });
    const end = () => this.end();
    source.once('end', end);
    source.once('close', end);
    source.once('error', end);
  }

  /** No more data will come (the process is gone or never started). */
  end(): void {
    this.#ended = true;
    this.#wake();
  }

  get buffered(): number {
    return this.#size;
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }

  /**
   * Up to `max` bytes, waiting for at least one; an empty result means the stream ended (what kata's
   * agent answers at end of stream). Rejects with `signal`'s reason when the call is cancelled.
   */
  async read(max: number, signal?: AbortSignal): Promise<Uint8Array> {
    while (this.#size === 0 && !this.#ended) {
      signal?.throwIfAborted();
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(signal?.reason);
        this.#waiters.push(() => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        });
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    }
    if (this.#size === 0 || max <= 0) return new Uint8Array(0);
    const parts: Buffer[] = [];
    let want = max;
    while (want > 0 && this.#chunks.length > 0) {
      const head = this.#chunks[0]!;
      if (head.length <= want) {
        parts.push(head);
        this.#chunks.shift();
        want -= head.length;
      } else {
        parts.push(head.subarray(0, want));
        this.#chunks[0] = head.subarray(want);
        want = 0;
      }
    }
    const out = Buffer.concat(parts);
    this.#size -= out.length;
    if (this.#size < this.limit && this.#source?.isPaused()) this.#source.resume();
    return out;
  }
}
