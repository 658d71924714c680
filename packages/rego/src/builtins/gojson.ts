// JSON as Go's encoding/json writes and reads it for OPA: compact output with sorted keys and Go's
// escaping (<, >, & and U+2028/U+2029 escaped), and a strict parser with Go's error messages that keeps
// big integers exact.

import { formatNumber, ObjectValue, SetValue, serialize, type Value } from '../value.js';
import { fromDecimalText } from './numeric.js';
import { goQuote } from './text.js';

/** Nesting deeper than this is refused when parsing (Go's own limit is 10000; ours bounds recursion). */
export const MAX_JSON_DEPTH = 1000;

const ESCAPES = /[<>&\u2028\u2029]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** A string literal as Go's encoding/json writes it. */
export function goJSONString(s: string): string {
  return JSON.stringify(s).replace(ESCAPES, (c) => {
    if (c.length === 1 && c >= '\ud800' && c <= '\udfff') return '\ufffd';
    return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
}

function keyString(k: Value): string {
  return typeof k === 'string' ? k : serialize(k);
}

function sortedObjectEntries(o: ObjectValue): [string, Value][] {
  const entries = o.sortedEntries().map(([k, v]) => [keyString(k), v] as [string, Value]);
  // Go sorts map keys as byte strings; for UTF-8 that is code point order.
  return entries.sort((a, b) => (a[0] === b[0] ? 0 : cmpCodePoints(a[0], b[0])));
}

function cmpCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const ca = a.codePointAt(i)!;
    const cb = b.codePointAt(i)!;
    if (ca !== cb) return ca < cb ? -1 : 1;
    if (ca > 0xffff) i++;
  }
  return a.length - b.length;
}

function numberText(v: number | bigint): string {
  return typeof v === 'bigint' ? v.toString() : formatNumber(v);
}

/** json.Marshal of a Rego value (sets become sorted arrays, non-string keys are JSON-encoded). */
export function goMarshal(v: Value): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
    case 'bigint':
      return numberText(v);
    case 'string':
      return goJSONString(v);
  }
  if (Array.isArray(v)) return `[${v.map(goMarshal).join(',')}]`;
  if (v instanceof SetValue) return `[${v.sorted().map(goMarshal).join(',')}]`;
  const parts = sortedObjectEntries(v as ObjectValue).map(([k, x]) => `${goJSONString(k)}:${goMarshal(x)}`);
  return `{${parts.join(',')}}`;
}

/** json.MarshalIndent(v, prefix, indent); the first line carries no prefix, as in Go. */
export function goMarshalIndent(v: Value, prefix: string, indent: string): string {
  const walk = (x: Value, depth: number): string => {
    const nl = `\n${prefix}${indent.repeat(depth + 1)}`;
    const close = `\n${prefix}${indent.repeat(depth)}`;
    if (Array.isArray(x) || x instanceof SetValue) {
      const items = Array.isArray(x) ? x : x.sorted();
      if (items.length === 0) return '[]';
      return `[${items.map((i) => nl + walk(i, depth + 1)).join(',')}${close}]`;
    }
    if (x instanceof ObjectValue) {
      const entries = sortedObjectEntries(x);
      if (entries.length === 0) return '{}';
      return `{${entries.map(([k, i]) => `${nl}${goJSONString(k)}: ${walk(i, depth + 1)}`).join(',')}${close}}`;
    }
    return goMarshal(x);
  };
  return walk(v, 0);
}

/** A JSON syntax error with Go's message. */
export class JSONSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JSONSyntaxError';
  }
}

function quoteChar(c: string): string {
  if (c === "'") return "'\\''";
  if (c === '"') return `'"'`;
  const q = goQuote(c);
  return `'${q.slice(1, -1)}'`;
}

/** Parses JSON strictly as Go's decoder does, with exact integers and Go's error messages. */
export function goUnmarshal(text: string): Value {
  let i = 0;
  const n = text.length;
  const unexpectedEnd = () => new JSONSyntaxError('unexpected end of JSON input');
  const invalid = (context: string) => {
    const c = String.fromCodePoint(text.codePointAt(i)!);
    return new JSONSyntaxError(`invalid character ${quoteChar(c)} ${context}`);
  };
  const ws = () => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
  };
  const str = (): string => {
    // at opening quote
    i++;
    let out = '';
    let start = i;
    for (;;) {
      if (i >= n) throw unexpectedEnd();
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        out += text.slice(start, i);
        i++;
        return out;
      }
      if (c < 0x20) throw invalid('in string literal');
      if (c === 0x5c) {
        out += text.slice(start, i);
        i++;
        if (i >= n) throw unexpectedEnd();
        const e = text[i]!;
        const simple: Record<string, string> = {
          '"': '"',
          '\\': '\\',
          '/': '/',
          b: '\b',
          f: '\f',
          n: '\n',
          r: '\r',
          t: '\t',
        };
        if (simple[e] !== undefined) {
          out += simple[e];
          i++;
        } else if (e === 'u') {
          i++;
          let code = 0;
          for (let k = 0; k < 4; k++) {
            if (i >= n) throw unexpectedEnd();
            const h = text[i]!;
            const v = Number.parseInt(h, 16);
            if (!/[0-9a-fA-F]/.test(h)) throw invalid('in \\u hexadecimal character escape');
            code = code * 16 + v;
            i++;
          }
          out += String.fromCharCode(code);
        } else {
          throw invalid('in string escape code');
        }
        start = i;
        continue;
      }
      i++;
    }
  };
  const num = (): Value => {
    const start = i;
    if (text[i] === '-') i++;
    if (i >= n) throw unexpectedEnd();
    if (text[i] === '0') i++;
    else if (text[i]! >= '1' && text[i]! <= '9') while (i < n && text[i]! >= '0' && text[i]! <= '9') i++;
    else throw invalid('in numeric literal');
    if (text[i] === '.') {
      i++;
      if (i >= n) throw unexpectedEnd();
      if (!(text[i]! >= '0' && text[i]! <= '9')) throw invalid('after decimal point in numeric literal');
      while (i < n && text[i]! >= '0' && text[i]! <= '9') i++;
    }
    if (text[i] === 'e' || text[i] === 'E') {
      i++;
      if (text[i] === '+' || text[i] === '-') i++;
      if (i >= n) throw unexpectedEnd();
      if (!(text[i]! >= '0' && text[i]! <= '9')) throw invalid('in exponent of numeric literal');
      while (i < n && text[i]! >= '0' && text[i]! <= '9') i++;
    }
    return fromDecimalText(text.slice(start, i));
  };
  const lit = (word: string, v: Value): Value => {
    for (let k = 0; k < word.length; k++) {
      if (i >= n) throw unexpectedEnd();
      if (text[i] !== word[k]) throw invalid(`in literal ${word} (expecting ${quoteChar(word[k]!)})`);
      i++;
    }
    return v;
  };
  const value = (depth: number): Value => {
    if (depth > MAX_JSON_DEPTH) throw new JSONSyntaxError('exceeded max depth');
    ws();
    if (i >= n) throw unexpectedEnd();
    const c = text[i]!;
    switch (c) {
      case '{': {
        i++;
        const o = new ObjectValue();
        ws();
        if (text[i] === '}') {
          i++;
          return o;
        }
        for (;;) {
          ws();
          if (i >= n) throw unexpectedEnd();
          if (text[i] !== '"') throw invalid('looking for beginning of object key string');
          const k = str();
          ws();
          if (i >= n) throw unexpectedEnd();
          if (text[i] !== ':') throw invalid('after object key');
          i++;
          o.set(k, value(depth + 1));
          ws();
          if (i >= n) throw unexpectedEnd();
          if (text[i] === ',') {
            i++;
            continue;
          }
          if (text[i] === '}') {
            i++;
            return o;
          }
          throw invalid('after object key:value pair');
        }
      }
      case '[': {
        i++;
        const a: Value[] = [];
        ws();
        if (text[i] === ']') {
          i++;
          return a;
        }
        for (;;) {
          a.push(value(depth + 1));
          ws();
          if (i >= n) throw unexpectedEnd();
          if (text[i] === ',') {
            i++;
            continue;
          }
          if (text[i] === ']') {
            i++;
            return a;
          }
          throw invalid('after array element');
        }
      }
      case '"':
        return str();
      case 't':
        return lit('true', true);
      case 'f':
        return lit('false', false);
      case 'n':
        return lit('null', null);
      default:
        if (c === '-' || (c >= '0' && c <= '9')) return num();
        throw invalid('looking for beginning of value');
    }
  };
  const v = value(0);
  ws();
  if (i < n) throw invalid('after top-level value');
  return v;
}

/** json.Valid. */
export function goJSONValid(text: string): boolean {
  try {
    goUnmarshal(text);
    return true;
  } catch (e) {
    if (e instanceof JSONSyntaxError) return false;
    throw e;
  }
}
