// How many KBS processes share this Redis, for the console's health view: each one keeps a key of its
// own alive (SET with a lifetime, renewed at a third of it), and the count is the number of such keys.
// A replica that stops without saying so drops out once its key expires.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { RedisLink } from '../verdicts/redis-link.js';

export const REPLICA_KEY_PREFIX = 'kbs_replicas:';
export const REPLICA_TTL_MS = 15_000;
const MAX_COUNTED = 10_000;

export class ReplicaPresence {
  readonly id = randomBytes(8).toString('hex');
  private timer: NodeJS.Timeout | undefined;
  private readonly key = `${REPLICA_KEY_PREFIX}${this.id}`;

  constructor(
    private readonly link: RedisLink,
    private readonly ttlMs: number = REPLICA_TTL_MS,
  ) {}

  /** Announces this replica now and every third of the lifetime; resolves once the first is sent or failed. */
  async start(): Promise<void> {
    const beat = () =>
      this.link
        .run('replica SET', (c) =>
          c.set(this.key, JSON.stringify({ host: hostname(), pid: process.pid }), {
            expiration: { type: 'PX', value: this.ttlMs },
          }),
        )
        .then(
          () => undefined,
          () => undefined,
        );
    this.timer = setInterval(beat, Math.max(1, Math.floor(this.ttlMs / 3)));
    this.timer.unref();
    await beat();
  }

  /** The replicas alive now (this one included once its first SET has landed). */
  async count(): Promise<number> {
    // SCAN may report a key twice: count distinct keys.
    const seen = new Set<string>();
    let cursor = '0';
    do {
      const reply = await this.link.run('replica SCAN', (c) =>
        c.scan(cursor, { MATCH: `${REPLICA_KEY_PREFIX}*`, COUNT: 1000 }),
      );
      for (const k of reply.keys) seen.add(String(k));
      cursor = String(reply.cursor);
    } while (cursor !== '0' && seen.size < MAX_COUNTED);
    return seen.size;
  }

  /** Stops announcing and removes this replica's key. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.link.run('replica DEL', (c) => c.del(this.key)).catch(() => undefined);
  }
}
