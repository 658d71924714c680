// Small TOML text helpers: the generated files are read by people, so they are written by hand (with
// comments) rather than by a serializer, and every value goes through these escapes.

/** A TOML basic string; escapes what TOML forbids raw (control characters, DEL, quote, backslash). */
export function tomlString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) as number;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (c < 0x20 || c === 0x7f) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

export function tomlStringArray(items: readonly string[]): string {
  return `[${items.map(tomlString).join(', ')}]`;
}

/** A key, quoted when it is not a bare key. */
export function tomlKey(k: string): string {
  return /^[A-Za-z0-9_-]+$/.test(k) ? k : tomlString(k);
}

/**
 * A multi-line string value. A literal string (`'''`) keeps the text exactly as written, as upstream's
 * initdata examples do; text a literal string cannot carry (three quotes in a row, a trailing quote,
 * control characters or CR) is written as a basic multi-line string with escapes instead.
 */
export function tomlMultiline(s: string): string {
  const literalOk = !s.includes("'''") && !s.endsWith("'") && !/[\u0000-\u0008\u000b-\u001f\u007f]/.test(s);
  if (literalOk) return `'''\n${s}'''`;
  let body = '';
  for (const ch of s) {
    const c = ch.codePointAt(0) as number;
    if (ch === '\n') body += '\n';
    else if (ch === '\t') body += '\t';
    else if (ch === '\\') body += '\\\\';
    else if (ch === '"') body += '\\"';
    else if (c < 0x20 || c === 0x7f) body += `\\u${c.toString(16).padStart(4, '0')}`;
    else body += ch;
  }
  return `"""\n${body}"""`;
}
