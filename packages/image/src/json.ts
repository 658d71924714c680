/**
 * A JSON reader that keeps what `JSON.parse` throws away: duplicate keys,
 * key order and the textual kind of each value. Policy files, simple-signing
 * payloads and identities are security decisions; containers/image reads them
 * with a "paranoid" decoder that refuses duplicate and unknown keys, and we
 * need the same information to do so.
 *
 * The helpers below decode leaves the way Go's `encoding/json` does (a JSON
 * `null` leaves a string empty, `[]byte` is standard base64) so that policies
 * accepted or refused by containers/image are accepted or refused here too.
 */

import { ImageError, type ImageErrorCode } from './errors.js';

export type JsonValue =
  | { readonly kind: 'null' }
  | { readonly kind: 'bool'; readonly value: boolean }
  | { readonly kind: 'number'; readonly value: number; readonly text: string }
  | { readonly kind: 'string'; readonly value: string }
  | { readonly kind: 'array'; readonly items: readonly JsonValue[] }
  | { readonly kind: 'object'; readonly entries: readonly (readonly [string, JsonValue])[] };

/** A malformed or unexpected JSON document; the message follows containers/image where it has one. */
export class JsonFormatError extends ImageError {
  override readonly code: ImageErrorCode = 'JSON_INVALID';
  override readonly name: string = 'JsonFormatError';
}

/** Deepest nesting accepted; real policies and payloads use fewer than 8 levels. */
export const MAX_JSON_DEPTH = 64;

const decoder = new TextDecoder('utf-8', { fatal: false });

/** Parses one JSON document; anything after it but whitespace is an error. */
export function parseJson(input: string | Uint8Array): JsonValue {
  const text = typeof input === 'string' ? input : decoder.decode(input);
  const p = new Parser(text);
  p.ws();
  if (p.pos >= text.length) throw new JsonFormatError('unexpected end of JSON input');
  const v = p.value(0);
  p.ws();
  // Go's json.Unmarshal checks the whole text first; this is its wording.
  if (p.pos < text.length) p.fail('after top-level value');
  return v;
}

class Parser {
  pos = 0;
  constructor(readonly s: string) {}

  ws(): void {
    const s = this.s;
    while (this.pos < s.length) {
      const c = s.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.pos++;
      else break;
    }
  }

  fail(context: string): never {
    if (this.pos >= this.s.length) throw new JsonFormatError('unexpected end of JSON input');
    const ch = this.s[this.pos] ?? '';
    throw new JsonFormatError(`invalid character ${quoteChar(ch)} ${context}`);
  }

  value(depth: number): JsonValue {
    if (depth > MAX_JSON_DEPTH) throw new JsonFormatError(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
    const s = this.s;
    const c = s[this.pos];
    switch (c) {
      case '{':
        return this.object(depth);
      case '[':
        return this.array(depth);
      case '"':
        return { kind: 'string', value: this.string() };
      case 't':
        return this.literal('true', { kind: 'bool', value: true });
      case 'f':
        return this.literal('false', { kind: 'bool', value: false });
      case 'n':
        return this.literal('null', { kind: 'null' });
      default:
        if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number();
        return this.fail('looking for beginning of value');
    }
  }

  literal(word: string, v: JsonValue): JsonValue {
    for (let i = 0; i < word.length; i++) {
      if (this.s[this.pos] !== word[i])
        this.fail(`in literal ${word} (expecting ${quoteChar(word[i] ?? '')})`);
      this.pos++;
    }
    return v;
  }

  number(): JsonValue {
    const s = this.s;
    const start = this.pos;
    if (s[this.pos] === '-') this.pos++;
    if (s[this.pos] === '0') this.pos++;
    else if (isDigit(s[this.pos])) while (isDigit(s[this.pos])) this.pos++;
    else this.fail('in numeric literal');
    if (s[this.pos] === '.') {
      this.pos++;
      if (!isDigit(s[this.pos])) this.fail('after decimal point in numeric literal');
      while (isDigit(s[this.pos])) this.pos++;
    }
    if (s[this.pos] === 'e' || s[this.pos] === 'E') {
      this.pos++;
      if (s[this.pos] === '+' || s[this.pos] === '-') this.pos++;
      if (!isDigit(s[this.pos])) this.fail('in exponent of numeric literal');
      while (isDigit(s[this.pos])) this.pos++;
    }
    const text = s.slice(start, this.pos);
    return { kind: 'number', value: Number(text), text };
  }

  string(): string {
    const s = this.s;
    this.pos++; // opening quote
    let out = '';
    let runStart = this.pos;
    for (;;) {
      if (this.pos >= s.length) throw new JsonFormatError('unexpected end of JSON input');
      const c = s.charCodeAt(this.pos);
      if (c === 0x22) {
        out += s.slice(runStart, this.pos);
        this.pos++;
        return out;
      }
      if (c < 0x20) this.fail('in string literal');
      if (c !== 0x5c) {
        this.pos++;
        continue;
      }
      out += s.slice(runStart, this.pos);
      this.pos++;
      const e = s[this.pos];
      this.pos++;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          const hex = s.slice(this.pos, this.pos + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) {
            this.pos--;
            this.fail('in \\u hexadecimal character escape');
          }
          out += String.fromCharCode(Number.parseInt(hex, 16));
          this.pos += 4;
          break;
        }
        default:
          this.pos--;
          this.fail('in string escape code');
      }
      runStart = this.pos;
    }
  }

  array(depth: number): JsonValue {
    this.pos++;
    const items: JsonValue[] = [];
    this.ws();
    if (this.s[this.pos] === ']') {
      this.pos++;
      return { kind: 'array', items };
    }
    for (;;) {
      this.ws();
      items.push(this.value(depth + 1));
      this.ws();
      const c = this.s[this.pos];
      if (c === ',') {
        this.pos++;
        continue;
      }
      if (c === ']') {
        this.pos++;
        return { kind: 'array', items };
      }
      this.fail('after array element');
    }
  }

  object(depth: number): JsonValue {
    this.pos++;
    const entries: [string, JsonValue][] = [];
    this.ws();
    if (this.s[this.pos] === '}') {
      this.pos++;
      return { kind: 'object', entries };
    }
    for (;;) {
      this.ws();
      if (this.s[this.pos] !== '"') this.fail('looking for beginning of object key string');
      const key = this.string();
      this.ws();
      if (this.s[this.pos] !== ':') this.fail('after object key');
      this.pos++;
      this.ws();
      entries.push([key, this.value(depth + 1)]);
      this.ws();
      const c = this.s[this.pos];
      if (c === ',') {
        this.pos++;
        continue;
      }
      if (c === '}') {
        this.pos++;
        return { kind: 'object', entries };
      }
      this.fail('after object key:value pair');
    }
  }
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

function quoteChar(c: string): string {
  return c === "'" ? `'\\''` : `'${c}'`;
}

/** Go's `%q` for the strings that appear in messages (JSON quoting is the same for printable text). */
export function goQuote(s: string): string {
  return JSON.stringify(s);
}

/** How Go's decoder names a JSON value's kind in "cannot unmarshal X into ..." errors. */
export function goKind(v: JsonValue): string {
  switch (v.kind) {
    case 'object':
      return 'object';
    case 'array':
      return 'array';
    case 'string':
      return 'string';
    case 'number':
      return 'number';
    case 'bool':
      return 'bool';
    case 'null':
      return 'null';
  }
}

/** Go's `%#v` of the first token of a value, as in "JSON object expected, got …". */
function goToken(v: JsonValue): string {
  switch (v.kind) {
    case 'object':
      return "json.Delim('{')";
    case 'array':
      return "json.Delim('[')";
    case 'string':
      return goQuote(v.value);
    case 'number':
      return v.text;
    case 'bool':
      return String(v.value);
    case 'null':
      return '<nil>';
  }
}

function cannotUnmarshal(v: JsonValue, goType: string): JsonFormatError {
  return new JsonFormatError(`json: cannot unmarshal ${goKind(v)} into Go value of type ${goType}`);
}

/**
 * containers/image's `ParanoidUnmarshalJSONObject`: the value must be an
 * object; each key may appear once; `field(key)` returns the handler of a
 * known key or undefined for an unknown one (an error). Handlers run in
 * document order, so the first problem in the text is the one reported.
 */
export function paranoidObject(
  v: JsonValue,
  field: (key: string) => ((value: JsonValue) => void) | undefined,
): void {
  if (v.kind !== 'object') throw new JsonFormatError(`JSON object expected, got ${goToken(v)}`);
  const seen = new Set<string>();
  for (const [key, value] of v.entries) {
    if (seen.has(key)) throw new JsonFormatError(`Duplicate key ${goQuote(key)}`);
    seen.add(key);
    const handler = field(key);
    if (handler === undefined) throw new JsonFormatError(`Unknown key ${goQuote(key)}`);
    handler(value);
  }
}

/** `ParanoidUnmarshalJSONObjectExactFields`: exactly these keys, each once. */
export function paranoidExactFields(
  v: JsonValue,
  fields: Readonly<Record<string, (value: JsonValue) => void>>,
): void {
  const seen = new Set<string>();
  paranoidObject(v, (key) => {
    if (!Object.hasOwn(fields, key)) return undefined;
    seen.add(key);
    return fields[key];
  });
  for (const key of Object.keys(fields)) {
    if (!seen.has(key)) throw new JsonFormatError(`Key ${goQuote(key)} missing in a JSON object`);
  }
}

/** A Go `string` field: a JSON string, or null (left empty). */
export function goString(v: JsonValue, goType = 'string'): string {
  if (v.kind === 'null') return '';
  if (v.kind !== 'string') throw cannotUnmarshal(v, goType);
  return v.value;
}

/** A Go `[]string` field: null gives nil (undefined here). */
export function goStringArray(v: JsonValue): string[] | undefined {
  if (v.kind === 'null') return undefined;
  if (v.kind !== 'array') throw cannotUnmarshal(v, '[]string');
  return v.items.map((item) => goString(item));
}

/** A Go `[]byte` field: standard base64 text, or null (nil, undefined here). */
export function goBytes(v: JsonValue): Uint8Array | undefined {
  if (v.kind === 'null') return undefined;
  if (v.kind !== 'string') throw cannotUnmarshal(v, '[]uint8');
  return decodeStdBase64(v.value);
}

/** A Go `[][]byte` field. */
export function goBytesArray(v: JsonValue): Uint8Array[] | undefined {
  if (v.kind === 'null') return undefined;
  if (v.kind !== 'array') throw cannotUnmarshal(v, '[][]uint8');
  return v.items.map((item) => goBytes(item) ?? new Uint8Array(0));
}

/** A Go `float64` field. */
export function goNumber(v: JsonValue): number {
  if (v.kind === 'null') return 0;
  if (v.kind !== 'number') throw cannotUnmarshal(v, 'float64');
  return v.value;
}

/** A Go `[]json.RawMessage` field. */
export function goArray(v: JsonValue): readonly JsonValue[] {
  if (v.kind === 'null') return [];
  if (v.kind !== 'array') throw cannotUnmarshal(v, '[]json.RawMessage');
  return v.items;
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64_INDEX = new Int16Array(128).fill(-1);
for (let i = 0; i < B64.length; i++) B64_INDEX[B64.charCodeAt(i)] = i;

/**
 * Go's `base64.StdEncoding.DecodeString`: padding required, no other
 * characters; CR and LF are skipped (Go's decoder ignores them).
 */
export function decodeStdBase64(text: string): Uint8Array {
  const chars: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x0a || c === 0x0d) continue;
    chars.push(c);
  }
  if (chars.length % 4 !== 0) {
    // Go reports the offset of the first incomplete quantum.
    throw new JsonFormatError(`illegal base64 data at input byte ${chars.length - (chars.length % 4)}`);
  }
  const out = new Uint8Array((chars.length / 4) * 3);
  let o = 0;
  for (let i = 0; i < chars.length; i += 4) {
    const q = [0, 0, 0, 0];
    let pad = 0;
    for (let j = 0; j < 4; j++) {
      const c = chars[i + j] ?? 0;
      if (c === 0x3d && j >= 2 && i + 4 === chars.length) {
        // '=' only in the last quantum, only in its last two places, and only at the end.
        if (j === 2 && chars[i + 3] !== 0x3d)
          throw new JsonFormatError(`illegal base64 data at input byte ${i + j}`);
        pad++;
        continue;
      }
      const d = c < 128 ? (B64_INDEX[c] ?? -1) : -1;
      if (d < 0 || pad > 0) throw new JsonFormatError(`illegal base64 data at input byte ${i + j}`);
      q[j] = d;
    }
    const n = ((q[0] ?? 0) << 18) | ((q[1] ?? 0) << 12) | ((q[2] ?? 0) << 6) | (q[3] ?? 0);
    out[o++] = (n >> 16) & 0xff;
    if (pad < 2) out[o++] = (n >> 8) & 0xff;
    if (pad < 1) out[o++] = n & 0xff;
  }
  return out.subarray(0, o);
}
