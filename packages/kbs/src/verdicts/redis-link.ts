// A Redis connection of the verdict log and the replica count, apart from the storage's, so that a slow
// or lost Redis never holds up a handshake here: it reconnects forever with a bounded backoff, refuses
// commands at once while disconnected (no offline queue), and every command has a timeout of ours
// (node-redis's own stops counting once the command is written).
import { createClient } from 'redis';

export type RedisLinkClient = ReturnType<typeof createClient>;

export interface RedisLinkOptions {
  readonly url: string;
  /** Longest time one command may take; default 2000 ms. */
  readonly commandTimeoutMs?: number;
  /** Told once when the connection is lost and once when it is back (for logs; no credentials). */
  readonly onState?: (up: boolean, reason?: string) => void;
}

export class RedisLink {
  readonly client: RedisLinkClient;
  private readonly timeoutMs: number;
  private up = false;
  private closing = false;
  private readonly connected: Promise<void>;

  constructor(options: RedisLinkOptions) {
    this.timeoutMs = options.commandTimeoutMs ?? 2000;
    this.client = createClient({
      url: options.url,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: 2000,
        // Exponential from 50 ms to 2 s, with jitter so that replicas do not reconnect in lockstep.
        reconnectStrategy: (retries: number) => {
          const base = Math.min(2000, 50 * 2 ** Math.min(retries, 10));
          return Math.round(base / 2 + Math.random() * (base / 2));
        },
      },
    });
    const state = (up: boolean, reason?: string) => {
      if (this.closing || up === this.up) return;
      this.up = up;
      options.onState?.(up, reason);
    };
    // Without a listener an 'error' event would end the process; reconnection handles it.
    this.client.on('error', (e: Error) => state(false, e.message));
    this.client.on('end', () => state(false, 'connection closed'));
    this.client.on('ready', () => state(true));
    this.up = true;
    this.connected = this.client.connect().then(
      () => undefined,
      (e: Error) => state(false, e.message),
    );
  }

  /** Resolves once the first connection attempt has settled (tests). */
  ready(): Promise<void> {
    return this.connected;
  }

  /** Runs one command with our timeout; its late answer, if any, is dropped. */
  async run<T>(op: string, f: (c: RedisLinkClient) => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    // Until the first connection is made the client refuses commands; wait for it (within the timeout).
    const command = this.connected.then(() => f(this.client));
    command.catch(() => undefined);
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`Redis ${op}: no answer within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
    });
    try {
      return await Promise.race([command, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    try {
      if (this.client.isReady) await this.client.close();
      else this.client.destroy();
    } catch {
      // Already closed.
    }
  }
}
