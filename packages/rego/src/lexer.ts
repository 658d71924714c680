// Rego tokenizer. Produces identifiers, numbers, strings, raw strings and symbols with 1-based line/column.
import { RegoParseError } from './errors.js';

export type TokenKind = 'ident' | 'number' | 'string' | 'rawstring' | 'symbol' | 'eof';

export interface Token {
  readonly kind: TokenKind;
  /** Source text: the identifier, number or symbol; the raw inner text for strings. */
  readonly text: string;
  /** Decoded value of a string or raw string. */
  readonly value?: string;
  /** Offsets into the source (UTF-16 units); for strings, of the inner text. */
  readonly start: number;
  readonly end: number;
  readonly line: number;
  readonly col: number;
}

enum C {
  Tab = 9,
  LF = 10,
  CR = 13,
  Space = 32,
  Bang = 33,
  Quote = 34,
  Hash = 35,
  Percent = 37,
  Amp = 38,
  LParen = 40,
  RParen = 41,
  Star = 42,
  Plus = 43,
  Comma = 44,
  Minus = 45,
  Dot = 46,
  Slash = 47,
  D0 = 48,
  D9 = 57,
  Colon = 58,
  Semi = 59,
  Lt = 60,
  Eq = 61,
  Gt = 62,
  A = 65,
  Z = 90,
  LBrack = 91,
  Backslash = 92,
  RBrack = 93,
  Underscore = 95,
  Backtick = 96,
  a = 97,
  e = 101,
  E = 69,
  z = 122,
  LBrace = 123,
  Pipe = 124,
  RBrace = 125,
}

function isDigit(c: number): boolean {
  return c >= C.D0 && c <= C.D9;
}
function isIdentStart(c: number): boolean {
  return (c >= C.a && c <= C.z) || (c >= C.A && c <= C.Z) || c === C.Underscore;
}
function isIdentPart(c: number): boolean {
  return isIdentStart(c) || isDigit(c);
}
function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}
function isHex(c: number): boolean {
  return isDigit(c) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70);
}

export class Lexer {
  private pos = 0;
  private line = 1;
  private lineStart = 0;

  constructor(
    private readonly src: string,
    private readonly file: string,
  ) {}

  error(line: number, col: number, msg: string): RegoParseError {
    return new RegoParseError(this.file, line, col, msg);
  }

  private col(pos: number): number {
    return pos - this.lineStart + 1;
  }

  private skipWs(): void {
    const s = this.src;
    for (;;) {
      const c = s.charCodeAt(this.pos);
      if (c === C.Space || c === C.Tab) {
        this.pos++;
      } else if (c === C.LF) {
        this.pos++;
        this.line++;
        this.lineStart = this.pos;
      } else if (c === C.CR) {
        if (s.charCodeAt(this.pos + 1) !== C.LF) {
          throw this.error(this.line, this.col(this.pos), '\\r must be followed by \\n');
        }
        this.pos++;
      } else if (c === C.Hash) {
        while (this.pos < s.length && s.charCodeAt(this.pos) !== C.LF) this.pos++;
      } else {
        return;
      }
    }
  }

  next(): Token {
    this.skipWs();
    const s = this.src;
    const start = this.pos;
    const line = this.line;
    const col = this.col(start);
    const c = s.charCodeAt(start);
    // A NUL character ends the source, as in regorus.
    if (start >= s.length || c === 0) return { kind: 'eof', text: '', start, end: start, line, col };
    const n1 = s.charCodeAt(start + 1);
    if ((c === C.Minus || c === C.Dot) && isDigit(n1)) return this.number();
    if (isDigit(c)) return this.number();
    if (isIdentStart(c)) {
      let p = start + 1;
      while (p < s.length && isIdentPart(s.charCodeAt(p))) p++;
      this.pos = p;
      const text = s.slice(start, p);
      // `set(` followed by `)` is the empty-set token.
      if (text === 'set' && s.charCodeAt(p) === C.LParen) {
        const save = { pos: this.pos, line: this.line, lineStart: this.lineStart };
        this.pos++;
        const t = this.next();
        if (t.kind === 'symbol' && t.text === ')') {
          // The `)` stays the next token, as in regorus.
          this.pos = save.pos + 1;
          this.line = save.line;
          this.lineStart = save.lineStart;
          return { kind: 'symbol', text: 'set(', start, end: this.pos, line, col };
        }
        this.pos = save.pos;
        this.line = save.line;
        this.lineStart = save.lineStart;
      }
      return { kind: 'ident', text, start, end: p, line, col };
    }
    switch (c) {
      case C.Quote:
        return this.string();
      case C.Backtick:
        return this.rawString();
      case C.LBrace:
      case C.RBrace:
      case C.LBrack:
      case C.RBrack:
      case C.LParen:
      case C.RParen:
      case C.Plus:
      case C.Minus:
      case C.Star:
      case C.Slash:
      case C.Percent:
      case C.Comma:
      case C.Semi:
      case C.Dot:
      case C.Amp:
      case C.Pipe:
        this.pos++;
        return { kind: 'symbol', text: s[start]!, start, end: this.pos, line, col };
      case C.Colon:
      case C.Lt:
      case C.Gt:
      case C.Eq: {
        this.pos++;
        if (s.charCodeAt(this.pos) === C.Eq) this.pos++;
        return { kind: 'symbol', text: s.slice(start, this.pos), start, end: this.pos, line, col };
      }
      case C.Bang:
        if (n1 === C.Eq) {
          this.pos += 2;
          return { kind: 'symbol', text: '!=', start, end: this.pos, line, col };
        }
        break;
    }
    throw this.error(line, col, 'invalid character');
  }

  private number(): Token {
    const s = this.src;
    const start = this.pos;
    const line = this.line;
    const col = this.col(start);
    let p = start;
    if (s.charCodeAt(p) === C.Minus) p++;
    const first = s.charCodeAt(p);
    p++;
    if (first !== C.D0) while (isDigit(s.charCodeAt(p))) p++;
    if (s.charCodeAt(p) === C.Dot && isDigit(s.charCodeAt(p + 1))) {
      p++;
      while (isDigit(s.charCodeAt(p))) p++;
    }
    const ec = s.charCodeAt(p);
    if (ec === C.e || ec === C.E) {
      p++;
      const sign = s.charCodeAt(p);
      if (sign === C.Plus || sign === C.Minus) p++;
      while (isDigit(s.charCodeAt(p))) p++;
    }
    const t = s.charCodeAt(p);
    if (t === C.Underscore || t === C.Dot || isIdentPart(t)) {
      throw this.error(line, this.col(p), 'invalid number');
    }
    const text = s.slice(start, p);
    // JSON number grammar: no leading '.', a digit after 'e', no leading zeros.
    if (!/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(text)) {
      throw this.error(line, col, 'invalid number');
    }
    this.pos = p;
    return { kind: 'number', text, start, end: p, line, col };
  }

  private string(): Token {
    const s = this.src;
    const line = this.line;
    const col = this.col(this.pos);
    const start = this.pos + 1;
    let p = start;
    let out = '';
    let seg = p;
    for (;;) {
      if (p >= s.length) throw this.error(line, col, 'unmatched "');
      const c = s.charCodeAt(p);
      if (c === C.Quote) break;
      if (c === C.Backslash) {
        out += s.slice(seg, p);
        const e = s.charCodeAt(p + 1);
        switch (e) {
          case C.Quote:
            out += '"';
            break;
          case C.Backslash:
            out += '\\';
            break;
          case C.Slash:
            out += '/';
            break;
          case 98:
            out += '\b';
            break;
          case 102:
            out += '\f';
            break;
          case 110:
            out += '\n';
            break;
          case 114:
            out += '\r';
            break;
          case 116:
            out += '\t';
            break;
          case 117: {
            for (let i = 2; i < 6; i++) {
              if (!isHex(s.charCodeAt(p + i))) {
                throw this.error(line, this.col(p + i), 'invalid hex escape sequence');
              }
            }
            const code = Number.parseInt(s.slice(p + 2, p + 6), 16);
            if (code >= 0xd800 && code <= 0xdbff) {
              // A high surrogate must be followed by an escaped low surrogate.
              const lowText = s.slice(p + 6, p + 12);
              const low = /^\\u[0-9a-fA-F]{4}$/.test(lowText) ? Number.parseInt(lowText.slice(2), 16) : -1;
              if (low < 0xdc00 || low > 0xdfff)
                throw this.error(line, this.col(p), 'invalid unicode escape: lone surrogate');
            } else if (
              code >= 0xdc00 &&
              code <= 0xdfff &&
              !(out.length > 0 && isHighSurrogate(out.charCodeAt(out.length - 1)))
            ) {
              throw this.error(line, this.col(p), 'invalid unicode escape: lone surrogate');
            }
            out += String.fromCharCode(code);
            p += 4;
            break;
          }
          default:
            throw this.error(line, this.col(p), 'invalid escape sequence');
        }
        p += 2;
        seg = p;
        continue;
      }
      if (c < C.Space) throw this.error(line, this.col(p), 'invalid character in string');
      p++;
    }
    out += s.slice(seg, p);
    this.pos = p + 1;
    return { kind: 'string', text: s.slice(start, p), value: out, start, end: p, line, col: col + 1 };
  }

  private rawString(): Token {
    const s = this.src;
    const line = this.line;
    const col = this.col(this.pos);
    const start = this.pos + 1;
    const end = s.indexOf('`', start);
    if (end < 0) throw this.error(line, col + 1, 'unmatched `');
    for (let p = start; p < end; p++) {
      if (s.charCodeAt(p) === C.LF) {
        this.line++;
        this.lineStart = p + 1;
      }
    }
    this.pos = end + 1;
    const text = s.slice(start, end);
    return { kind: 'rawstring', text, value: text, start, end, line, col: col + 1 };
  }
}

/** Tokenizes a whole source (used by tests and tools). */
export function tokenize(src: string, file = '<input>'): Token[] {
  const lx = new Lexer(src, file);
  const out: Token[] = [];
  for (;;) {
    const t = lx.next();
    out.push(t);
    if (t.kind === 'eof') return out;
  }
}
