// A cache of fetched, validated collateral shared by every verification of a process:
//  - an entry is served until it expires (its nextUpdate, or the caller's own limit);
//  - close to expiry, or once older than `maxAgeMs`, it is still served while one background
//    fetch replaces it (a TCB recovery shows up before nextUpdate);
//  - a failed background fetch keeps the entry: a service that is down does not break
//    verification as long as what was fetched is still valid;
//  - an expired or missing entry is fetched in the foreground, and its failure is the caller's;
//  - concurrent misses for one key share one fetch.
// Only values the loader validated are stored, so nothing unauthenticated outlives its request.

export interface Loaded<V> {
  readonly value: V;
  /** Epoch ms after which the value must not be served. */
  readonly expiresAt: number;
}

export interface RefreshingCacheOptions {
  /** An entry older than this is refreshed in the background. Default: 24 hours. */
  readonly maxAgeMs?: number;
  /** An entry this close to its expiry is refreshed in the background. Default: 1 hour. */
  readonly refreshAheadMs?: number;
  /** Default: 1024 (trustee's HTTP caches hold as many responses). */
  readonly maxEntries?: number;
  /** The clock (epoch ms); Date.now by default. */
  readonly now?: () => number;
  /** Called with the error of a failed background refresh (the entry stays). */
  readonly onRefreshError?: (key: string, error: unknown) => void;
}

export interface CacheStats {
  hits: number;
  /** Foreground fetches (missing or expired entries). */
  loads: number;
  /** Background fetches started. */
  refreshes: number;
  /** Background fetches that failed (the old entry was kept). */
  refreshFailures: number;
}

interface Entry<V> {
  readonly value: V;
  readonly fetchedAt: number;
  readonly expiresAt: number;
}

export class RefreshingCache<V> {
  readonly stats: CacheStats = { hits: 0, loads: 0, refreshes: 0, refreshFailures: 0 };
  readonly #entries = new Map<string, Entry<V>>();
  readonly #inflight = new Map<string, Promise<V>>();
  readonly #maxAge: number;
  readonly #ahead: number;
  readonly #max: number;
  readonly #now: () => number;
  readonly #onRefreshError: ((key: string, error: unknown) => void) | undefined;

  constructor(options: RefreshingCacheOptions = {}) {
    this.#maxAge = options.maxAgeMs ?? 24 * 3_600_000;
    this.#ahead = options.refreshAheadMs ?? 3_600_000;
    this.#max = options.maxEntries ?? 1024;
    this.#now = options.now ?? Date.now;
    this.#onRefreshError = options.onRefreshError;
  }

  get size(): number {
    return this.#entries.size;
  }

  clear(): void {
    this.#entries.clear();
  }

  /** The value for `key`: cached, or from `load` (which validates it and says when it expires). */
  async get(key: string, load: () => Promise<Loaded<V>>): Promise<V> {
    const t = this.#now();
    const e = this.#entries.get(key);
    if (e !== undefined && t < e.expiresAt) {
      this.stats.hits++;
      if (t >= e.expiresAt - this.#ahead || t - e.fetchedAt >= this.#maxAge) this.#refresh(key, load);
      return e.value;
    }
    const pending = this.#inflight.get(key);
    if (pending !== undefined) return pending;
    this.stats.loads++;
    return this.#fetch(key, load);
  }

  /** Waits for background refreshes in flight (tests and orderly shutdown). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#inflight.values()]);
  }

  #fetch(key: string, load: () => Promise<Loaded<V>>): Promise<V> {
    const p = (async () => {
      try {
        const got = await load();
        this.#store(key, got);
        return got.value;
      } finally {
        this.#inflight.delete(key);
      }
    })();
    this.#inflight.set(key, p);
    return p;
  }

  #refresh(key: string, load: () => Promise<Loaded<V>>): void {
    if (this.#inflight.has(key)) return;
    this.stats.refreshes++;
    this.#fetch(key, load).catch((err: unknown) => {
      this.stats.refreshFailures++;
      this.#onRefreshError?.(key, err);
    });
  }

  #store(key: string, got: Loaded<V>): void {
    const t = this.#now();
    if (!(got.expiresAt > t)) return; // already expired: usable by this request only
    this.#entries.delete(key);
    if (this.#entries.size >= this.#max) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, { value: got.value, fetchedAt: t, expiresAt: got.expiresAt });
  }
}
