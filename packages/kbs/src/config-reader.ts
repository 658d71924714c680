// Strict reading of configuration tables: each key is typed, and whatever a section does not consume is
// refused with a message that names the key and its section (trustee's `deny_unknown_fields`, applied to
// every section so that a misspelt key never silently falls back to a default).

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (v instanceof Date) return 'a date';
  return typeof v === 'object' ? 'a table' : `${typeof v} ${JSON.stringify(v)}`;
}

export function isTable(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

export class Section {
  private readonly used = new Set<string>();
  /** `obj` is the table; `where` names it in messages, e.g. `[http_server]`. */
  constructor(
    private readonly obj: Record<string, unknown>,
    readonly where: string,
  ) {}

  static of(v: unknown, where: string): Section {
    if (!isTable(v)) throw new ConfigError(`${where} must be a table, found ${describe(v)}`);
    return new Section(v, where);
  }

  has(key: string): boolean {
    return Object.hasOwn(this.obj, key);
  }

  /** The raw value, marking the key as known. */
  raw(key: string): unknown {
    this.used.add(key);
    return Object.hasOwn(this.obj, key) ? this.obj[key] : undefined;
  }

  private fail(key: string, expected: string, v: unknown): never {
    throw new ConfigError(`${this.where} ${key}: expected ${expected}, found ${describe(v)}`);
  }

  optString(key: string): string | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'string') this.fail(key, 'a string', v);
    return v;
  }

  string(key: string, def?: string): string {
    const v = this.optString(key);
    if (v !== undefined) return v;
    if (def === undefined) throw new ConfigError(`${this.where} ${key} is required`);
    return def;
  }

  bool(key: string, def: boolean): boolean {
    const v = this.raw(key);
    if (v === undefined) return def;
    if (typeof v !== 'boolean') this.fail(key, 'true or false', v);
    return v;
  }

  optInt(key: string, min: number, max: number): number | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    const n = typeof v === 'bigint' ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isInteger(n)) this.fail(key, 'an integer', v);
    if (n < min || n > max) throw new ConfigError(`${this.where} ${key}: ${n} is outside ${min}..${max}`);
    return n;
  }

  stringArray(key: string): string[] {
    const v = this.raw(key);
    if (v === undefined) return [];
    if (!Array.isArray(v)) this.fail(key, 'an array of strings', v);
    return v.map((x, i) => {
      if (typeof x !== 'string') this.fail(`${key}[${i}]`, 'a string', x);
      return x;
    });
  }

  optSection(key: string, name = `${this.where.slice(0, -1)}.${key}]`): Section | undefined {
    const v = this.raw(key);
    return v === undefined ? undefined : Section.of(v, name);
  }

  /** `name` labels the entries (`[[plugins]]` → `[[plugins]] #1`); default `<section> key[i]`. */
  sectionArray(key: string, name?: string): Section[] {
    const v = this.raw(key);
    if (v === undefined) return [];
    if (!Array.isArray(v)) this.fail(key, 'an array of tables', v);
    return v.map((x, i) => Section.of(x, name ? `${name} #${i + 1}` : `${this.where} ${key}[${i}]`));
  }

  /** Refuses any key that was not read. `hints` add advice for well-known mistakes. */
  finish(hints: Record<string, string> = {}): void {
    for (const key of Object.keys(this.obj)) {
      if (this.used.has(key)) continue;
      const hint = hints[key];
      throw new ConfigError(`unknown key ${JSON.stringify(key)} in ${this.where}${hint ? ` (${hint})` : ''}`);
    }
  }
}
