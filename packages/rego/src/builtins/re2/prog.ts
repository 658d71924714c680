// Compiles the RE2 syntax tree to a small instruction program and runs it with a bounded backtracker
// (RE2's "BitState"): each (instruction, position) pair is explored at most once per search, so
// matching takes time linear in the input for a given pattern whatever the pattern, and the result is
// the leftmost-first match with Go's submatch semantics.
import { type AssertKind, type CharClass, ERR, type Node, RegexSyntaxError } from './ast.js';

enum Op {
  Match = 0,
  Char = 1,
  Class = 2,
  Any = 3,
  AnyNotNL = 4,
  Split = 5,
  Jmp = 6,
  Save = 7,
  Assert = 8,
}

const ASSERT_CODES: Record<AssertKind, number> = { bol: 0, eol: 1, bot: 2, eot: 3, wordb: 4, nwordb: 5 };

/** Programs beyond this many instructions are refused ("expression too large"). */
export const MAX_PROGRAM = 100_000;
/** The backtracker's visited set is bounded: instructions × (input length + 1) bits. */
export const MAX_VISITED_BITS = 1 << 28;

// Visited sets up to this many words (1 MiB) are kept between searches.
const RETAINED_VISITED_WORDS = 1 << 18;

export class RegexInputTooLargeError extends Error {
  constructor() {
    super('input too large for this regular expression');
    this.name = 'RegexInputTooLargeError';
  }
}

class ClassMatcher {
  private readonly ascii = new Uint32Array(4);
  private readonly ranges: Int32Array;
  private readonly cache = new Map<number, boolean>();

  constructor(private readonly cls: CharClass) {
    this.ranges = Int32Array.from(cls.ranges);
    for (let c = 0; c < 128; c++) if (this.slow(c)) this.ascii[c >> 5]! |= 1 << (c & 31);
  }

  private slow(c: number): boolean {
    const r = this.ranges;
    let lo = 0;
    let hi = r.length / 2 - 1;
    let found = false;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (c < r[mid * 2]!) hi = mid - 1;
      else if (c > r[mid * 2 + 1]!) lo = mid + 1;
      else {
        found = true;
        break;
      }
    }
    if (!found && this.cls.props.length > 0) {
      const s = String.fromCodePoint(c);
      found = this.cls.props.some((p) => p.test(s));
    }
    return found !== this.cls.negated;
  }

  test(c: number): boolean {
    if (c < 128) return (this.ascii[c >> 5]! & (1 << (c & 31))) !== 0;
    let v = this.cache.get(c);
    if (v === undefined) {
      v = this.slow(c);
      if (this.cache.size < 4096) this.cache.set(c, v);
    }
    return v;
  }
}

class Builder {
  op: number[] = [];
  a: number[] = [];
  b: number[] = [];
  classes: ClassMatcher[] = [];
  // Repetition copies the same class node; compile its matcher once.
  private readonly classIndex = new Map<CharClass, number>();

  emit(op: Op, a = 0, b = 0): number {
    if (this.op.length >= MAX_PROGRAM) throw new RegexSyntaxError(ERR.large, '');
    this.op.push(op);
    this.a.push(a);
    this.b.push(b);
    return this.op.length - 1;
  }

  get pc(): number {
    return this.op.length;
  }

  node(n: Node): void {
    switch (n.t) {
      case 'empty':
        return;
      case 'lit':
        this.emit(Op.Char, n.cp);
        return;
      case 'class': {
        let idx = this.classIndex.get(n.cls);
        if (idx === undefined) {
          idx = this.classes.push(new ClassMatcher(n.cls)) - 1;
          this.classIndex.set(n.cls, idx);
        }
        this.emit(Op.Class, idx);
        return;
      }
      case 'any':
        this.emit(n.nl ? Op.Any : Op.AnyNotNL);
        return;
      case 'assert':
        this.emit(Op.Assert, ASSERT_CODES[n.kind]);
        return;
      case 'cap':
        this.emit(Op.Save, 2 * n.index);
        this.node(n.sub);
        this.emit(Op.Save, 2 * n.index + 1);
        return;
      case 'concat':
        for (const s of n.subs) this.node(s);
        return;
      case 'alt': {
        const jumps: number[] = [];
        n.subs.forEach((s, i) => {
          if (i < n.subs.length - 1) {
            const split = this.emit(Op.Split);
            this.a[split] = this.pc;
            this.node(s);
            jumps.push(this.emit(Op.Jmp));
            this.b[split] = this.pc;
          } else {
            this.node(s);
          }
        });
        for (const j of jumps) this.a[j] = this.pc;
        return;
      }
      case 'rep':
        this.rep(n.sub, n.min, n.max, n.greedy);
        return;
    }
  }

  private split(greedy: boolean, body: number, exit: number, at: number): void {
    this.a[at] = greedy ? body : exit;
    this.b[at] = greedy ? exit : body;
  }

  private rep(sub: Node, min: number, max: number, greedy: boolean): void {
    if (max === -1) {
      for (let i = 0; i < min - 1; i++) this.node(sub);
      if (min === 0) {
        // x*: L: split body, exit; body; jmp L
        const l = this.emit(Op.Split);
        const body = this.pc;
        this.node(sub);
        this.emit(Op.Jmp, l);
        this.split(greedy, body, this.pc, l);
      } else {
        // x+: L: body; split L, exit
        const body = this.pc;
        this.node(sub);
        const s = this.emit(Op.Split);
        this.split(greedy, body, this.pc, s);
      }
      return;
    }
    for (let i = 0; i < min; i++) this.node(sub);
    // x{0,k}: nested optionals; skipping one skips the rest.
    const splits: number[] = [];
    for (let i = min; i < max; i++) {
      const s = this.emit(Op.Split);
      splits.push(s);
      this.a[s] = this.pc;
      this.node(sub);
    }
    const exit = this.pc;
    for (const s of splits) this.split(greedy, s + 1, exit, s);
  }
}

function isWordChar(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
}

export class Program {
  private readonly op: Uint8Array;
  private readonly a: Int32Array;
  private readonly b: Int32Array;
  private readonly classes: ClassMatcher[];
  /** Literal text every match starts with (used to skip ahead), or ''. */
  private readonly prefix: string;
  /** True when every match must start at the beginning of the text. */
  private readonly anchored: boolean;
  private visited: Uint32Array = new Uint32Array(0);
  // Words of `visited` written by the last search; cleared before the next one, so that clearing costs
  // no more than the search did.
  private dirtyLo = 0;
  private dirtyHi = 0;

  constructor(root: Node) {
    const bld = new Builder();
    bld.emit(Op.Save, 0);
    bld.node(root);
    bld.emit(Op.Save, 1);
    bld.emit(Op.Match);
    this.op = Uint8Array.from(bld.op);
    this.a = Int32Array.from(bld.a);
    this.b = Int32Array.from(bld.b);
    this.classes = bld.classes;
    let pc = 1;
    let prefix = '';
    while (this.op[pc] === Op.Save) pc++;
    this.anchored = this.op[pc] === Op.Assert && this.a[pc] === ASSERT_CODES.bot;
    while (this.op[pc] === Op.Char) {
      prefix += String.fromCodePoint(this.a[pc]!);
      pc++;
    }
    this.prefix = prefix;
  }

  get size(): number {
    return this.op.length;
  }

  /**
   * Leftmost-first match at or after `from` (a UTF-16 index). Returns ncap capture slots (UTF-16
   * indices, -1 when unset), or null.
   */
  exec(input: string, from: number, ncap: number): Int32Array | null {
    const n = input.length;
    const m = this.op.length;
    if (m * (n + 1) > MAX_VISITED_BITS) throw new RegexInputTooLargeError();
    const words = (m * (n + 1) + 31) >>> 5;
    if (this.visited.length < words) {
      this.visited = new Uint32Array(Math.max(words, this.visited.length * 2));
      this.dirtyLo = this.dirtyHi = 0;
    }
    const visited = this.visited;
    if (this.dirtyHi > this.dirtyLo) visited.fill(0, this.dirtyLo, this.dirtyHi);
    let hi = from;
    const caps = new Int32Array(Math.max(ncap, 2)).fill(-1);
    const stack: number[] = [];
    const op = this.op;
    const A = this.a;
    const B = this.b;
    const classes = this.classes;

    const tryAt = (start: number): boolean => {
      stack.length = 0;
      stack.push(0, start, -1, 0);
      while (stack.length > 0) {
        const old = stack.pop()!;
        const slot = stack.pop()!;
        let pos = stack.pop()!;
        let pc = stack.pop()!;
        if (slot >= 0) {
          caps[slot] = old;
          continue;
        }
        for (;;) {
          const bit = pos * m + pc;
          const w = bit >>> 5;
          const mask = 1 << (bit & 31);
          if ((visited[w]! & mask) !== 0) break;
          visited[w]! |= mask;
          const o = op[pc]!;
          if (o <= Op.AnyNotNL && o !== Op.Match) {
            if (pos >= n) break;
            let c = input.charCodeAt(pos);
            let width = 1;
            if (c >= 0xd800 && c <= 0xdbff && pos + 1 < n) {
              const d = input.charCodeAt(pos + 1);
              if (d >= 0xdc00 && d <= 0xdfff) {
                c = ((c - 0xd800) << 10) + (d - 0xdc00) + 0x10000;
                width = 2;
              }
            }
            let ok: boolean;
            if (o === Op.Char) ok = c === A[pc];
            else if (o === Op.Class) ok = classes[A[pc]!]!.test(c);
            else if (o === Op.Any) ok = true;
            else ok = c !== 10;
            if (!ok) break;
            pc++;
            pos += width;
            if (pos > hi) hi = pos;
            continue;
          }
          switch (o) {
            case Op.Match:
              caps[1] = pos;
              return true;
            case Op.Split:
              stack.push(B[pc]!, pos, -1, 0);
              pc = A[pc]!;
              continue;
            case Op.Jmp:
              pc = A[pc]!;
              continue;
            case Op.Save: {
              const s = A[pc]!;
              if (s < ncap) {
                stack.push(0, 0, s, caps[s]!);
                caps[s] = pos;
              }
              pc++;
              continue;
            }
            case Op.Assert:
              if (!assertHolds(A[pc]!, input, pos)) break;
              pc++;
              continue;
          }
          break;
        }
      }
      return false;
    };

    let start = from;
    try {
      for (;;) {
        if (this.prefix !== '') {
          const at = input.indexOf(this.prefix, start);
          if (at < 0) return null;
          start = at;
        }
        if (this.anchored && start > 0) return null;
        if (start > hi) hi = start;
        if (tryAt(start)) {
          caps[0] = start;
          return caps;
        }
        if (start >= n) return null;
        const c = input.charCodeAt(start);
        start += c >= 0xd800 && c <= 0xdbff && start + 1 < n ? 2 : 1;
      }
    } finally {
      this.dirtyLo = (from * m) >>> 5;
      this.dirtyHi = Math.min(words, (((hi + 1) * m) >>> 5) + 1);
    }
  }

  /** Drops a large visited set after an operation, so that cached programs do not pin its memory. */
  release(): void {
    if (this.visited.length > RETAINED_VISITED_WORDS) {
      this.visited = new Uint32Array(0);
      this.dirtyLo = this.dirtyHi = 0;
    }
  }
}

function assertHolds(kind: number, input: string, pos: number): boolean {
  switch (kind) {
    case 0:
      return pos === 0 || input.charCodeAt(pos - 1) === 10;
    case 1:
      return pos === input.length || input.charCodeAt(pos) === 10;
    case 2:
      return pos === 0;
    case 3:
      return pos === input.length;
    default: {
      const before = pos > 0 && isWordChar(input.charCodeAt(pos - 1));
      const after = pos < input.length && isWordChar(input.charCodeAt(pos));
      return (before !== after) === (kind === 4);
    }
  }
}
