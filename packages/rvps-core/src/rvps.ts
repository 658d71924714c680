// The built-in reference value provider service: registers sample messages into
// the `reference_value` namespace and answers the policies' lookups.

import type { KvStorage } from '@broker/kv-storage';
import { BoundedCache } from '@broker/kv-storage';
import {
  checkReferenceValueName,
  extractReferenceValues,
  parseRvpsMessage,
  type RvpsMessageInput,
} from './message.js';
import {
  decodeReferenceValue,
  encodeReferenceValue,
  isExpired,
  newReferenceValue,
  type ReferenceValue,
} from './reference-value.js';

const NAMESPACE = 'reference_value';

export interface RvpsOptions {
  /**
   * How long a looked-up value (or its absence) is reused by `query`, in ms.
   * Writes through this instance invalidate at once; the TTL only bounds how
   * long a write by another replica sharing the store goes unseen. 0 disables
   * the cache. Default 1000.
   */
  readonly cacheTtlMs?: number;
  /** Clock for expiration stamps and the cache; tests replace it. */
  readonly now?: () => Date;
}

export interface Rvps {
  /** Verifies and extracts a message, then stores each value under its name (overwriting). Returns the names. */
  register(message: RvpsMessageInput): Promise<string[]>;
  /**
   * The value alone, as the policy builtin sees it; `undefined` when there is none or its expiration has
   * passed (as trustee's RVPS skipped expired values; it stopped checking when its query API was
   * reworked in 2025).
   */
  query(name: string): Promise<unknown>;
  /** The whole stored record, for the admin API. */
  get(name: string): Promise<ReferenceValue | undefined>;
}

const DEFAULT_CACHE_TTL_MS = 1000;
/**
 * The names a policy asks for may come from evidence an unauthenticated guest sent, so the cache of
 * lookups (and of absences) is bounded by bytes as well as entries.
 */
const CACHE_LIMITS = { maxEntries: 4096, maxBytes: 16 * 1024 * 1024 };
const CACHE_ENTRY_OVERHEAD = 256;

/** Estimated memory of a cached lookup: the name and the value's JSON, two bytes a character. */
function entryBytes(name: string, value: unknown): number {
  const json = value === undefined ? '' : JSON.stringify(value);
  return 2 * (name.length + (json?.length ?? 0)) + CACHE_ENTRY_OVERHEAD;
}

interface CacheEntry {
  readonly value: unknown;
  readonly at: number;
}

export function createRvps(storage: KvStorage, options: RvpsOptions = {}): Rvps {
  const ttl = options.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS;
  if (!Number.isFinite(ttl) || ttl < 0) throw new RangeError('cacheTtlMs must be a non-negative number');
  const now = options.now ?? (() => new Date());
  const cache = new BoundedCache<string, CacheEntry>(CACHE_LIMITS);
  // Bumped by every write, so a read that raced with a write never caches what it saw.
  let generation = 0;

  async function read(name: string): Promise<ReferenceValue | undefined> {
    // A name that register() would refuse cannot be stored; never hand it to the store as a key.
    if (!isStorableName(name)) return undefined;
    const bytes = await storage.get(NAMESPACE, name);
    return bytes === undefined ? undefined : decodeReferenceValue(name, bytes);
  }

  return {
    async register(input) {
      const message = parseRvpsMessage(input);
      const entries = extractReferenceValues(message);
      const stamp = now();
      // Encode everything first so a bad value stores nothing.
      const records = entries.map(
        ([name, value]) =>
          [name, encodeReferenceValue(newReferenceValue(name, value, stamp, message.provenance))] as const,
      );
      for (const [name, bytes] of records) {
        generation++;
        cache.delete(name);
        await storage.set(NAMESPACE, name, bytes, { overwrite: true });
        generation++;
        cache.delete(name);
      }
      return records.map(([name]) => name);
    },

    async query(name) {
      if (ttl > 0) {
        const hit = cache.get(name);
        if (hit !== undefined && now().getTime() - hit.at < ttl) return hit.value;
      }
      const seen = generation;
      const record = await read(name);
      const value = record === undefined || isExpired(record, now()) ? undefined : record.value;
      if (ttl > 0 && seen === generation) {
        cache.set(name, { value, at: now().getTime() }, entryBytes(name, value));
      }
      return value;
    },

    get: read,
  };
}

function isStorableName(name: string): boolean {
  try {
    checkReferenceValueName(name);
    return true;
  } catch {
    return false;
  }
}
