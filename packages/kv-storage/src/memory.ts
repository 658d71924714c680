// In-process storage: the embedded default for sessions, and for everything when no LocalFs is set.
import type { KvStorage, Namespace, SetOptions } from './types.js';

interface Entry {
  readonly value: Uint8Array;
  /** Epoch milliseconds after which the entry is gone; Infinity when it has no lifetime. */
  readonly expiresAt: number;
}

export interface MemoryStorageOptions {
  /** Clock in epoch milliseconds; tests inject one to exercise expiry without waiting. */
  readonly now?: () => number;
}

export class MemoryStorage implements KvStorage {
  private readonly spaces = new Map<Namespace, Map<string, Entry>>();
  private readonly now: () => number;

  constructor(options: MemoryStorageOptions = {}) {
    this.now = options.now ?? Date.now;
  }

  private space(ns: Namespace): Map<string, Entry> {
    let m = this.spaces.get(ns);
    if (m === undefined) {
      m = new Map();
      this.spaces.set(ns, m);
    }
    return m;
  }

  /** The live entry, dropping it when its lifetime has passed. */
  private live(ns: Namespace, key: string): Entry | undefined {
    const m = this.spaces.get(ns);
    const e = m?.get(key);
    if (e === undefined) return undefined;
    if (e.expiresAt <= this.now()) {
      m?.delete(key);
      return undefined;
    }
    return e;
  }

  async get(ns: Namespace, key: string): Promise<Uint8Array | undefined> {
    const e = this.live(ns, key);
    // Copies (Buffer.slice would share memory), so a caller that mutates the bytes cannot change the stored value.
    return e === undefined ? undefined : new Uint8Array(e.value);
  }

  async set(ns: Namespace, key: string, value: Uint8Array, options: SetOptions = {}): Promise<boolean> {
    if (options.overwrite === false && this.live(ns, key) !== undefined) return false;
    const ttl = options.ttlMs;
    if (ttl !== undefined && !(ttl > 0)) throw new RangeError(`ttlMs must be positive, got ${ttl}`);
    this.space(ns).set(key, {
      value: new Uint8Array(value),
      expiresAt: ttl === undefined ? Infinity : this.now() + ttl,
    });
    return true;
  }

  async delete(ns: Namespace, key: string): Promise<boolean> {
    const existed = this.live(ns, key) !== undefined;
    this.spaces.get(ns)?.delete(key);
    return existed;
  }

  async list(ns: Namespace): Promise<string[]> {
    const m = this.spaces.get(ns);
    if (m === undefined) return [];
    const now = this.now();
    const keys: string[] = [];
    for (const [k, e] of m) {
      if (e.expiresAt <= now) m.delete(k);
      else keys.push(k);
    }
    return keys;
  }

  async close(): Promise<void> {
    this.spaces.clear();
  }
}
