// Text helpers that reproduce Go's string semantics on JS strings: Go indexes runes (code points) where
// JS indexes UTF-16 units, and Go's Unicode predicates and quoting differ from JS's built-ins.
import { formatNumber, type ObjectValue, SetValue, type Value } from '../value.js';

const ASCII = /^[\x00-\x7f]*$/;

export function isAscii(s: string): boolean {
  return ASCII.test(s);
}

/** The string's code points, each as a string. */
export function runes(s: string): string[] {
  return Array.from(s);
}

export function runeCount(s: string): number {
  if (isAscii(s)) return s.length;
  let n = 0;
  for (const _ of s) n++;
  return n;
}

// Go's unicode.IsSpace: the White_Space property.
const SPACE =
  '\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000';

export function isGoSpace(ch: string): boolean {
  return ch.length === 1 && SPACE.includes(ch);
}

export function goTrimSpace(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && isGoSpace(s[start]!)) start++;
  while (end > start && isGoSpace(s[end - 1]!)) end--;
  return s.slice(start, end);
}

/** Go's strings.Trim/TrimLeft/TrimRight with a cutset of runes. */
export function goTrim(s: string, cutset: string, left: boolean, right: boolean): string {
  if (s === '' || cutset === '') return s;
  const cut = new Set(runes(cutset));
  const rs = runes(s);
  let start = 0;
  let end = rs.length;
  if (left) while (start < end && cut.has(rs[start]!)) start++;
  if (right) while (end > start && cut.has(rs[end - 1]!)) end--;
  return rs.slice(start, end).join('');
}

// Go maps case rune by rune with the simple (one-to-one) mappings; JS applies the full, sometimes
// multi-character and context-sensitive, mappings. Mapping each code point alone and refusing
// multi-character results gives Go's answer.
function mapRunes(s: string, f: (ch: string) => string, special: Record<string, string>): string {
  let out = '';
  for (const ch of s) {
    const m = f(ch);
    if (m.length === ch.length || runeCount(m) === 1) out += m;
    else out += special[ch] ?? ch;
  }
  return out;
}

const LOWER_SPECIAL: Record<string, string> = { '\u0130': 'i' };

export function goLower(s: string): string {
  if (isAscii(s)) return s.toLowerCase();
  return mapRunes(s, (c) => c.toLowerCase(), LOWER_SPECIAL);
}

export function goUpper(s: string): string {
  if (isAscii(s)) return s.toUpperCase();
  return mapRunes(s, (c) => c.toUpperCase(), {});
}

const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}

/** Go's strconv.Quote (asciiOnly: strconv.QuoteToASCII). */
export function goQuote(s: string, asciiOnly = false, quote = '"'): string {
  let out = quote;
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (ch === quote || ch === '\\') {
      out += `\\${ch}`;
      continue;
    }
    if (cp >= 0xd800 && cp <= 0xdfff) {
      // A lone surrogate cannot be valid UTF-8; Go would see U+FFFD.
      out += asciiOnly ? '\\ufffd' : '\ufffd';
      continue;
    }
    if (asciiOnly ? cp < 0x80 && PRINTABLE.test(ch) : PRINTABLE.test(ch)) {
      out += ch;
      continue;
    }
    switch (ch) {
      case '\x07':
        out += '\\a';
        continue;
      case '\b':
        out += '\\b';
        continue;
      case '\f':
        out += '\\f';
        continue;
      case '\n':
        out += '\\n';
        continue;
      case '\r':
        out += '\\r';
        continue;
      case '\t':
        out += '\\t';
        continue;
      case '\v':
        out += '\\v';
        continue;
    }
    if (cp < 0x20 || cp === 0x7f) out += `\\x${hex(cp, 2)}`;
    else if (cp < 0x10000) out += `\\u${hex(cp, 4)}`;
    else out += `\\U${hex(cp, 8)}`;
  }
  return out + quote;
}

/** A value as OPA prints a term (ast.Term.String), e.g. `{"a": [1, 2]}`, `set()`. */
export function termString(v: Value): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
      return formatNumber(v);
    case 'bigint':
      return v.toString();
    case 'string':
      return goQuote(v);
  }
  if (Array.isArray(v)) return `[${v.map(termString).join(', ')}]`;
  if (v instanceof SetValue) {
    if (v.size === 0) return 'set()';
    return `{${v.sorted().map(termString).join(', ')}}`;
  }
  const o = v as ObjectValue;
  return `{${o
    .sortedEntries()
    .map(([k, x]) => `${termString(k)}: ${termString(x)}`)
    .join(', ')}}`;
}

/** Go's utf8 encoding of a string (lone surrogates become U+FFFD, as Go would see them). */
export function utf8(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}
