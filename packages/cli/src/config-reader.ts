// Reading of configuration tables: each key is typed, and whatever a section does not consume is either
// reported (one warning naming the key and its section: trustee's structs ignore keys they do not know,
// serde's default) or, for the sections trustee marks `deny_unknown_fields` (`[admin]` and below), refused
// with serde's message. A misspelt key therefore never falls back to a default without a word.

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

/** serde's wording for a field a `deny_unknown_fields` struct does not have. */
function serdeUnknownField(key: string, known: readonly string[]): string {
  const q = (k: string) => `\`${k}\``;
  if (known.length === 0) return `unknown field ${q(key)}, there are no fields`;
  if (known.length === 1) return `unknown field ${q(key)}, expected ${q(known[0] as string)}`;
  if (known.length === 2) {
    return `unknown field ${q(key)}, expected ${q(known[0] as string)} or ${q(known[1] as string)}`;
  }
  return `unknown field ${q(key)}, expected one of ${known.map(q).join(', ')}`;
}

export class Section {
  private readonly used = new Set<string>();
  /**
   * `obj` is the table; `where` names it in messages, e.g. `[http_server]`. `warnings`, when given,
   * receives one line per unknown key instead of an error (sections read from it share it).
   */
  constructor(
    private readonly obj: Record<string, unknown>,
    readonly where: string,
    private readonly warnings?: string[],
  ) {}

  static of(v: unknown, where: string, warnings?: string[]): Section {
    if (!isTable(v)) throw new ConfigError(`${where} must be a table, found ${describe(v)}`);
    return new Section(v, where, warnings);
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
    return v === undefined ? undefined : Section.of(v, name, this.warnings);
  }

  /** `name` labels the entries (`[[plugins]]` → `[[plugins]] #1`); default `<section> key[i]`. */
  sectionArray(key: string, name?: string): Section[] {
    const v = this.raw(key);
    if (v === undefined) return [];
    if (!Array.isArray(v)) this.fail(key, 'an array of tables', v);
    return v.map((x, i) =>
      Section.of(x, name ? `${name} #${i + 1}` : `${this.where} ${key}[${i}]`, this.warnings),
    );
  }

  /**
   * Deals with every key that was not read: one warning each when the section has a warnings list,
   * otherwise an error. `hints` add advice for well-known mistakes.
   */
  finish(hints: Record<string, string> = {}): void {
    for (const key of Object.keys(this.obj)) {
      if (this.used.has(key)) continue;
      const hint = hints[key];
      const line = `unknown key ${JSON.stringify(key)} in ${this.where}`;
      if (this.warnings === undefined) throw new ConfigError(`${line}${hint ? ` (${hint})` : ''}`);
      this.warnings.push(`${line} is ignored${hint ? ` (${hint})` : ''}`);
    }
  }

  /**
   * For trustee's `deny_unknown_fields` sections: any key not read is refused with serde's message
   * (`unknown field \`x\`, expected …`), whatever the warnings list. `hints` are appended; `tag` is an
   * enum's tag key (`authorization_mode`), which serde does not list among the fields.
   */
  finishStrict(hints: Record<string, string> = {}, tag?: string): void {
    const known = [...this.used].filter((k) => k !== tag && !Object.hasOwn(hints, k));
    for (const key of Object.keys(this.obj)) {
      if (this.used.has(key)) continue;
      const hint = hints[key];
      throw new ConfigError(`${this.where} ${serdeUnknownField(key, known)}${hint ? ` (${hint})` : ''}`);
    }
  }
}
