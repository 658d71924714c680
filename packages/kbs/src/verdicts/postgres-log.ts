// The verdict log and the replica count in PostgreSQL, when the KBS's store is PostgreSQL, so that every
// replica's console sees every replica's verdicts, as over Redis. Two tables of this KBS's own beside
// trustee's (trustee's KBS ignores them): `kbs_verdicts` (an identity number and the entry's JSON, the
// same scrubbed summary as in memory: no nonce, key, token or resource bytes), trimmed to the ring size
// after each write, and `kbs_replicas` (one row per live process with the time it expires).
//
// Recording is on the request path and never waits for the database: an entry goes into a bounded queue,
// and one flush at a time inserts the queued entries in one statement. When the database is slow or away
// the queue fills and the oldest entries are dropped (counted, and logged at most every 10 s).
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import { matches, type NewVerdict, type Verdict, type VerdictQuery, type VerdictStore } from './log.js';
import { VerdictWriteBehind } from './write-behind.js';

export const VERDICT_TABLE = 'kbs_verdicts';
export const REPLICA_TABLE = 'kbs_replicas';
/** Entries waiting for the database; more drop the oldest. */
export { MAX_QUEUED_VERDICTS } from './write-behind.js';
/** Entries sent in one statement. */
export const REPLICA_TTL_MS = 15_000;

const CREATE = [
  `CREATE TABLE IF NOT EXISTS ${VERDICT_TABLE} (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, entry TEXT NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS ${REPLICA_TABLE} (id TEXT PRIMARY KEY, info TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL)`,
];

/** Creates the two tables when missing; a replica creating them at the same moment is fine. */
export async function createVerdictTables(pool: pg.Pool): Promise<void> {
  for (const sql of CREATE) {
    try {
      await pool.query(sql);
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      // Created meanwhile by another replica (the table or its row type), or no right to create.
      if (code !== '42P07' && code !== '23505' && code !== '42710' && code !== '42501') throw e;
    }
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A stored row read back, or undefined when its entry is not one (written by something else). */
function parseRow(id: unknown, text: unknown): Verdict | undefined {
  const n = typeof id === 'string' ? Number(id) : id;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || typeof text !== 'string') return undefined;
  try {
    const v: unknown = JSON.parse(text);
    if (!isObject(v) || typeof v.kind !== 'string' || typeof v.status !== 'string') return undefined;
    return { ...v, id: n } as unknown as Verdict;
  } catch {
    return undefined;
  }
}

export interface PostgresVerdictLogOptions {
  readonly size: number;
  readonly now?: () => number;
  /** Told how many entries were dropped since the last report (at most every 10 s). */
  readonly onDropped?: (count: number, reason: string) => void;
}

export class PostgresVerdictLog implements VerdictStore {
  readonly backend = 'Postgres' as const;
  readonly size: number;
  private readonly writes: VerdictWriteBehind;

  constructor(
    private readonly pool: pg.Pool,
    options: PostgresVerdictLogOptions,
  ) {
    if (!Number.isInteger(options.size) || options.size < 1)
      throw new RangeError('verdict log size must be a positive integer');
    this.size = options.size;
    this.writes = new VerdictWriteBehind((batch) => this.send(batch), {
      ...(options.now !== undefined && { now: options.now }),
      ...(options.onDropped !== undefined && { onDropped: options.onDropped }),
    });
  }

  record(v: NewVerdict): void {
    this.writes.record(v);
  }

  /** Stores one batch of entries (oldest first) in one call. */
  private async send(batch: string[]): Promise<void> {
    // One statement: the entries in order (identity numbers follow the array), then the ring trim.
    await this.pool.query({
      name: 'broker_verdicts_insert',
      text: `WITH added AS (INSERT INTO ${VERDICT_TABLE} (entry) SELECT e FROM unnest($1::text[]) WITH ORDINALITY AS t(e, n) ORDER BY n RETURNING id)
        DELETE FROM ${VERDICT_TABLE} WHERE id <= (SELECT max(id) FROM added) - $2`,
      values: [batch, this.size],
    });
  }

  /** Resolves once every entry recorded so far has been sent (or dropped). */
  async flushed(): Promise<void> {
    await this.writes.flushed();
  }

  async get(id: number): Promise<Verdict | undefined> {
    if (!Number.isSafeInteger(id) || id < 1) return undefined;
    // Kept only while among the newest `size`: another replica may not have trimmed yet.
    const r = await this.pool.query({
      name: 'broker_verdicts_get',
      text: `SELECT id, entry FROM ${VERDICT_TABLE} WHERE id = $1 AND id > (SELECT max(id) FROM ${VERDICT_TABLE}) - $2`,
      values: [id, this.size],
    });
    const row = r.rows[0] as { id?: unknown; entry?: unknown } | undefined;
    return row === undefined ? undefined : parseRow(row.id, row.entry);
  }

  async list(q: VerdictQuery = {}): Promise<Verdict[]> {
    const limit = Math.min(q.limit ?? this.size, this.size);
    const r = await this.pool.query({
      name: 'broker_verdicts_list',
      text: `SELECT id, entry FROM ${VERDICT_TABLE} ORDER BY id DESC LIMIT $1`,
      values: [this.size],
    });
    const out: Verdict[] = [];
    for (const row of r.rows as { id?: unknown; entry?: unknown }[]) {
      const v = parseRow(row.id, row.entry);
      if (v !== undefined && matches(v, q)) out.push(v);
      if (out.length >= limit) break;
    }
    return out;
  }

  async close(): Promise<void> {
    await this.writes.close();
  }
}

/**
 * How many KBS processes share this database, for the console's health view: each keeps a row of its
 * own alive (its expiry renewed at a third of the lifetime), and the count is the rows not expired. A
 * replica that stops without saying so drops out once its row expires.
 */
export class PostgresReplicaPresence {
  readonly id = randomBytes(8).toString('hex');
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly ttlMs: number = REPLICA_TTL_MS,
  ) {}

  /** Announces this replica now and every third of the lifetime; resolves once the first is sent or failed. */
  async start(): Promise<void> {
    const beat = () =>
      this.pool
        .query({
          name: 'broker_replicas_beat',
          text: `INSERT INTO ${REPLICA_TABLE} (id, info, expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
            ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
          values: [this.id, JSON.stringify({ host: hostname(), pid: process.pid }), this.ttlMs],
        })
        .then(
          () => undefined,
          () => undefined,
        );
    this.timer = setInterval(beat, Math.max(1, Math.floor(this.ttlMs / 3)));
    this.timer.unref();
    await beat();
  }

  /** The replicas alive now (this one included once its first announcement has landed). */
  async count(): Promise<number> {
    const r = await this.pool.query({
      name: 'broker_replicas_count',
      text: `SELECT count(*)::int AS n FROM ${REPLICA_TABLE} WHERE expires_at > now()`,
    });
    return Number((r.rows[0] as { n?: unknown } | undefined)?.n ?? 0);
  }

  /** Stops announcing and removes this replica's row (and rows long expired). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.pool
      .query(`DELETE FROM ${REPLICA_TABLE} WHERE id = $1 OR expires_at < now() - interval '1 hour'`, [
        this.id,
      ])
      .catch(() => undefined);
  }
}
