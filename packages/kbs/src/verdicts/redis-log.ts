// The verdict log in Redis, so that every replica's console sees every replica's verdicts: one list
// (LPUSH, then LTRIM to the ring size) of JSON entries, newest first, and a counter that numbers them.
// Entries are the same scrubbed summaries as in memory (no nonce, key, token or resource bytes).
//
// Recording is on the request path and never waits for Redis: an entry goes into a bounded queue, and
// one flush at a time sends the queued entries in one script call. When Redis is slow or away the
// queue fills and the oldest entries are dropped (counted, and logged at most every 10 s).
import { matches, type NewVerdict, type Verdict, type VerdictQuery, type VerdictStore } from './log.js';
import type { RedisLink } from './redis-link.js';
import { VerdictWriteBehind } from './write-behind.js';

export const VERDICT_LIST_KEY = 'kbs_verdicts:log';
export const VERDICT_SEQ_KEY = 'kbs_verdicts:seq';
/** Entries waiting for Redis; more drop the oldest. */
export { MAX_QUEUED_VERDICTS } from './write-behind.js';

/** Entries sent in one script call. */

// Numbers the entries with one INCRBY and writes them with their id as the first member in one LPUSH
// (the last given ends up first), so ids are unique across replicas, the list is in id order, and a
// batch costs the same four Redis calls whatever its size. ARGV[1] is the ring size, the rest are
// entries: JSON objects without an id, each with at least one member.
const RECORD_SCRIPT = `
local size = tonumber(ARGV[1])
local n = #ARGV - 1
local first = redis.call('INCRBY', KEYS[2], n) - n
local entries = {}
for i = 1, n do
  entries[i] = '{"id":' .. (first + i) .. ',' .. string.sub(ARGV[i + 1], 2)
end
redis.call('LPUSH', KEYS[1], unpack(entries))
redis.call('LTRIM', KEYS[1], 0, size - 1)
return n
`;

// The entry numbered ARGV[1]: ids are pushed in order, so it sits at (last id - id) unless it has been
// trimmed away. The caller checks the id it gets back.
const GET_SCRIPT = `
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local index = last - tonumber(ARGV[1])
if index < 0 then return false end
return redis.call('LINDEX', KEYS[1], index)
`;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A stored entry read back, or undefined when it is not one (written by something else). */
function parseEntry(text: unknown): Verdict | undefined {
  if (typeof text !== 'string') return undefined;
  try {
    const v: unknown = JSON.parse(text);
    if (
      !isObject(v) ||
      typeof v.id !== 'number' ||
      typeof v.kind !== 'string' ||
      typeof v.status !== 'string'
    )
      return undefined;
    return v as unknown as Verdict;
  } catch {
    return undefined;
  }
}

export interface RedisVerdictLogOptions {
  readonly size: number;
  readonly now?: () => number;
  /** Told how many entries were dropped since the last report (at most every 10 s). */
  readonly onDropped?: (count: number, reason: string) => void;
}

export class RedisVerdictLog implements VerdictStore {
  readonly backend = 'Redis' as const;
  readonly size: number;
  private readonly writes: VerdictWriteBehind;

  constructor(
    private readonly link: RedisLink,
    options: RedisVerdictLogOptions,
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
    await this.link.run('verdict LPUSH', (c) =>
      c.eval(RECORD_SCRIPT, {
        keys: [VERDICT_LIST_KEY, VERDICT_SEQ_KEY],
        arguments: [String(this.size), ...batch],
      }),
    );
  }

  /** Resolves once every entry recorded so far has been sent (or dropped). */
  async flushed(): Promise<void> {
    await this.writes.flushed();
  }

  async get(id: number): Promise<Verdict | undefined> {
    if (!Number.isSafeInteger(id) || id < 1) return undefined;
    const text = await this.link.run('verdict LINDEX', (c) =>
      c.eval(GET_SCRIPT, { keys: [VERDICT_LIST_KEY, VERDICT_SEQ_KEY], arguments: [String(id)] }),
    );
    const v = parseEntry(text);
    return v?.id === id ? v : undefined;
  }

  async list(q: VerdictQuery = {}): Promise<Verdict[]> {
    const limit = Math.min(q.limit ?? this.size, this.size);
    const raw = await this.link.run('verdict LRANGE', (c) => c.lRange(VERDICT_LIST_KEY, 0, this.size - 1));
    const out: Verdict[] = [];
    for (const text of raw) {
      const v = parseEntry(text);
      if (v !== undefined && matches(v, q)) out.push(v);
      if (out.length >= limit) break;
    }
    return out;
  }

  async close(): Promise<void> {
    await this.writes.close();
  }
}
