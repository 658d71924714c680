// A least-recently-used map bounded by entry count and by an estimate of the bytes it holds. Every cache
// in the KBS goes through this one, so that no cache can grow past a stated memory budget whatever its
// keys and values are: the caller states each entry's cost, and an entry that alone exceeds the byte
// budget is not kept at all.

export interface CacheLimits {
  readonly maxEntries: number;
  readonly maxBytes: number;
}

export interface CacheUsage {
  readonly entries: number;
  readonly bytes: number;
}

export class BoundedCache<K, V> {
  private readonly map = new Map<K, { value: V; bytes: number }>();
  private total = 0;
  readonly limits: CacheLimits;

  constructor(limits: CacheLimits) {
    if (!(limits.maxEntries >= 1) || !(limits.maxBytes >= 1)) {
      throw new RangeError('cache limits must be positive');
    }
    this.limits = limits;
  }

  get usage(): CacheUsage {
    return { entries: this.map.size, bytes: this.total };
  }

  /** The value, moved to the most recently used place. */
  get(key: K): V | undefined {
    const e = this.map.get(key);
    if (e === undefined) return undefined;
    this.map.delete(key);
    this.map.set(key, e);
    return e.value;
  }

  /** Stores `value` at the stated cost, dropping the least recently used entries to make room. */
  set(key: K, value: V, bytes: number): void {
    this.delete(key);
    if (!(bytes >= 0) || bytes > this.limits.maxBytes) return;
    while (
      this.map.size > 0 &&
      (this.map.size >= this.limits.maxEntries || this.total + bytes > this.limits.maxBytes)
    ) {
      const oldest = this.map.keys().next();
      if (oldest.done === true) break;
      this.delete(oldest.value);
    }
    this.map.set(key, { value, bytes });
    this.total += bytes;
  }

  delete(key: K): void {
    const e = this.map.get(key);
    if (e === undefined) return;
    this.map.delete(key);
    this.total -= e.bytes;
  }

  clear(): void {
    this.map.clear();
    this.total = 0;
  }
}
