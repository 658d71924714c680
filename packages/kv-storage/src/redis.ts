// Redis backend (trustee deps/key-value-storage/src/redis): every key is the string `<namespace>:<key>`
// holding the raw value bytes, so several KBS replicas sharing one Redis share all state. A write is one
// SET (NX when the key must not be overwritten, PX for a lifetime), which Redis applies atomically; keys
// with a lifetime (sessions) are expired by Redis itself. `list` walks the namespace with SCAN (never
// KEYS, which blocks the server on a large keyspace).
//
// Availability: the client reconnects forever with a bounded backoff, commands are refused at once while
// it is disconnected (no offline queue, so nothing piles up), and every command has a timeout of ours —
// node-redis's own command timeout stops counting once the command is written, so a Redis that hangs
// with the connection open would otherwise stall requests forever. Commands still waiting for such a
// server are capped. A failing command becomes a StorageUnavailable error, which the KBS answers with its
// usual 401-class error — never with data from anywhere else.
import { createClient, RESP_TYPES } from 'redis';
import { StorageUnavailable } from './errors.js';
import { InvalidStorageKey, MAX_KEY_LENGTH } from './keys.js';
import type { KvStorage, Namespace, SetOptions } from './types.js';

/** trustee's default `[storage_backend.backends.redis] url`. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
/** trustee's environment override of the URL (it may carry a password, so it can come from a Secret). */
export const REDIS_URL_ENV = 'REDIS_URL';

export interface RedisStorageOptions {
  /** `redis://[user:password@]host[:port][/db]` or `rediss://` for TLS. */
  readonly url: string;
  /** Longest time one command may take before it fails; default 2000 ms. */
  readonly commandTimeoutMs?: number;
  /** Longest time one connection attempt may take; default 2000 ms. */
  readonly connectTimeoutMs?: number;
  /** How long `open` keeps trying to reach Redis before giving up; default 10 s. */
  readonly startupTimeoutMs?: number;
  /** Longest pause between reconnection attempts; default 2000 ms. */
  readonly maxReconnectDelayMs?: number;
  /** Commands that may wait for an answer at once; default MAX_PENDING_COMMANDS. */
  readonly maxPendingCommands?: number;
  /** Told about connection state changes (for logs); never given credentials. */
  readonly onEvent?: (event: RedisEvent) => void;
}

export type RedisEvent =
  | { readonly kind: 'disconnected'; readonly reason: string }
  | { readonly kind: 'reconnected' }
  | { readonly kind: 'error'; readonly reason: string };

/** The URL without its credentials, for messages. */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.username !== '' || u.password !== '') {
      u.username = '';
      u.password = '';
      return u.toString().replace('//', '//***@');
    }
    return u.toString();
  } catch {
    return '<unparseable URL>';
  }
}

// Keys reach Redis unchanged after the namespace prefix; Redis keys are binary-safe, so only what would
// make messages or SCAN patterns misleading is refused.
const CONTROL_RE = /[\u0000-\u001f\u007f]/;

function checkKey(key: string): void {
  if (key.length === 0) throw new InvalidStorageKey(key, 'empty');
  if (key.length > MAX_KEY_LENGTH)
    throw new InvalidStorageKey(key, `longer than ${MAX_KEY_LENGTH} characters`);
  if (CONTROL_RE.test(key)) throw new InvalidStorageKey(key, 'control characters');
}

/** A SCAN MATCH pattern that matches `prefix` literally followed by anything. */
function literalPrefixPattern(prefix: string): string {
  return `${prefix.replace(/[\\*?[\]]/g, (c) => `\\${c}`)}*`;
}

const SCAN_COUNT = 1000;
/** Commands that may wait for Redis at once; more fail at once (a hung server must not hold memory). */
export const MAX_PENDING_COMMANDS = 4096;

interface ConnectionState {
  /** Connected once: from then on, failures are outages rather than a failed start. */
  ready: boolean;
  down: boolean;
  /** close() was called: the connection ending is expected. */
  closing: boolean;
}

type BufferClient = ReturnType<typeof makeClients>['bytes'];
type StringClient = ReturnType<typeof makeClients>['text'];

function makeClients(
  options: RedisStorageOptions,
  reconnect: (retries: number, cause: Error) => number | Error,
) {
  const text = createClient({
    url: options.url,
    disableOfflineQueue: true,
    commandOptions: { timeout: options.commandTimeoutMs ?? 2000 },
    socket: {
      connectTimeout: options.connectTimeoutMs ?? 2000,
      reconnectStrategy: reconnect,
    },
  });
  // Values are bytes: bulk strings come back as Buffers on this view of the same connection.
  const bytes = text.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
  return { text, bytes };
}

export class RedisStorage implements KvStorage {
  private readonly text: StringClient;
  private readonly bytes: BufferClient;
  private readonly where: string;
  private readonly state: ConnectionState;
  private readonly timeoutMs: number;
  private readonly maxPending: number;
  private pending = 0;

  private constructor(
    text: StringClient,
    bytes: BufferClient,
    where: string,
    state: ConnectionState,
    timeoutMs: number,
    maxPending: number,
  ) {
    this.text = text;
    this.bytes = bytes;
    this.where = where;
    this.state = state;
    this.timeoutMs = timeoutMs;
    this.maxPending = maxPending;
  }

  /** Connects (retrying until `startupTimeoutMs`) and checks the server answers. */
  static async open(options: RedisStorageOptions): Promise<RedisStorage> {
    const where = redactRedisUrl(options.url);
    const startupTimeout = options.startupTimeoutMs ?? 10_000;
    const maxDelay = options.maxReconnectDelayMs ?? 2000;
    const started = Date.now();
    const state: ConnectionState = { ready: false, down: false, closing: false };
    const onEvent = (e: RedisEvent) => {
      if (!state.closing) options.onEvent?.(e);
    };
    const reconnect = (retries: number, cause: Error): number | Error => {
      // Giving up at start: connect() rejects with this error, worded by the caller below.
      if (!state.ready && Date.now() - started >= startupTimeout) return cause;
      // Exponential from 50 ms, capped, with jitter so that replicas do not reconnect in lockstep.
      const base = Math.min(maxDelay, 50 * 2 ** Math.min(retries, 10));
      return Math.round(base / 2 + Math.random() * (base / 2));
    };
    let clients: ReturnType<typeof makeClients>;
    try {
      clients = makeClients(options, reconnect);
    } catch (e) {
      throw new StorageUnavailable(`Redis URL ${where} is not valid: ${(e as Error).message}`, { cause: e });
    }
    const { text, bytes } = clients;
    // Without a listener, an 'error' event would end the process; the reconnect logic handles them.
    text.on('error', (e: Error) => {
      if (state.ready && !state.down) {
        state.down = true;
        onEvent({ kind: 'disconnected', reason: e.message });
      } else if (state.ready) onEvent({ kind: 'error', reason: e.message });
    });
    text.on('ready', () => {
      if (state.down) {
        state.down = false;
        onEvent({ kind: 'reconnected' });
      }
    });
    text.on('end', () => {
      if (state.ready && !state.down) {
        state.down = true;
        onEvent({ kind: 'disconnected', reason: 'connection closed' });
      }
    });
    try {
      await text.connect();
      await text.ping();
    } catch (e) {
      text.destroy();
      if (e instanceof StorageUnavailable) throw e;
      throw new StorageUnavailable(`Redis at ${where} is unreachable: ${(e as Error).message}`, { cause: e });
    }
    state.ready = true;
    return new RedisStorage(
      text,
      bytes,
      where,
      state,
      options.commandTimeoutMs ?? 2000,
      options.maxPendingCommands ?? MAX_PENDING_COMMANDS,
    );
  }

  private key(ns: Namespace, key: string): string {
    checkKey(key);
    return `${ns}:${key}`;
  }

  private unavailable(op: string, e: unknown): StorageUnavailable {
    if (e instanceof StorageUnavailable) return e;
    return new StorageUnavailable(`Redis ${op} failed at ${this.where}: ${(e as Error).message}`, {
      cause: e,
    });
  }

  /** Runs one Redis command with our timeout; its late answer, if any, is dropped. */
  private async run<T>(op: string, f: () => Promise<T>): Promise<T> {
    if (this.pending >= this.maxPending) {
      throw new StorageUnavailable(
        `Redis ${op} refused: ${this.maxPending} commands are already waiting for ${this.where}`,
      );
    }
    this.pending++;
    let command: Promise<T>;
    try {
      command = f();
    } catch (e) {
      this.pending--;
      throw this.unavailable(op, e);
    }
    const settled = command.finally(() => {
      this.pending--;
    });
    // The command may still fail after the timeout has answered: expected, not an unhandled rejection.
    settled.catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new StorageUnavailable(
              `Redis ${op} got no answer from ${this.where} within ${this.timeoutMs} ms`,
            ),
          ),
        this.timeoutMs,
      );
    });
    try {
      return await Promise.race([settled, timeout]);
    } catch (e) {
      throw this.unavailable(op, e);
    } finally {
      clearTimeout(timer);
    }
  }

  async get(ns: Namespace, key: string): Promise<Uint8Array | undefined> {
    const k = this.key(ns, key);
    const v = (await this.run('GET', () => this.bytes.get(k))) as Buffer | null;
    return v === null ? undefined : new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  }

  async set(ns: Namespace, key: string, value: Uint8Array, options: SetOptions = {}): Promise<boolean> {
    const k = this.key(ns, key);
    const ttl = options.ttlMs;
    if (ttl !== undefined && !(ttl > 0)) throw new RangeError(`ttlMs must be positive, got ${ttl}`);
    const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    const reply = await this.run('SET', () =>
      this.text.set(k, bytes, {
        ...(options.overwrite === false && { condition: 'NX' as const }),
        // Whole milliseconds, rounded up so that a lifetime is never cut short.
        ...(ttl !== undefined && { expiration: { type: 'PX' as const, value: Math.ceil(ttl) } }),
      }),
    );
    // SET answers nil only when NX found the key present.
    return reply !== null;
  }

  async delete(ns: Namespace, key: string): Promise<boolean> {
    const k = this.key(ns, key);
    return (await this.run('DEL', () => this.text.del(k))) > 0;
  }

  async list(ns: Namespace): Promise<string[]> {
    const prefix = `${ns}:`;
    const keys = new Set<string>();
    let cursor = '0';
    do {
      const reply = await this.run('SCAN', () =>
        this.text.scan(cursor, { MATCH: literalPrefixPattern(prefix), COUNT: SCAN_COUNT }),
      );
      for (const k of reply.keys) keys.add(String(k).slice(prefix.length));
      cursor = String(reply.cursor);
    } while (cursor !== '0');
    // SCAN may report a key more than once; the set removes repeats.
    return [...keys];
  }

  /** Other processes (replicas) write to the same Redis. */
  isShared(): boolean {
    return true;
  }

  /** Keys written with a lifetime are expired by Redis itself (PX). */
  expiresKeys(): boolean {
    return true;
  }

  async close(): Promise<void> {
    if (this.state.closing) return;
    this.state.closing = true;
    try {
      await this.text.close();
    } catch {
      this.text.destroy();
    }
  }
}
