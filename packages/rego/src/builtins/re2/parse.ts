// A parser for RE2 syntax with Go's Perl flags (what regexp.Compile accepts), producing the AST in ast.ts.
// It rejects exactly what Go rejects (backreferences, lookaround, possessive and stacked repetition, ...)
// with Go's error messages.
import { type AssertKind, type CharClass, ERR, type Node, type Parsed, RegexSyntaxError } from './ast.js';
import { addFoldedRange, foldOrbit } from './fold.js';

interface Flags {
  readonly i: boolean;
  /** Multi-line: ^ and $ match at line boundaries. */
  readonly m: boolean;
  /** . matches \n. */
  readonly s: boolean;
  /** Ungreedy: swaps the meaning of x* and x*?. */
  readonly U: boolean;
}

const MAX_DEPTH = 1000;
const MAX_REPEAT = 1000;

const PERL_CLASSES: Record<string, readonly number[]> = {
  d: [0x30, 0x39],
  s: [0x09, 0x0a, 0x0c, 0x0d, 0x20, 0x20],
  w: [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a],
};

const POSIX_CLASSES = new Map<string, readonly number[]>(
  Object.entries({
    alnum: [0x30, 0x39, 0x41, 0x5a, 0x61, 0x7a],
    alpha: [0x41, 0x5a, 0x61, 0x7a],
    ascii: [0x00, 0x7f],
    blank: [0x09, 0x09, 0x20, 0x20],
    cntrl: [0x00, 0x1f, 0x7f, 0x7f],
    digit: [0x30, 0x39],
    graph: [0x21, 0x7e],
    lower: [0x61, 0x7a],
    print: [0x20, 0x7e],
    punct: [0x21, 0x2f, 0x3a, 0x40, 0x5b, 0x60, 0x7b, 0x7e],
    space: [0x09, 0x0d, 0x20, 0x20],
    upper: [0x41, 0x5a],
    word: [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a],
    xdigit: [0x30, 0x39, 0x41, 0x46, 0x61, 0x66],
  }),
);

// Go's unicode.Categories; any other name must be a script (unicode.Scripts).
const CATEGORIES = new Set([
  'C',
  'Cc',
  'Cf',
  'Co',
  'Cs',
  'L',
  'Ll',
  'Lm',
  'Lo',
  'Lt',
  'Lu',
  'M',
  'Mc',
  'Me',
  'Mn',
  'N',
  'Nd',
  'Nl',
  'No',
  'P',
  'Pc',
  'Pd',
  'Pe',
  'Pf',
  'Pi',
  'Po',
  'Ps',
  'S',
  'Sc',
  'Sk',
  'Sm',
  'So',
  'Z',
  'Zl',
  'Zp',
  'Zs',
]);

const MAX_RUNE = 0x10ffff;

function normalize(ranges: number[]): number[] {
  const pairs: [number, number][] = [];
  for (let i = 0; i < ranges.length; i += 2) pairs.push([ranges[i]!, ranges[i + 1]!]);
  pairs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const out: number[] = [];
  for (const [lo, hi] of pairs) {
    const n = out.length;
    if (n > 0 && lo <= out[n - 1]! + 1) {
      if (hi > out[n - 1]!) out[n - 1] = hi;
    } else {
      out.push(lo, hi);
    }
  }
  return out;
}

export function negateRanges(ranges: readonly number[]): number[] {
  const norm = normalize([...ranges]);
  const out: number[] = [];
  let next = 0;
  for (let i = 0; i < norm.length; i += 2) {
    if (norm[i]! > next) out.push(next, norm[i]! - 1);
    next = norm[i + 1]! + 1;
  }
  if (next <= MAX_RUNE) out.push(next, MAX_RUNE);
  return out;
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

function unhex(c: string | undefined): number {
  if (c === undefined) return -1;
  if (c >= '0' && c <= '9') return c.charCodeAt(0) - 48;
  if (c >= 'a' && c <= 'f') return c.charCodeAt(0) - 87;
  if (c >= 'A' && c <= 'F') return c.charCodeAt(0) - 55;
  return -1;
}

const CAPTURE_NAME = /^[\p{L}\p{N}_]+$/u;

function repeatIsValid(n: Node, limit: number): boolean {
  let lim = limit;
  if (n.t === 'rep') {
    let m = n.max;
    if (m === 0) return true;
    if (m < 0) m = n.min;
    if (m > lim) return false;
    if (m > 0) lim = Math.floor(lim / m);
  }
  switch (n.t) {
    case 'rep':
    case 'cap':
      return repeatIsValid(n.sub, lim);
    case 'concat':
    case 'alt':
      return n.subs.every((s) => repeatIsValid(s, lim));
    default:
      return true;
  }
}

class Parser {
  private pos = 0;
  private numCap = 0;
  private readonly names: (string | undefined)[] = [undefined];
  private readonly src: readonly string[];

  constructor(private readonly whole: string) {
    this.src = Array.from(whole);
  }

  private text(from: number, to = this.src.length): string {
    return this.src.slice(from, to).join('');
  }

  private fail(code: string, expr: string): never {
    throw new RegexSyntaxError(code, expr);
  }

  parse(): Parsed {
    const root = this.group({ i: false, m: false, s: false, U: false }, 0);
    if (this.pos < this.src.length) this.fail(ERR.unexpectedParen, this.whole);
    return { root, numCap: this.numCap, names: this.names };
  }

  /** Parses alternatives up to an unmatched `)` or the end; flag changes last until then. */
  private group(initial: Flags, depth: number): Node {
    if (depth > MAX_DEPTH) this.fail(ERR.nestingDepth, this.whole);
    let flags = initial;
    const alts: Node[] = [];
    let items: Node[] = [];
    // Start of the previous token when it was a repetition operator (Go rejects stacked repetition).
    let lastRepeat = -1;
    const src = this.src;
    while (this.pos < src.length) {
      const c = src[this.pos]!;
      if (c === ')') break;
      const repeatStart = lastRepeat;
      lastRepeat = -1;
      switch (c) {
        case '|':
          alts.push(concat(items));
          items = [];
          this.pos++;
          continue;
        case '*':
        case '+':
        case '?': {
          const before = this.pos;
          this.pos++;
          const [min, max] = c === '*' ? [0, -1] : c === '+' ? [1, -1] : [0, 1];
          this.repeat(items, flags, min, max, before, repeatStart, false);
          lastRepeat = before;
          continue;
        }
        case '{': {
          const before = this.pos;
          const r = this.braces();
          if (r === undefined) {
            items.push(this.literal('{'.codePointAt(0)!, flags));
            this.pos++;
            continue;
          }
          const [min, max, after] = r;
          if (min < 0 || min > MAX_REPEAT || max > MAX_REPEAT || (max >= 0 && min > max)) {
            this.fail(ERR.invalidRepeatSize, this.text(before, after));
          }
          this.pos = after;
          this.repeat(items, flags, min, max, before, repeatStart, true);
          lastRepeat = before;
          continue;
        }
        case '(': {
          if (src[this.pos + 1] === '?') {
            const r = this.perlGroup(flags, depth);
            if (r.node !== undefined) items.push(r.node);
            else flags = r.flags;
            continue;
          }
          const open = this.pos;
          this.pos++;
          const index = ++this.numCap;
          this.names.push(undefined);
          const sub = this.group(flags, depth + 1);
          if (src[this.pos] !== ')') this.fail(ERR.missingParen, this.whole);
          void open;
          this.pos++;
          items.push({ t: 'cap', index, name: undefined, sub });
          continue;
        }
        case '[':
          items.push(this.charClass(flags));
          continue;
        case '.':
          this.pos++;
          items.push({ t: 'any', nl: flags.s });
          continue;
        case '^':
          this.pos++;
          items.push({ t: 'assert', kind: flags.m ? 'bol' : 'bot' });
          continue;
        case '$':
          this.pos++;
          items.push({ t: 'assert', kind: flags.m ? 'eol' : 'eot' });
          continue;
        case '\\':
          this.escapeAtom(items, flags);
          continue;
        default:
          this.pos++;
          items.push(this.literal(c.codePointAt(0)!, flags));
      }
    }
    alts.push(concat(items));
    return alts.length === 1 ? alts[0]! : { t: 'alt', subs: alts };
  }

  private repeat(
    items: Node[],
    flags: Flags,
    min: number,
    max: number,
    before: number,
    lastRepeat: number,
    braces: boolean,
  ): void {
    let greedy = !flags.U;
    if (this.src[this.pos] === '?') {
      this.pos++;
      greedy = !greedy;
    }
    if (lastRepeat >= 0) this.fail(ERR.invalidRepeatOp, this.text(lastRepeat, this.pos));
    const sub = items.pop();
    if (sub === undefined) this.fail(ERR.missingRepeatArgument, this.text(before, this.pos));
    const node: Node = { t: 'rep', min, max, greedy, sub };
    if (braces && (min >= 2 || max >= 2) && !repeatIsValid(node, MAX_REPEAT)) {
      this.fail(ERR.invalidRepeatSize, this.text(before, this.pos));
    }
    items.push(node);
  }

  /** `{n}`, `{n,}` or `{n,m}` at pos: [min, max, end] or undefined when `{` is a literal. */
  private braces(): [number, number, number] | undefined {
    const src = this.src;
    let i = this.pos + 1;
    const int = (): number | undefined => {
      const start = i;
      while (isDigit(src[i])) i++;
      if (i === start) return undefined;
      if (i - start >= 2 && src[start] === '0') return undefined;
      // Go treats numbers this long as too big rather than as a literal brace.
      if (i - start > 8) return -1;
      return Number(this.text(start, i));
    };
    let min = int();
    if (min === undefined) return undefined;
    let max: number;
    if (src[i] === ',') {
      i++;
      if (src[i] === '}') max = -1;
      else {
        const m = int();
        if (m === undefined) return undefined;
        max = m;
        if (m < 0) min = -1;
      }
    } else {
      max = min;
    }
    if (src[i] !== '}') return undefined;
    return [min, max, i + 1];
  }

  private perlGroup(flags: Flags, depth: number): { node?: Node; flags: Flags } {
    const src = this.src;
    const start = this.pos;
    const rest = this.text(start);
    // Named captures: (?P<name>re) and (?<name>re).
    if (
      (src[start + 2] === 'P' && src[start + 3] === '<' && src.length - start > 4) ||
      (src[start + 2] === '<' && src.length - start > 3)
    ) {
      const begin = src[start + 2] === '<' ? start + 3 : start + 4;
      let end = begin;
      while (end < src.length && src[end] !== '>') end++;
      if (end >= src.length) this.fail(ERR.invalidNamedCapture, rest);
      const name = this.text(begin, end);
      if (!CAPTURE_NAME.test(name)) this.fail(ERR.invalidNamedCapture, this.text(start, end + 1));
      if (this.names.includes(name)) this.fail(ERR.invalidNamedCapture, this.text(start, end + 1));
      this.pos = end + 1;
      const index = ++this.numCap;
      this.names.push(name);
      const sub = this.group(flags, depth + 1);
      if (src[this.pos] !== ')') this.fail(ERR.missingParen, this.whole);
      this.pos++;
      return { node: { t: 'cap', index, name, sub }, flags };
    }
    let i = start + 2;
    let { i: fi, m: fm, s: fs, U: fU } = flags;
    let negate = false;
    let sawFlag = false;
    while (i < src.length) {
      const c = src[i]!;
      i++;
      switch (c) {
        case 'i':
        case 'm':
        case 's':
        case 'U': {
          const v = !negate;
          if (c === 'i') fi = v;
          else if (c === 'm') fm = v;
          else if (c === 's') fs = v;
          else fU = v;
          sawFlag = true;
          continue;
        }
        case '-':
          if (negate) break;
          negate = true;
          sawFlag = false;
          continue;
        case ':':
        case ')': {
          if (negate && !sawFlag) break;
          const next: Flags = { i: fi, m: fm, s: fs, U: fU };
          this.pos = i;
          if (c === ')') return { flags: next };
          const sub = this.group(next, depth + 1);
          if (src[this.pos] !== ')') this.fail(ERR.missingParen, this.whole);
          this.pos++;
          return { node: sub, flags };
        }
      }
      return this.fail(ERR.invalidPerlOp, this.text(start, i));
    }
    return this.fail(ERR.invalidPerlOp, this.text(start, i));
  }

  private literal(cp: number, flags: Flags): Node {
    if (flags.i) {
      const orbit = foldOrbit(cp);
      if (orbit.length > 1) {
        const ranges: number[] = [];
        for (const o of orbit) ranges.push(o, o);
        return { t: 'class', cls: { ranges: normalize(ranges), props: [], negated: false } };
      }
    }
    return { t: 'lit', cp };
  }

  private escapeAtom(items: Node[], flags: Flags): void {
    const src = this.src;
    const c = src[this.pos + 1];
    if (c === undefined) this.fail(ERR.trailingBackslash, '');
    const simple = (kind: AssertKind) => {
      this.pos += 2;
      items.push({ t: 'assert', kind });
    };
    switch (c) {
      case 'A':
        simple('bot');
        return;
      case 'z':
        simple('eot');
        return;
      case 'b':
        simple('wordb');
        return;
      case 'B':
        simple('nwordb');
        return;
      case 'Q': {
        // Literal text up to \E or the end.
        let i = this.pos + 2;
        while (i < src.length && !(src[i] === '\\' && src[i + 1] === 'E')) {
          // Go keeps an escaped backslash inside \Q...\E as one backslash when followed by another.
          if (src[i] === '\\' && src[i + 1] === '\\') i++;
          items.push(this.literal(src[i]!.codePointAt(0)!, flags));
          i++;
        }
        this.pos = i < src.length ? i + 2 : i;
        return;
      }
      case 'd':
      case 'D':
      case 's':
      case 'S':
      case 'w':
      case 'W':
      case 'p':
      case 'P': {
        const ranges: number[] = [];
        const props: RegExp[] = [];
        this.classEscape(ranges, props, flags);
        items.push(this.finishClass(ranges, props, false, flags, true));
        return;
      }
    }
    items.push(this.literal(this.escape(), flags));
  }

  /** Parses an escape at pos that denotes one code point. */
  private escape(): number {
    const src = this.src;
    const start = this.pos;
    let i = start + 1;
    const c = src[i];
    if (c === undefined) this.fail(ERR.trailingBackslash, '');
    i++;
    const cp = c.codePointAt(0)!;
    if (cp < 0x80 && !/[0-9A-Za-z]/.test(c)) {
      this.pos = i;
      return cp;
    }
    const bad = (): never => this.fail(ERR.invalidEscape, this.text(start, i));
    switch (c) {
      case '0':
      case '1':
      case '2':
      case '3':
      case '4':
      case '5':
      case '6':
      case '7': {
        // A lone non-zero digit is a backreference, which RE2 does not support.
        if (c !== '0' && !(src[i] !== undefined && src[i]! >= '0' && src[i]! <= '7')) return bad();
        let r = cp - 48;
        for (let k = 1; k < 3; k++) {
          const d = src[i];
          if (d === undefined || d < '0' || d > '7') break;
          r = r * 8 + (d.charCodeAt(0) - 48);
          i++;
        }
        this.pos = i;
        return r;
      }
      case 'x': {
        if (i >= src.length) return bad();
        const d = src[i++];
        if (d === '{') {
          let n = 0;
          let r = 0;
          for (;;) {
            if (i >= src.length) return bad();
            const h = src[i++];
            if (h === '}') break;
            const v = unhex(h);
            if (v < 0) return bad();
            r = r * 16 + v;
            if (r > MAX_RUNE) return bad();
            n++;
          }
          if (n === 0) return bad();
          this.pos = i;
          return r;
        }
        const x = unhex(d);
        const y = unhex(src[i++]);
        if (x < 0 || y < 0) {
          i = Math.min(i, src.length);
          return bad();
        }
        this.pos = i;
        return x * 16 + y;
      }
      case 'a':
        this.pos = i;
        return 7;
      case 'f':
        this.pos = i;
        return 12;
      case 'n':
        this.pos = i;
        return 10;
      case 'r':
        this.pos = i;
        return 13;
      case 't':
        this.pos = i;
        return 9;
      case 'v':
        this.pos = i;
        return 11;
    }
    return bad();
  }

  /** \d \D \s \S \w \W \pX \p{X} \PX \P{X} at pos, appended to a class under construction. */
  private classEscape(ranges: number[], props: RegExp[], flags: Flags): void {
    const src = this.src;
    const start = this.pos;
    const c = src[start + 1]!;
    const lowerC = c.toLowerCase();
    if (lowerC === 'd' || lowerC === 's' || lowerC === 'w') {
      this.pos += 2;
      let r = [...PERL_CLASSES[lowerC]!];
      if (flags.i) r = fold(r);
      if (c !== lowerC) r = negateRanges(r);
      ranges.push(...r);
      return;
    }
    // Unicode classes.
    let i = start + 2;
    let name: string;
    if (src[i] === '{') {
      let end = i + 1;
      while (end < src.length && src[end] !== '}') end++;
      if (end >= src.length) this.fail(ERR.invalidCharRange, this.text(start));
      name = this.text(i + 1, end);
      i = end + 1;
    } else {
      if (i >= src.length) this.fail(ERR.invalidCharRange, this.text(start));
      name = src[i]!;
      i++;
    }
    let negated = c === 'P';
    if (name.startsWith('^')) {
      negated = !negated;
      name = name.slice(1);
    }
    const seq = this.text(start, i);
    let body: string;
    if (name === 'Any') body = '\\s\\S';
    else if (CATEGORIES.has(name)) body = `\\p{${name}}`;
    else if (/^[A-Za-z_]+$/.test(name) && scriptExists(name)) body = `\\p{Script=${name}}`;
    else this.fail(ERR.invalidCharRange, seq);
    this.pos = i;
    props.push(new RegExp(`^${negated ? '[^' : '['}${body}]$`, flags.i ? 'iu' : 'u'));
  }

  private charClass(flags: Flags): Node {
    const src = this.src;
    const start = this.pos;
    let i = start + 1;
    let negated = false;
    if (src[i] === '^') {
      negated = true;
      i++;
    }
    const ranges: number[] = [];
    const props: RegExp[] = [];
    let first = true;
    for (;;) {
      if (i >= src.length) this.fail(ERR.missingBracket, this.text(start));
      const c = src[i]!;
      if (c === ']' && !first) {
        i++;
        break;
      }
      first = false;
      // POSIX classes: [:alpha:] and [:^alpha:].
      if (c === '[' && src[i + 1] === ':') {
        const restText = this.text(i + 2);
        const close = restText.indexOf(':]');
        if (close >= 0) {
          const nameLen = Array.from(restText.slice(0, close)).length;
          const full = this.text(i, i + 2 + nameLen + 2);
          let name = this.text(i + 2, i + 2 + nameLen);
          const neg = name.startsWith('^');
          if (neg) name = name.slice(1);
          const r = POSIX_CLASSES.get(name);
          if (r === undefined) this.fail(ERR.invalidCharRange, full);
          let rr = [...r];
          if (flags.i) rr = fold(rr);
          ranges.push(...(neg ? negateRanges(rr) : rr));
          i += 2 + nameLen + 2;
          continue;
        }
      }
      if (c === '\\' && src[i + 1] !== undefined && 'dDsSwWpP'.includes(src[i + 1]!)) {
        this.pos = i;
        this.classEscape(ranges, props, flags);
        i = this.pos;
        continue;
      }
      const rangeStart = i;
      const lo = this.classChar(i);
      i = this.pos;
      let hi = lo;
      if (src[i] === '-' && src[i + 1] !== undefined && src[i + 1] !== ']') {
        hi = this.classChar(i + 1);
        i = this.pos;
        if (hi < lo) this.fail(ERR.invalidCharRange, this.text(rangeStart, i));
      }
      if (flags.i) addFoldedRange(ranges, lo, hi);
      else ranges.push(lo, hi);
    }
    this.pos = i;
    return this.finishClass(ranges, props, negated, flags, false);
  }

  private classChar(i: number): number {
    const src = this.src;
    if (i >= src.length) this.fail(ERR.missingBracket, this.text(i));
    if (src[i] === '\\') {
      this.pos = i;
      return this.escape();
    }
    this.pos = i + 1;
    return src[i]!.codePointAt(0)!;
  }

  private finishClass(
    ranges: number[],
    props: RegExp[],
    negated: boolean,
    _flags: Flags,
    _escape: boolean,
  ): Node {
    const cls: CharClass = { ranges: normalize(ranges), props, negated };
    return { t: 'class', cls };
  }
}

function fold(ranges: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < ranges.length; i += 2) addFoldedRange(out, ranges[i]!, ranges[i + 1]!);
  return normalize(out);
}

const scriptCache = new Map<string, boolean>();

function scriptExists(name: string): boolean {
  let ok = scriptCache.get(name);
  if (ok === undefined) {
    try {
      new RegExp(`\\p{Script=${name}}`, 'u');
      ok = true;
    } catch {
      ok = false;
    }
    if (scriptCache.size < 1000) scriptCache.set(name, ok);
  }
  return ok;
}

function concat(items: Node[]): Node {
  if (items.length === 0) return { t: 'empty' };
  if (items.length === 1) return items[0]!;
  return { t: 'concat', subs: items };
}

/** Parses a pattern as Go's regexp.Compile does; throws RegexSyntaxError with Go's message. */
export function parseRegex(pattern: string): Parsed {
  return new Parser(pattern).parse();
}
