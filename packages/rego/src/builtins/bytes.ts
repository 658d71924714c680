// Go strings are byte strings; Rego values here are JS strings. These helpers convert at the boundary:
// text is encoded as UTF-8, and decoded bytes become a string with invalid sequences replaced by U+FFFD
// (which is how OPA's JSON output would show them).

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: false });

export function toBytes(s: string): Uint8Array {
  return encoder.encode(s);
}

export function fromBytes(b: Uint8Array): string {
  return decoder.decode(b);
}

const STD = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

export type Base64Alphabet = 'std' | 'url';

export function base64Encode(data: Uint8Array, alphabet: Base64Alphabet, pad: boolean): string {
  const s = Buffer.from(data).toString(alphabet === 'std' ? 'base64' : 'base64url');
  if (alphabet === 'url' && pad) return s + '='.repeat((4 - (s.length % 4)) % 4);
  return s;
}

/** A decoding failure at a byte offset, with Go's message. */
export class Base64Error extends Error {
  constructor(readonly offset: number) {
    super(`illegal base64 data at input byte ${offset}`);
    this.name = 'Base64Error';
  }
}

const DECODE_MAPS: Record<Base64Alphabet, Int16Array> = { std: decodeMap(STD), url: decodeMap(URL) };

function decodeMap(alphabet: string): Int16Array {
  const m = new Int16Array(256).fill(-1);
  for (let i = 0; i < alphabet.length; i++) m[alphabet.charCodeAt(i)] = i;
  return m;
}

/** Go's base64 (padded) decoding: CR and LF are skipped; padding and trailing data are checked. */
export function base64Decode(input: string, alphabet: Base64Alphabet): Uint8Array {
  const r = base64DecodeOrOffset(input, alphabet);
  if (typeof r === 'number') throw new Base64Error(r);
  return r;
}

/** The decoded bytes, or the input byte offset where decoding failed (no exception: is_valid is hot). */
export function base64DecodeOrOffset(input: string, alphabet: Base64Alphabet): Uint8Array | number {
  const src = toBytes(input);
  const map = DECODE_MAPS[alphabet];
  const out: number[] = [];
  let si = 0;
  const isNL = (b: number | undefined) => b === 10 || b === 13;
  for (;;) {
    const buf = [0, 0, 0, 0];
    let dlen = 4;
    let j = 0;
    let done = false;
    for (; j < 4; j++) {
      if (si === src.length) {
        if (j === 0) return Uint8Array.from(out);
        return si - j;
      }
      const c = src[si]!;
      si++;
      const v = map[c]!;
      if (v >= 0) {
        buf[j] = v;
        continue;
      }
      if (isNL(c)) {
        j--;
        continue;
      }
      if (c !== 0x3d) return si - 1;
      // Padding: only after two or three symbols.
      if (j === 0 || j === 1) return si - 1;
      if (j === 2) {
        while (si < src.length && isNL(src[si])) si++;
        if (si === src.length) return src.length;
        if (src[si] !== 0x3d) return si - 1;
        si++;
      }
      while (si < src.length && isNL(src[si])) si++;
      if (si < src.length) return si;
      dlen = j;
      done = true;
      break;
    }
    const n = (buf[0]! << 18) | (buf[1]! << 12) | (buf[2]! << 6) | buf[3]!;
    if (dlen >= 2) out.push((n >> 16) & 0xff);
    if (dlen >= 3) out.push((n >> 8) & 0xff);
    if (dlen >= 4) out.push(n & 0xff);
    if (done) return Uint8Array.from(out);
  }
}

export class HexError extends Error {}

/** Go's hex.DecodeString, with its messages. */
export function hexDecode(input: string): Uint8Array {
  const src = toBytes(input);
  const val = (b: number) => {
    if (b >= 48 && b <= 57) return b - 48;
    if (b >= 97 && b <= 102) return b - 87;
    if (b >= 65 && b <= 70) return b - 55;
    return -1;
  };
  const bad = (b: number) => {
    const ch = String.fromCodePoint(b);
    const printable = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u.test(ch);
    return new HexError(
      `encoding/hex: invalid byte: U+${b.toString(16).toUpperCase().padStart(4, '0')}${printable ? ` '${ch}'` : ''}`,
    );
  };
  const out = new Uint8Array(src.length >> 1);
  let j = 1;
  for (; j < src.length; j += 2) {
    const a = val(src[j - 1]!);
    const b = val(src[j]!);
    if (a < 0) throw bad(src[j - 1]!);
    if (b < 0) throw bad(src[j]!);
    out[(j - 1) >> 1] = (a << 4) | b;
  }
  if (src.length % 2 === 1) {
    if (val(src[j - 1]!) < 0) throw bad(src[j - 1]!);
    throw new HexError('encoding/hex: odd length hex string');
  }
  return out;
}

const QUERY_SAFE = /[A-Za-z0-9\-_.~]/;

/** Go's url.QueryEscape. */
export function queryEscape(s: string): string {
  let out = '';
  for (const b of toBytes(s)) {
    const ch = String.fromCharCode(b);
    if (b < 0x80 && QUERY_SAFE.test(ch)) out += ch;
    else if (b === 0x20) out += '+';
    else out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

export class QueryError extends Error {}

/** Go's url.QueryUnescape. */
export function queryUnescape(s: string): string {
  const src = toBytes(s);
  const out: number[] = [];
  for (let i = 0; i < src.length; i++) {
    const b = src[i]!;
    if (b === 0x25) {
      const h = (x: number | undefined) =>
        x === undefined
          ? -1
          : x >= 48 && x <= 57
            ? x - 48
            : x >= 97 && x <= 102
              ? x - 87
              : x >= 65 && x <= 70
                ? x - 55
                : -1;
      const a = h(src[i + 1]);
      const c = h(src[i + 2]);
      if (a < 0 || c < 0) {
        const bad = fromBytes(src.slice(i, Math.min(i + 3, src.length)));
        throw new QueryError(`invalid URL escape ${JSON.stringify(bad)}`);
      }
      out.push((a << 4) | c);
      i += 2;
    } else if (b === 0x2b) {
      out.push(0x20);
    } else {
      out.push(b);
    }
  }
  return fromBytes(Uint8Array.from(out));
}
