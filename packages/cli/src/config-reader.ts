// Reading of configuration tables (TOML or JSON documents): each key is typed, and whatever a section
// does not consume is either reported (one warning naming the key and its section: trustee's and
// guest-components' structs ignore keys they do not know, serde's default) or, for the sections trustee
// marks `deny_unknown_fields` (the KBS's `[admin]` and below), refused with serde's message. A misspelt
// key therefore never falls back to a default without a word. The KBS, the attestation agent and the
// data hub all read their files with it; each keeps its own error class and way of naming keys.

import { CliError } from './errors.js';

export class ConfigError extends CliError {
  override readonly name: string = 'ConfigError';
  constructor(message?: string, options?: { cause?: unknown }) {
    super('CONFIG_INVALID', message, options);
  }
}

/** How a reader names keys and which error it throws. */
export interface SectionStyle {
  /**
   * `bracket` (the default), trustee's TOML sections: `[http_server] sockets`, nested `[a.b]`;
   * `dotted`: `token_configs.kbs.url`, the root being `''`.
   */
  readonly naming?: 'bracket' | 'dotted';
  /** The error for a bad document; default `ConfigError`. */
  readonly error?: (message: string) => Error;
  /** A JSON `null` reads as an absent key (serde's `Option`). */
  readonly nullIsAbsent?: boolean;
}

/** A value as messages show it: its type, and a scalar's text bounded to 64 characters. */
function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (v instanceof Date) return 'a date';
  if (typeof v === 'object') return 'a table';
  const text = (typeof v === 'bigint' ? String(v) : JSON.stringify(v)) ?? String(v);
  return `${typeof v} ${text.length > 64 ? `${text.slice(0, 64)}…` : text}`;
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
   * `obj` is the table; `where` names it in messages, e.g. `[http_server]` or `token_configs.kbs`.
   * `warnings`, when given, receives one line per unknown key from `finish` instead of an error
   * (sections read from this one share it).
   */
  constructor(
    private readonly obj: Record<string, unknown>,
    readonly where: string,
    private readonly warnings?: string[],
    private readonly style: SectionStyle = {},
  ) {}

  static of(v: unknown, where: string, warnings?: string[], style: SectionStyle = {}): Section {
    if (!isTable(v)) {
      const message =
        style.naming === 'dotted'
          ? `${where || 'the configuration'}: expected a table, found ${describe(v)}`
          : `${where} must be a table, found ${describe(v)}`;
      throw Section.error(style, message);
    }
    return new Section(v, where, warnings, style);
  }

  private static error(style: SectionStyle, message: string): Error {
    return style.error?.(message) ?? new ConfigError(message);
  }

  private error(message: string): Error {
    return Section.error(this.style, message);
  }

  /** How messages name `key` of this section. */
  path(key: string): string {
    if (this.style.naming === 'dotted') return this.where === '' ? key : `${this.where}.${key}`;
    return `${this.where} ${key}`;
  }

  has(key: string): boolean {
    return Object.hasOwn(this.obj, key);
  }

  /** The raw value, marking the key as known. */
  raw(key: string): unknown {
    this.used.add(key);
    const v = Object.hasOwn(this.obj, key) ? this.obj[key] : undefined;
    return v === null && this.style.nullIsAbsent ? undefined : v;
  }

  /** Throws `<key>: expected <expected>, found <v>`. */
  fail(key: string, expected: string, v: unknown): never {
    throw this.error(`${this.path(key)}: expected ${expected}, found ${describe(v)}`);
  }

  optString(key: string): string | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'string') this.fail(key, 'a string', v);
    return v;
  }

  /** The string, `def` when absent, or `<key> is required`. */
  string(key: string, def?: string): string {
    const v = this.optString(key);
    if (v !== undefined) return v;
    if (def === undefined) throw this.error(`${this.path(key)} is required`);
    return def;
  }

  /** A required string, missing said as serde says it: `<section>: missing field \`key\``. */
  requiredField(key: string): string {
    const v = this.optString(key);
    if (v === undefined) throw this.error(`${this.where}: missing field \`${key}\``);
    return v;
  }

  bool(key: string, def: boolean): boolean {
    const v = this.raw(key);
    if (v === undefined) return def;
    if (typeof v !== 'boolean') this.fail(key, 'true or false', v);
    return v;
  }

  /** A bool, or the strings "true"/"false", as the config crate converts them. */
  looseBool(key: string, def: boolean): boolean {
    const v = this.raw(key);
    if (v === undefined) return def;
    if (typeof v === 'boolean') return v;
    if (v === 'true' || v === 'false') return v === 'true';
    this.fail(key, 'a boolean', v);
  }

  optInt(key: string, min: number, max: number): number | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    const n = typeof v === 'bigint' ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isInteger(n)) this.fail(key, 'an integer', v);
    if (n < min || n > max) throw this.error(`${this.path(key)}: ${n} is outside ${min}..${max}`);
    return n;
  }

  int(key: string, def: number, min: number, max: number): number {
    return this.optInt(key, min, max) ?? def;
  }

  /** A non-negative integer up to `max`, also as a decimal string (the config crate converts them). */
  looseUint(key: string, def: number, max: number): number {
    const v = this.raw(key);
    if (v === undefined) return def;
    const n = typeof v === 'string' && /^\d{1,10}$/.test(v) ? Number(v) : v;
    if (typeof n === 'bigint' && n >= 0n && n <= BigInt(max)) return Number(n);
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > max) {
      this.fail(key, `an integer from 0 to ${max}`, v);
    }
    return n;
  }

  stringArray(key: string, def: readonly string[] = []): string[] {
    const v = this.raw(key);
    if (v === undefined) return [...def];
    if (!Array.isArray(v)) this.fail(key, 'an array of strings', v);
    return v.map((x, i) => {
      if (typeof x !== 'string') this.fail(`${key}[${i}]`, 'a string', x);
      return x;
    });
  }

  /** The nested table `key`; `name` labels it (default `[a.key]`, or `a.key` when dotted). */
  optSection(key: string, name?: string): Section | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    const label =
      name ?? (this.style.naming === 'dotted' ? this.path(key) : `${this.where.slice(0, -1)}.${key}]`);
    return Section.of(v, label, this.warnings, this.style);
  }

  /** `name` labels the entries (`[[plugins]]` → `[[plugins]] #1`); default `<key>[i]`. */
  sectionArray(key: string, name?: string): Section[] {
    const v = this.raw(key);
    if (v === undefined) return [];
    if (!Array.isArray(v)) this.fail(key, 'an array of tables', v);
    return v.map((x, i) =>
      Section.of(x, name ? `${name} #${i + 1}` : `${this.path(key)}[${i}]`, this.warnings, this.style),
    );
  }

  /** Keys present but never read, as `path` names them. */
  unknownKeys(): string[] {
    return Object.keys(this.obj)
      .filter((k) => !this.used.has(k))
      .map((k) => this.path(k));
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
      if (this.warnings === undefined) throw this.error(`${line}${hint ? ` (${hint})` : ''}`);
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
      throw this.error(`${this.where} ${serdeUnknownField(key, known)}${hint ? ` (${hint})` : ''}`);
    }
  }
}
