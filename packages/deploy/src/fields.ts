// Strict reading of a YAML mapping: every key read is ticked off, and `finish()` refuses the rest by name,
// so a misspelt field is an error instead of a setting silently not applied.
import { BrokerConfigError } from './errors.js';

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  return `${typeof v} ${JSON.stringify(v)?.slice(0, 40)}`;
}

/** Edit distance (insertions, deletions, substitutions, adjacent swaps), case-insensitive. */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  const d: number[][] = Array.from({ length: x.length + 1 }, (_, i) =>
    Array.from({ length: y.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= x.length; i++) {
    for (let j = 1; j <= y.length; j++) {
      const cost = x[i - 1] === y[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1])
        v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[x.length]![y.length]!;
}

/**
 * The known field an unknown one most likely means: the same but for case or a few typed letters
 * (at most a third of the name, and at least two), or a name it begins or ends (`profile` →
 * `profileType`). Undefined when none is close.
 */
export function likelyField(unknown: string, known: Iterable<string>): string | undefined {
  if (unknown.length > 128) return undefined;
  let best: string | undefined;
  let bestScore = Number.POSITIVE_INFINITY;
  const u = unknown.toLowerCase();
  for (const k of known) {
    if (k.length > 128) continue;
    const lk = k.toLowerCase();
    let score = distance(unknown, k);
    const limit = Math.max(2, Math.floor(Math.max(unknown.length, k.length) / 3));
    if (score > limit) {
      if (u.length >= 4 && (lk.startsWith(u) || lk.endsWith(u))) score = limit + 1;
      else continue;
    }
    if (score < bestScore) {
      best = k;
      bestScore = score;
    }
  }
  return best;
}

export class Fields {
  private readonly seen = new Set<string>();

  private constructor(
    private readonly obj: Record<string, unknown>,
    readonly path: string,
  ) {}

  static of(value: unknown, path: string): Fields {
    if (!isRecord(value)) throw new BrokerConfigError(path, `must be a mapping, found ${describe(value)}`);
    return new Fields(value, path);
  }

  private at(key: string): string {
    return this.path === '' ? key : `${this.path}.${key}`;
  }

  private take(key: string): unknown {
    this.seen.add(key);
    return Object.hasOwn(this.obj, key) ? this.obj[key] : undefined;
  }

  /** Marks a key as known without reading it (fields the API server adds). */
  ignore(key: string): void {
    this.seen.add(key);
  }

  has(key: string): boolean {
    return Object.hasOwn(this.obj, key) && this.obj[key] !== null;
  }

  optString(key: string): string | undefined {
    const v = this.take(key);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string')
      throw new BrokerConfigError(this.at(key), `must be a string, found ${describe(v)}`);
    return v;
  }

  string(key: string): string {
    const v = this.optString(key);
    if (v === undefined || v === '') throw new BrokerConfigError(this.at(key), 'is required');
    return v;
  }

  optEnum<T extends string>(key: string, allowed: readonly T[]): T | undefined {
    const v = this.optString(key);
    if (v === undefined) return undefined;
    if (!(allowed as readonly string[]).includes(v)) {
      throw new BrokerConfigError(this.at(key), `${JSON.stringify(v)} is not one of ${allowed.join(', ')}`);
    }
    return v as T;
  }

  optInt(key: string, min: number, max: number): number | undefined {
    const v = this.take(key);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      throw new BrokerConfigError(
        this.at(key),
        `must be an integer from ${min} to ${max}, found ${describe(v)}`,
      );
    }
    return v;
  }

  optStringArray(key: string, maxItems: number): string[] | undefined {
    const v = this.take(key);
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v)) throw new BrokerConfigError(this.at(key), `must be a list, found ${describe(v)}`);
    if (v.length > maxItems) throw new BrokerConfigError(this.at(key), `has more than ${maxItems} entries`);
    return v.map((x, i) => {
      if (typeof x !== 'string') {
        throw new BrokerConfigError(`${this.at(key)}[${i}]`, `must be a string, found ${describe(x)}`);
      }
      return x;
    });
  }

  optStringMap(key: string): Record<string, string> | undefined {
    const v = this.take(key);
    if (v === undefined || v === null) return undefined;
    if (!isRecord(v)) throw new BrokerConfigError(this.at(key), `must be a mapping, found ${describe(v)}`);
    const out: Record<string, string> = {};
    for (const [k, x] of Object.entries(v)) {
      if (typeof x !== 'string') {
        throw new BrokerConfigError(`${this.at(key)}.${k}`, `must be a string, found ${describe(x)}`);
      }
      Object.defineProperty(out, k, { value: x, enumerable: true, writable: true, configurable: true });
    }
    return out;
  }

  /** A list of mappings, each read strictly (`key[i]`). */
  optList(key: string, maxItems: number): Fields[] | undefined {
    const v = this.take(key);
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v)) throw new BrokerConfigError(this.at(key), `must be a list, found ${describe(v)}`);
    if (v.length > maxItems) throw new BrokerConfigError(this.at(key), `has more than ${maxItems} entries`);
    return v.map((x, i) => Fields.of(x, `${this.at(key)}[${i}]`));
  }

  optFields(key: string): Fields | undefined {
    const v = this.take(key);
    if (v === undefined || v === null) return undefined;
    return Fields.of(v, this.at(key));
  }

  fields(key: string): Fields {
    const f = this.optFields(key);
    if (f === undefined) throw new BrokerConfigError(this.at(key), 'is required');
    return f;
  }

  /** The keys not read so far (for readers that report them instead of refusing them). */
  unread(): string[] {
    return Object.keys(this.obj).filter((k) => !this.seen.has(k));
  }

  /** The field an unread key most likely means, among the keys read (see likelyField). */
  suggest(key: string): string | undefined {
    return likelyField(key, this.seen);
  }

  /**
   * Refuses every key that was not read, naming the likely field (`did you mean profileType?`);
   * `hints` gives the advice for known mistakes instead.
   */
  finish(hints: Record<string, string> = {}): void {
    for (const k of Object.keys(this.obj)) {
      if (this.seen.has(k)) continue;
      const likely = this.suggest(k);
      const hint = Object.hasOwn(hints, k)
        ? ` (${hints[k]})`
        : likely !== undefined
          ? ` (did you mean ${likely}?)`
          : '';
      throw new BrokerConfigError(this.at(k), `unknown field${hint}`);
    }
  }
}
