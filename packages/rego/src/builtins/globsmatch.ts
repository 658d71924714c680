// regex.globs_match: whether two "glob-style" patterns (OPA's restricted regex syntax: literals, `.`,
// `[...]` classes with ranges, `\` escapes, and the `*` and `+` repetitions) both match some non-empty
// string. Decided on the product of the two patterns' automata.
import { argString, type BuiltinTable, builtinError } from './api.js';

/** A set of code points as sorted, disjoint inclusive ranges. */
type CharSet = readonly (readonly [number, number])[];

interface Token {
  readonly set: CharSet;
  /** `*` (zero or more) or a single character; `+` is rewritten as the token followed by its `*`. */
  readonly star: boolean;
}

const ANY: CharSet = [[0, 0x10ffff]];
const MAX_PRODUCT = 1_000_000;

function parseGlob(pattern: string): Token[] {
  const chars = [...pattern];
  const out: Token[] = [];
  let i = 0;
  const fail = (msg: string) => builtinError('regex.globs_match', `${msg} in ${JSON.stringify(pattern)}`);
  while (i < chars.length) {
    const c = chars[i]!;
    let set: CharSet;
    if (c === '*' || c === '+') {
      const last = out.pop();
      if (last === undefined || last.star) throw fail(`unexpected ${c}`);
      if (c === '+') out.push(last);
      out.push({ set: last.set, star: true });
      i++;
      continue;
    }
    if (c === '.') {
      set = ANY;
      i++;
    } else if (c === '\\') {
      const e = chars[i + 1];
      if (e === undefined) throw fail('trailing backslash');
      const cp = e.codePointAt(0)!;
      set = [[cp, cp]];
      i += 2;
    } else if (c === '[') {
      const ranges: [number, number][] = [];
      i++;
      const next = (): number => {
        let ch = chars[i];
        if (ch === '\\') ch = chars[++i];
        if (ch === undefined) throw fail('unterminated character class');
        i++;
        return ch.codePointAt(0)!;
      };
      while (chars[i] !== ']') {
        if (i >= chars.length) throw fail('unterminated character class');
        const lo = next();
        let hi = lo;
        if (chars[i] === '-' && chars[i + 1] !== ']' && chars[i + 1] !== undefined) {
          i++;
          hi = next();
          if (hi < lo) throw fail('invalid character class range');
        }
        ranges.push([lo, hi]);
      }
      i++;
      if (ranges.length === 0) throw fail('empty character class');
      set = ranges;
    } else {
      const cp = c.codePointAt(0)!;
      set = [[cp, cp]];
      i++;
    }
    out.push({ set, star: false });
  }
  return out;
}

function intersects(a: CharSet, b: CharSet): boolean {
  for (const [alo, ahi] of a) for (const [blo, bhi] of b) if (alo <= bhi && blo <= ahi) return true;
  return false;
}

/** Positions reachable from `i` by skipping starred tokens. */
function closure(tokens: readonly Token[], i: number): number[] {
  const out = [i];
  while (i < tokens.length && tokens[i]!.star) out.push(++i);
  return out;
}

/** True when some non-empty string matches both patterns. */
function globsIntersect(a: readonly Token[], b: readonly Token[]): boolean {
  // States (i, j, consumed): positions in a and b, and whether a character has been read.
  const seen = new Set<string>();
  const queue: [number, number, boolean][] = [];
  const push = (i: number, j: number, consumed: boolean): boolean => {
    for (const x of closure(a, i)) {
      for (const y of closure(b, j)) {
        if (consumed && x === a.length && y === b.length) return true;
        const key = `${x},${y},${consumed}`;
        if (!seen.has(key)) {
          seen.add(key);
          queue.push([x, y, consumed]);
        }
      }
    }
    return false;
  };
  if (push(0, 0, false)) return true;
  while (queue.length > 0) {
    const [i, j] = queue.shift()!;
    const ta = a[i];
    const tb = b[j];
    if (ta === undefined || tb === undefined || !intersects(ta.set, tb.set)) continue;
    // Reading one character: a starred token may stay, a single one moves on.
    if (push(ta.star ? i : i + 1, tb.star ? j : j + 1, true)) return true;
  }
  return false;
}

export const globsMatchBuiltins: BuiltinTable = {
  'regex.globs_match': {
    arity: 2,
    fn: (args) => {
      const a = parseGlob(argString('regex.globs_match', args, 0));
      const b = parseGlob(argString('regex.globs_match', args, 1));
      // The search visits up to (|a| + 1) × (|b| + 1) × 2 states.
      if ((a.length + 1) * (b.length + 1) > MAX_PRODUCT) {
        throw builtinError('regex.globs_match', 'patterns too large');
      }
      return globsIntersect(a, b);
    },
  },
};
