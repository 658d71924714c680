// The write path shared by the verdict logs kept in a shared store (Redis, PostgreSQL): recording is on
// the request path and never waits for the store. An entry goes into a bounded queue, and one flush at a
// time sends the queued entries in batches. When the store is slow or away the queue fills and the
// oldest entries are dropped, counted and reported at most every 10 s.
import type { NewVerdict } from './log.js';

export const MAX_QUEUED_VERDICTS = 256;
const BATCH = 64;
const DROP_REPORT_MS = 10_000;

export interface WriteBehindOptions {
  readonly now?: () => number;
  /** Told how many entries were dropped since the last report (at most every 10 s). */
  readonly onDropped?: (count: number, reason: string) => void;
}

export class VerdictWriteBehind {
  private readonly now: () => number;
  private queue: string[] = [];
  private flushing: Promise<void> | undefined;
  private dropped = 0;
  private lastDropReport = 0;
  private closed = false;

  /**
   * `send` stores one batch of entries (JSON text, oldest first) in one call. A failed batch is not
   * retried: a timed-out call may have been applied, and a retry would record it twice.
   */
  constructor(
    private readonly send: (batch: string[]) => Promise<void>,
    private readonly options: WriteBehindOptions = {},
  ) {
    this.now = options.now ?? Date.now;
  }

  record(v: NewVerdict): void {
    if (this.closed) return;
    // `time` first: the entry is an object with at least one member, as the stores expect.
    this.queue.push(JSON.stringify({ time: new Date(this.now()).toISOString(), ...v }));
    if (this.queue.length > MAX_QUEUED_VERDICTS) {
      this.queue.splice(0, this.queue.length - MAX_QUEUED_VERDICTS);
      this.drop(1, 'queue full');
    }
    this.flushing ??= this.flush();
  }

  private drop(count: number, reason: string): void {
    this.dropped += count;
    const t = Date.now();
    if (t - this.lastDropReport >= DROP_REPORT_MS) {
      this.lastDropReport = t;
      this.options.onDropped?.(this.dropped, reason);
      this.dropped = 0;
    }
  }

  private async flush(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, BATCH);
        try {
          await this.send(batch);
        } catch (e) {
          this.drop(batch.length, (e as Error).message);
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }

  /** Resolves once every entry recorded so far has been sent (or dropped). */
  async flushed(): Promise<void> {
    while (this.flushing !== undefined) await this.flushing;
  }

  /** Records nothing more, and resolves once what was recorded has been sent. */
  async close(): Promise<void> {
    this.closed = true;
    await this.flushed();
  }
}
