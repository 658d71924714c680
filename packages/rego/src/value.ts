// The Rego value model shared by the evaluator and the builtins.
//
// Scalars are plain JS values. Numbers are `number` (float64, used for every integer in the safe range
// and for all decimals) or `bigint` for integers beyond the safe range; `normalizeInt` keeps that
// representation unique so that equal numbers have equal keys. Sets and objects are keyed by a canonical
// string (`keyOf`) because Rego compares composite values structurally.

export type Value = null | boolean | number | bigint | string | ArrayValue | SetValue | ObjectValue;
export type ArrayValue = readonly Value[];

export type TypeName = 'null' | 'boolean' | 'number' | 'string' | 'array' | 'object' | 'set';

export function typeName(v: Value): TypeName {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean':
      return 'boolean';
    case 'number':
    case 'bigint':
      return 'number';
    case 'string':
      return 'string';
  }
  if (Array.isArray(v)) return 'array';
  return v instanceof SetValue ? 'set' : 'object';
}

export function isNumber(v: Value): v is number | bigint {
  return typeof v === 'number' || typeof v === 'bigint';
}

/** Returns a bigint as a number when it is exactly representable as a safe integer. */
export function normalizeInt(n: bigint): number | bigint {
  return n >= -9007199254740991n && n <= 9007199254740991n ? Number(n) : n;
}

// Prefix for keys of non-string values; a string beginning with it is escaped so that no collision occurs.
const NS = '\u0000';

/** Canonical key: equal Rego values (1 and 1.0 included) have equal keys. */
export function keyOf(v: Value): string {
  if (typeof v === 'string') return v.length > 0 && v.charCodeAt(0) === 0 ? `${NS}s${v}` : v;
  return NS + encode(v);
}

/**
 * keyOf of every non-empty prefix of `path` (`keyOf(path.slice(0, 1))` … `keyOf(path)`), each component
 * encoded once.
 */
export function prefixKeys(path: readonly Value[]): string[] {
  const out: string[] = new Array(path.length);
  let joined = '';
  for (let i = 0; i < path.length; i++) {
    const enc = encode(path[i] as Value);
    joined = i === 0 ? enc : `${joined},${enc}`;
    out[i] = `${NS}[${joined}]`;
  }
  return out;
}

function encode(v: Value): string {
  if (v === null) return 'n';
  switch (typeof v) {
    case 'boolean':
      return v ? 't' : 'f';
    case 'number':
      return `#${Object.is(v, -0) ? 0 : v}`;
    case 'bigint':
      return `#${v}`;
    case 'string':
      return JSON.stringify(v);
  }
  if (Array.isArray(v)) return `[${v.map(encode).join(',')}]`;
  if (v instanceof SetValue) return `<${v.sorted().map(encode).join(',')}>`;
  const obj = v as ObjectValue;
  return `{${obj
    .sortedEntries()
    .map(([k, x]) => `${encode(k)}:${encode(x)}`)
    .join(',')}}`;
}

/**
 * Receives the bytes that sets and objects allocate while an evaluation runs (see withMeter): one slot per
 * new member or key, plus the canonical key string (2 bytes a character) of a non-string member or key,
 * plus a slot per entry copied by clone. The interpreter charges these against its memory budget.
 */
export interface AllocationMeter {
  charge(bytes: number): void;
}

/** Estimated bytes of one Map entry holding a member or key (the entry, its hash slot, a tuple). */
export const ENTRY_BYTES = 64;

let meter: AllocationMeter | undefined;

/** Runs `f` with `m` receiving the allocations of sets and objects; the previous meter is restored after. */
export function withMeter<T>(m: AllocationMeter, f: () => T): T {
  const previous = meter;
  meter = m;
  try {
    return f();
  } finally {
    meter = previous;
  }
}

export class SetValue {
  readonly items = new Map<string, Value>();
  private sortedCache: Value[] | undefined;

  static of(values: Iterable<Value>): SetValue {
    const s = new SetValue();
    for (const v of values) s.add(v);
    return s;
  }
  add(v: Value): void {
    const k = keyOf(v);
    if (meter !== undefined) {
      const before = this.items.size;
      this.items.set(k, v);
      if (this.items.size !== before) meter.charge(ENTRY_BYTES + (typeof v === 'string' ? 0 : 2 * k.length));
    } else {
      this.items.set(k, v);
    }
    this.sortedCache = undefined;
  }
  has(v: Value): boolean {
    return this.items.has(keyOf(v));
  }
  /** A shallow copy (members are shared). */
  clone(): SetValue {
    const s = new SetValue();
    meter?.charge(ENTRY_BYTES * this.items.size);
    for (const [k, v] of this.items) s.items.set(k, v);
    return s;
  }
  get size(): number {
    return this.items.size;
  }
  values(): IterableIterator<Value> {
    return this.items.values();
  }
  /** Members in Rego's canonical order. The result must not be mutated. */
  sorted(): Value[] {
    this.sortedCache ??= [...this.items.values()].sort(compare);
    return this.sortedCache;
  }
}

export class ObjectValue {
  readonly entries = new Map<string, [Value, Value]>();
  private sortedCache: [Value, Value][] | undefined;

  static fromEntries(entries: Iterable<readonly [Value, Value]>): ObjectValue {
    const o = new ObjectValue();
    for (const [k, v] of entries) o.set(k, v);
    return o;
  }
  set(k: Value, v: Value): void {
    const key = keyOf(k);
    if (meter !== undefined) {
      const before = this.entries.size;
      this.entries.set(key, [k, v]);
      if (this.entries.size !== before)
        meter.charge(ENTRY_BYTES + (typeof k === 'string' ? 0 : 2 * key.length));
    } else {
      this.entries.set(key, [k, v]);
    }
    this.sortedCache = undefined;
  }
  get(k: Value): Value | undefined {
    return this.entries.get(keyOf(k))?.[1];
  }
  /** Fast path for the common string key. */
  getStr(k: string): Value | undefined {
    return this.entries.get(keyOf(k))?.[1];
  }
  has(k: Value): boolean {
    return this.entries.has(keyOf(k));
  }
  /** A shallow copy (keys and values are shared). */
  clone(): ObjectValue {
    const o = new ObjectValue();
    meter?.charge(ENTRY_BYTES * this.entries.size);
    for (const [k, e] of this.entries) o.entries.set(k, e);
    return o;
  }
  delete(k: Value): void {
    this.entries.delete(keyOf(k));
    this.sortedCache = undefined;
  }
  get size(): number {
    return this.entries.size;
  }
  keys(): Value[] {
    return [...this.entries.values()].map((e) => e[0]);
  }
  /** Entries sorted by key in Rego's canonical order. The result must not be mutated. */
  sortedEntries(): [Value, Value][] {
    this.sortedCache ??= [...this.entries.values()].sort((a, b) => compare(a[0], b[0]));
    return this.sortedCache;
  }
}

// OPA's ordering across types: null < boolean < number < string < array < object < set.
const RANK: Record<TypeName, number> = {
  null: 0,
  boolean: 1,
  number: 2,
  string: 3,
  array: 4,
  object: 5,
  set: 6,
};

export function compareNumbers(a: number | bigint, b: number | bigint): number {
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  // Mixed bigint/number comparison is exact in JS.
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Total order over Rego values, as OPA's ast.Compare. */
export function compare(a: Value, b: Value): number {
  const ta = typeName(a);
  const tb = typeName(b);
  if (ta !== tb) return RANK[ta] - RANK[tb];
  switch (ta) {
    case 'null':
      return 0;
    case 'boolean':
      return a === b ? 0 : a ? 1 : -1;
    case 'number':
      return compareNumbers(a as number | bigint, b as number | bigint);
    case 'string':
      return compareStrings(a as string, b as string);
    case 'array':
      return compareSeq(a as ArrayValue, b as ArrayValue);
    case 'set':
      return compareSeq((a as SetValue).sorted(), (b as SetValue).sorted());
    case 'object': {
      const ea = (a as ObjectValue).sortedEntries();
      const eb = (b as ObjectValue).sortedEntries();
      const n = Math.min(ea.length, eb.length);
      for (let i = 0; i < n; i++) {
        const c = compare(ea[i]![0], eb[i]![0]);
        if (c !== 0) return c;
      }
      for (let i = 0; i < n; i++) {
        const c = compare(ea[i]![1], eb[i]![1]);
        if (c !== 0) return c;
      }
      return ea.length - eb.length;
    }
  }
}

// Go compares strings bytewise (UTF-8); comparing by code point gives the same order.
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const ca = a.codePointAt(i)!;
    const cb = b.codePointAt(i)!;
    if (ca !== cb) return ca < cb ? -1 : 1;
    if (ca > 0xffff) i++;
  }
  return a.length - b.length;
}

function compareSeq(a: readonly Value[], b: readonly Value[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const c = compare(a[i]!, b[i]!);
    if (c !== 0) return c;
  }
  return a.length - b.length;
}

export function equals(a: Value, b: Value): boolean {
  if (a === b) return true;
  const ta = typeName(a);
  if (ta !== typeName(b)) return false;
  if (ta === 'number') return compareNumbers(a as number | bigint, b as number | bigint) === 0;
  if (ta === 'string' || ta === 'boolean' || ta === 'null') return false;
  return compare(a, b) === 0;
}

/** Converts parsed JSON (or YAML) into a Rego value. Objects become ObjectValue. */
export function fromJSON(j: unknown): Value {
  if (j === null || typeof j === 'boolean' || typeof j === 'string') return j;
  if (typeof j === 'number') {
    if (!Number.isFinite(j)) throw new TypeError(`not a JSON number: ${j}`);
    return j;
  }
  if (typeof j === 'bigint') return normalizeInt(j);
  if (Array.isArray(j)) return j.map(fromJSON);
  if (j instanceof SetValue || j instanceof ObjectValue) return j;
  if (typeof j === 'object') {
    const o = new ObjectValue();
    for (const [k, v] of Object.entries(j as Record<string, unknown>)) o.set(k, fromJSON(v));
    return o;
  }
  throw new TypeError(`cannot convert ${typeof j} to a Rego value`);
}

/**
 * JSON.parse that keeps integers beyond the safe range exact (as bigint), using the reviver's source text.
 */
export function parseJSON(text: string): Value {
  const parsed = JSON.parse(text, (_key, value, context?: { source?: string }) => {
    if (typeof value === 'number' && !Number.isSafeInteger(value) && context?.source !== undefined) {
      const src = context.source;
      if (/^-?\d+$/.test(src)) return BigInt(src);
    }
    return value;
  });
  return fromJSON(parsed);
}

/** Converts a Rego value to plain JSON data. Sets become sorted arrays; non-string keys are JSON-encoded. */
export function toJSON(v: Value): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(toJSON);
  if (v instanceof SetValue) return v.sorted().map(toJSON);
  const out: Record<string, unknown> = {};
  for (const [k, x] of (v as ObjectValue).sortedEntries()) {
    out[typeof k === 'string' ? k : serialize(k)] = toJSON(x);
  }
  return out;
}

/** Serializes a value as compact JSON with object keys sorted, the way OPA prints results. */
export function serialize(v: Value): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
      return formatNumber(v);
    case 'bigint':
      return v.toString();
    case 'string':
      return JSON.stringify(v);
  }
  if (Array.isArray(v)) return `[${v.map(serialize).join(',')}]`;
  if (v instanceof SetValue) return `[${v.sorted().map(serialize).join(',')}]`;
  const parts = (v as ObjectValue)
    .sortedEntries()
    .map(
      ([k, x]) =>
        `${typeof k === 'string' ? JSON.stringify(k) : JSON.stringify(serialize(k))}:${serialize(x)}`,
    );
  return `{${parts.join(',')}}`;
}

/** Formats a float64 as JSON without exponent for integers (OPA prints 1e21 as 1000000000000000000000). */
export function formatNumber(n: number): string {
  if (Number.isInteger(n) && Math.abs(n) >= 1e21) return BigInt(n).toString();
  return Object.is(n, -0) ? '0' : String(n);
}
