// PostgreSQL backend (trustee deps/key-value-storage/src/postgres): one table per namespace, named after
// the namespace (`repository`, `kbs`, `kbs_protocol_session`, `attestation_service_policy`,
// `reference_value`), each with trustee's two columns `key TEXT PRIMARY KEY` and `value BYTEA`, so a
// database written by trustee's KBS is read here and the other way round. Several replicas sharing one
// database share all state.
//
// Every key and value travels as a query parameter; only the table name is part of the statement text,
// and it is one of the fixed namespaces, checked against a strict identifier pattern and quoted. A write
// is one statement: an upsert, or INSERT … ON CONFLICT DO NOTHING when the key must not be overwritten
// (its row count says whether it wrote), which PostgreSQL applies atomically.
//
// Availability: a pool of connections (trustee's five), a bounded connection time (covering waits for a
// free connection of the pool), a server-side statement timeout and a client-side read timeout, so a
// database that is down or hung fails requests with StorageUnavailable within a bounded time instead of
// holding them. A connection that failed is dropped and the next request opens a new one, so the KBS
// recovers by itself when the database returns. Reads that failed on a connection the server had
// closed (a restart) are tried once more on a fresh connection.
//
// Unlike trustee, which expects the tables to exist (its set-up.sql creates one), a missing table is
// created (`CREATE TABLE IF NOT EXISTS` with the same columns) on the first use of its namespace, when the
// database user may create tables; when it may not, the error names the table and the statement to run.
import pg from 'pg';
import { KvStorageError, type PostgresStorageErrorCode, StorageUnavailable } from './errors.js';
import { InvalidStorageKey, MAX_KEY_LENGTH } from './keys.js';
import type { KvStorage, Namespace, SetOptions } from './types.js';

/** trustee's pool size (`MAX_CONNECTIONS`). */
export const DEFAULT_POSTGRES_POOL_SIZE = 5;
/** trustee's environment override: a connection URI used instead of the configured fields. */
export const POSTGRES_URL_ENV = 'POSTGRES_URL';
/** Commands that may wait for the database at once; more fail at once (a hung server must not hold memory). */
export const MAX_PENDING_QUERIES = 4096;

/** `[storage_backend.backends.postgres]`, with trustee's keys and defaults. */
export interface PostgresConfig {
  /** `db`, default `postgres`. */
  readonly db: string;
  /** `username`, default `postgres`. */
  readonly username: string;
  /** `password`, none by default. */
  readonly password?: string;
  /** `port`, default 5432. */
  readonly port: number;
  /** `host`, default `localhost`. */
  readonly host: string;
}

export const DEFAULT_POSTGRES_CONFIG: PostgresConfig = {
  db: 'postgres',
  username: 'postgres',
  port: 5432,
  host: 'localhost',
};

/** Where to connect: the configured fields, or a `postgres://` / `postgresql://` URI. */
export type PostgresTarget =
  | { readonly kind: 'config'; readonly config: PostgresConfig }
  | { readonly kind: 'url'; readonly url: string };

/** trustee's choice: `POSTGRES_URL` when set (it may carry a password, from a Secret), else the fields. */
export function postgresTarget(
  config: PostgresConfig,
  env: Readonly<Record<string, string | undefined>> = process.env,
): PostgresTarget {
  const url = env[POSTGRES_URL_ENV];
  return url !== undefined && url !== '' ? { kind: 'url', url } : { kind: 'config', config };
}

/** The target without its password, for messages and logs. */
export function describePostgresTarget(t: PostgresTarget): string {
  if (t.kind === 'config') {
    const c = t.config;
    const host = c.host.includes(':') ? `[${c.host}]` : c.host;
    return `postgresql://${encodeURIComponent(c.username)}@${host}:${c.port}/${encodeURIComponent(c.db)}`;
  }
  return redactPostgresUrl(t.url);
}

/** The URI without its password (and without query parameters, which may hold one too). */
export function redactPostgresUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    u.search = '';
    return u.toString();
  } catch {
    return '<unparseable URL>';
  }
}

/**
 * A connection URI must be a `postgres://` or `postgresql://` URL with a host; the message never repeats
 * the URI, which may hold a password.
 */
export function checkPostgresUrl(url: string): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new PostgresStorageError(
      'INVALID_URL',
      `${POSTGRES_URL_ENV} is not a URL (expected postgresql://user:password@host:port/db)`,
    );
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new PostgresStorageError(
      'INVALID_URL',
      `${POSTGRES_URL_ENV} must start with postgresql:// or postgres://, found ${u.protocol}//`,
    );
  }
  // A Unix socket directory comes as `?host=/run/postgresql`, as libpq reads it.
  if (u.hostname === '' && !u.searchParams.has('host'))
    throw new PostgresStorageError('INVALID_URL', `${POSTGRES_URL_ENV} has no host`);
}

/** Failures of the PostgreSQL backend that are about the database's content or rights, not reaching it. */

export class PostgresStorageError extends KvStorageError {
  override readonly name: string = 'PostgresStorageError';
  declare readonly code: PostgresStorageErrorCode;
  constructor(code: PostgresStorageErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}

export type PostgresEvent =
  | { readonly kind: 'disconnected'; readonly reason: string }
  | { readonly kind: 'reconnected' }
  | { readonly kind: 'error'; readonly reason: string };

export interface PostgresStorageOptions {
  readonly target: PostgresTarget;
  /** Connections in the pool; default trustee's 5. */
  readonly poolSize?: number;
  /** Longest wait for a connection (a new one, or a free one of the pool); default 2000 ms. */
  readonly connectTimeoutMs?: number;
  /** Longest time one statement may take (server and client side); default 2000 ms. */
  readonly statementTimeoutMs?: number;
  /** How long `open` keeps trying to reach the database before giving up; default 10 s. */
  readonly startupTimeoutMs?: number;
  /** Create a namespace's table when it is missing; default true. */
  readonly createTables?: boolean;
  /** Queries that may wait at once; default MAX_PENDING_QUERIES. */
  readonly maxPendingQueries?: number;
  /** Told about connection state changes (for logs); never given credentials. */
  readonly onEvent?: (event: PostgresEvent) => void;
}

const TABLE_RE = /^[a-z_][a-z0-9_]{0,62}$/;

/** The namespace as a quoted SQL identifier; refuses anything but a plain lower-case identifier. */
export function tableName(ns: string): string {
  if (!TABLE_RE.test(ns)) {
    throw new PostgresStorageError(
      'INVALID_TABLE',
      `namespace ${JSON.stringify(ns.slice(0, 80))} is not a plain SQL identifier ([a-z_][a-z0-9_]*, at most 63 characters)`,
    );
  }
  return `"${ns}"`;
}

/** trustee's set-up.sql columns, for a namespace's table. */
export function createTableSql(ns: string): string {
  return `CREATE TABLE IF NOT EXISTS ${tableName(ns)} (value BYTEA, key TEXT PRIMARY KEY)`;
}

// C0 controls and DEL, as the Redis backend refuses them; NUL gets its own message because PostgreSQL's
// text type cannot hold it at all.
const CONTROL_RE = /[\u0001-\u001f\u007f]/;

function checkKey(key: string): void {
  if (key.length === 0) throw new InvalidStorageKey(key, 'empty');
  if (key.length > MAX_KEY_LENGTH)
    throw new InvalidStorageKey(key, `longer than ${MAX_KEY_LENGTH} characters`);
  if (key.includes('\u0000'))
    throw new InvalidStorageKey(key, 'NUL characters cannot be stored in a PostgreSQL text key');
  if (CONTROL_RE.test(key)) throw new InvalidStorageKey(key, 'control characters');
  // A lone surrogate would reach the database as U+FFFD: another key than the one asked for.
  if (!key.isWellFormed()) throw new InvalidStorageKey(key, 'not well-formed Unicode (lone surrogate)');
}

/** SQLSTATE classes about the connection or the server's state rather than the statement. */
const UNAVAILABLE_CLASSES = new Set(['08', '53', '57', '58']);

function sqlState(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** The error is about reaching the database (no SQLSTATE, or a connection/resource/operator class). */
function isUnavailable(e: unknown): boolean {
  const state = sqlState(e);
  return state === undefined || UNAVAILABLE_CLASSES.has(state.slice(0, 2));
}

/** The server closed the connection under a query (restart, terminated backend): worth one retry. */
function isConnectionLost(e: unknown): boolean {
  const state = sqlState(e);
  if (state === '57P01' || state === '57P02' || state === '08006' || state === '08003') return true;
  const msg = e instanceof Error ? e.message : '';
  const code = (e as { code?: unknown } | null)?.code;
  return (
    /Connection terminated|connection is closed|Client has encountered a connection error/i.test(msg) ||
    code === 'ECONNRESET' ||
    code === 'EPIPE'
  );
}

/**
 * A pool of connections to `target` with bounded waits: `connectTimeoutMs` (default 2000) for a
 * connection, `statementTimeoutMs` (default 2000) on the server for a statement, half a second more on
 * the client (a hung server never answers). Connects lazily; the caller must listen for 'error'.
 */
export function createPostgresPool(
  target: PostgresTarget,
  options: { max: number; connectTimeoutMs?: number; statementTimeoutMs?: number },
): pg.Pool {
  if (target.kind === 'url') checkPostgresUrl(target.url);
  const statementTimeout = options.statementTimeoutMs ?? 2000;
  const connection: pg.PoolConfig =
    target.kind === 'url'
      ? { connectionString: target.url }
      : {
          host: target.config.host,
          port: target.config.port,
          user: target.config.username,
          database: target.config.db,
          ...(target.config.password !== undefined && { password: target.config.password }),
        };
  try {
    return new pg.Pool({
      ...connection,
      max: options.max,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 2000,
      statement_timeout: statementTimeout,
      query_timeout: statementTimeout + 500,
      idleTimeoutMillis: 30_000,
      keepAlive: true,
      application_name: 'broker-kbs',
    });
  } catch (e) {
    throw new StorageUnavailable(
      `PostgreSQL target ${describePostgresTarget(target)} is not valid: ${(e as Error).message}`,
      { cause: e },
    );
  }
}

interface Row {
  key?: unknown;
  value?: unknown;
}

export class PostgresStorage implements KvStorage {
  private readonly pool: pg.Pool;
  private readonly where: string;
  private readonly createTables: boolean;
  private readonly maxPending: number;
  private readonly onEvent: (e: PostgresEvent) => void;
  private readonly tables = new Map<Namespace, Promise<void>>();
  private pending = 0;
  private down = false;
  private closing = false;

  private constructor(pool: pg.Pool, where: string, options: PostgresStorageOptions) {
    this.pool = pool;
    this.where = where;
    this.createTables = options.createTables ?? true;
    this.maxPending = options.maxPendingQueries ?? MAX_PENDING_QUERIES;
    this.onEvent = (e) => {
      if (!this.closing) options.onEvent?.(e);
    };
    // An idle connection that fails (the server restarts) is dropped by the pool, which reports it here;
    // without a listener the 'error' event would end the process.
    pool.on('error', (e: Error) => this.lost(e));
  }

  /** Connects (retrying until `startupTimeoutMs`) and checks the server answers. */
  static async open(options: PostgresStorageOptions): Promise<PostgresStorage> {
    const where = describePostgresTarget(options.target);
    const pool = createPostgresPool(options.target, {
      max: options.poolSize ?? DEFAULT_POSTGRES_POOL_SIZE,
      ...(options.connectTimeoutMs !== undefined && { connectTimeoutMs: options.connectTimeoutMs }),
      ...(options.statementTimeoutMs !== undefined && { statementTimeoutMs: options.statementTimeoutMs }),
    });
    const storage = new PostgresStorage(pool, where, options);
    const deadline = Date.now() + (options.startupTimeoutMs ?? 10_000);
    let delay = 50;
    for (;;) {
      try {
        await pool.query('SELECT 1');
        break;
      } catch (e) {
        if (!isUnavailable(e) || Date.now() + delay >= deadline) {
          await pool.end().catch(() => undefined);
          throw new StorageUnavailable(`PostgreSQL at ${where} is unreachable: ${(e as Error).message}`, {
            cause: e,
          });
        }
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 1000);
      }
    }
    return storage;
  }

  private lost(e: Error): void {
    if (this.closing) return;
    if (!this.down) {
      this.down = true;
      this.onEvent({ kind: 'disconnected', reason: e.message });
    } else this.onEvent({ kind: 'error', reason: e.message });
  }

  private wrap(op: string, ns: Namespace, e: unknown): Error {
    if (
      e instanceof StorageUnavailable ||
      e instanceof PostgresStorageError ||
      e instanceof InvalidStorageKey
    )
      return e;
    const msg = (e as Error).message;
    if (isUnavailable(e)) {
      // A statement that ran out of time says nothing about the connection.
      if (sqlState(e) !== '57014') this.lost(e as Error);
      return new StorageUnavailable(`PostgreSQL ${op} failed at ${this.where}: ${msg}`, { cause: e });
    }
    if (sqlState(e) === '42P01') {
      return new PostgresStorageError(
        'MISSING_TABLE',
        `PostgreSQL table ${ns} does not exist at ${this.where} and could not be created: run ${createTableSql(ns)}`,
        { cause: e },
      );
    }
    return new PostgresStorageError(
      'QUERY_FAILED',
      `PostgreSQL ${op} on table ${ns} failed at ${this.where}: ${msg} (SQLSTATE ${sqlState(e)})`,
      { cause: e },
    );
  }

  /** Creates the namespace's table once per process when allowed; a failure is retried on next use. */
  private ensureTable(ns: Namespace): Promise<void> {
    if (!this.createTables) return Promise.resolve();
    let p = this.tables.get(ns);
    if (p === undefined) {
      p = this.pool.query(createTableSql(ns)).then(
        () => undefined,
        (e: unknown) => {
          const state = sqlState(e);
          // 42P07, 42710 and 23505: another replica created it at the same moment (the table, or its row
          // type). 42501: no right to create; the statements that follow report whether the table is there.
          if (state === '42P07' || state === '42710' || state === '23505' || state === '42501') return;
          this.tables.delete(ns);
          throw e;
        },
      );
      this.tables.set(ns, p);
    }
    return p;
  }

  /** One statement, with the pending cap, error wording and (for reads) one retry on a lost connection. */
  private async run(
    op: string,
    ns: Namespace,
    text: string,
    values: unknown[],
    retry: boolean,
  ): Promise<pg.QueryResult<Row>> {
    if (this.closing) throw new StorageUnavailable(`PostgreSQL ${op} refused: the store is closed`);
    if (this.pending >= this.maxPending) {
      throw new StorageUnavailable(
        `PostgreSQL ${op} refused: ${this.maxPending} queries are already waiting for ${this.where}`,
      );
    }
    this.pending++;
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          await this.ensureTable(ns);
          // Named: each connection parses and plans the statement once, then only binds and runs it.
          const r = await this.pool.query<Row>({ name: `broker_${op}_${ns}`, text, values });
          if (this.down) {
            this.down = false;
            this.onEvent({ kind: 'reconnected' });
          }
          return r;
        } catch (e) {
          if (retry && attempt === 0 && isConnectionLost(e)) continue;
          throw this.wrap(op, ns, e);
        }
      }
    } finally {
      this.pending--;
    }
  }

  async get(ns: Namespace, key: string): Promise<Uint8Array | undefined> {
    checkKey(key);
    const r = await this.run('get', ns, `SELECT value FROM ${tableName(ns)} WHERE key = $1`, [key], true);
    const row = r.rows[0];
    if (row === undefined) return undefined;
    const v = row.value;
    if (v === null || v === undefined) {
      throw new PostgresStorageError(
        'MALFORMED_VALUE',
        `PostgreSQL table ${ns} holds a NULL value for key ${JSON.stringify(key.slice(0, 80))}`,
      );
    }
    // A table made with another type than trustee's BYTEA hands back something else than bytes.
    if (!Buffer.isBuffer(v)) {
      throw new PostgresStorageError(
        'MALFORMED_VALUE',
        `PostgreSQL table ${ns}: column value is not BYTEA (trustee's schema: value BYTEA, key TEXT PRIMARY KEY)`,
      );
    }
    return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  }

  /**
   * `ttlMs` is not kept: trustee's table has no lifetime column. Records that expire (sessions) carry
   * their own expiry and are swept by their owner, as on LocalFs.
   */
  async set(ns: Namespace, key: string, value: Uint8Array, options: SetOptions = {}): Promise<boolean> {
    checkKey(key);
    const ttl = options.ttlMs;
    if (ttl !== undefined && !(ttl > 0)) throw new RangeError(`ttlMs must be positive, got ${ttl}`);
    const t = tableName(ns);
    // A copy: the caller may reuse its buffer while the query is being written.
    const bytes = Buffer.from(value);
    if (options.overwrite === false) {
      const r = await this.run(
        'insert',
        ns,
        `INSERT INTO ${t} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`,
        [key, bytes],
        false,
      );
      return r.rowCount === 1;
    }
    await this.run(
      'upsert',
      ns,
      `INSERT INTO ${t} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
      [key, bytes],
      false,
    );
    return true;
  }

  async delete(ns: Namespace, key: string): Promise<boolean> {
    checkKey(key);
    const r = await this.run('delete', ns, `DELETE FROM ${tableName(ns)} WHERE key = $1`, [key], true);
    return (r.rowCount ?? 0) > 0;
  }

  async list(ns: Namespace): Promise<string[]> {
    const r = await this.run('list', ns, `SELECT key FROM ${tableName(ns)} ORDER BY key`, [], true);
    return r.rows.map((row) => String(row.key));
  }

  /** Other processes (replicas) write to the same database. */
  isShared(): boolean {
    return true;
  }

  /** Nothing in trustee's table expires by itself. */
  expiresKeys(): boolean {
    return false;
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    await this.pool.end().catch(() => undefined);
  }
}
