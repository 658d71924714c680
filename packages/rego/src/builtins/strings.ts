// String builtins, with Go's rune-based semantics.
import { compare, SetValue, type Value } from '../value.js';
import {
  argArray,
  argInt,
  argNumber,
  argObject,
  argSmallInt,
  argString,
  argStrings,
  type BuiltinTable,
  builtinError,
  elementError,
  operandError,
  typeErrorOneOf,
} from './api.js';
import { goSprintf, toGoArg } from './gofmt.js';
import { isIntegral, toBig, toDecimal } from './numeric.js';
import { goLower, goTrim, goTrimSpace, goUpper, isAscii, runeCount, runes } from './text.js';

/** Go's strings.Replacer: leftmost matches, earlier pairs win at the same position, no overlaps. */
export function replaceAllPairs(s: string, pairs: readonly (readonly [string, string])[]): string {
  if (pairs.length === 1) {
    const [old, rep] = pairs[0]!;
    if (old !== '') return s.split(old).join(rep);
  }
  let out = '';
  let i = 0;
  let prevEmpty = false;
  while (i <= s.length) {
    let matched: readonly [string, string] | undefined;
    for (let p = 0; p < pairs.length; p++) {
      const pair = pairs[p]!;
      if (pair[0] === '') {
        if (prevEmpty) continue;
        matched = pair;
        break;
      }
      if (s.startsWith(pair[0], i)) {
        matched = pair;
        break;
      }
    }
    if (matched !== undefined) {
      out += matched[1];
      prevEmpty = matched[0] === '';
      i += matched[0].length;
      continue;
    }
    prevEmpty = false;
    if (i >= s.length) break;
    const cp = s.codePointAt(i)!;
    const w = cp > 0xffff ? 2 : 1;
    out += s.slice(i, i + w);
    i += w;
  }
  return out;
}

function indexOfRunes(base: string, search: string, all: boolean): number | number[] {
  if (isAscii(base) && isAscii(search) && !all) return base.indexOf(search);
  const b = runes(base);
  const q = runes(search);
  const hits: number[] = [];
  outer: for (let i = 0; i + q.length <= b.length; i++) {
    for (let j = 0; j < q.length; j++) if (b[i + j] !== q[j]) continue outer;
    if (!all) return i;
    hits.push(i);
  }
  return all ? hits : -1;
}

function goSplit(text: string, delim: string): string[] {
  if (delim === '') return runes(text);
  return text.split(delim);
}

function countSubstr(s: string, sub: string): number {
  if (sub === '') return runeCount(s) + 1;
  let n = 0;
  let i = s.indexOf(sub);
  while (i >= 0) {
    n++;
    i = s.indexOf(sub, i + sub.length);
  }
  return n;
}

/** A string, or an array or set of strings (operand i). */
function stringsOrString(name: string, args: readonly Value[], i: number): string[] {
  const v = args[i] ?? null;
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) || v instanceof SetValue) return argStrings(name, args, i);
  throw typeErrorOneOf(name, i + 1, ['string', 'set', 'array'], v);
}

function anyPrefix(name: string, args: readonly Value[], suffix: boolean): boolean {
  const strs = stringsOrString(name, args, 0);
  const affixes = stringsOrString(name, args, 1);
  for (const s of strs) {
    for (const p of affixes) if (suffix ? s.endsWith(p) : s.startsWith(p)) return true;
  }
  return false;
}

export const stringBuiltins: BuiltinTable = {
  concat: {
    arity: 2,
    fn: (args) => {
      const sep = argString('concat', args, 0);
      const coll = args[1] ?? null;
      let items: readonly Value[];
      if (Array.isArray(coll)) items = coll;
      else if (coll instanceof SetValue) items = coll.sorted();
      else throw typeErrorOneOf('concat', 2, ['set', 'array'], coll);
      for (const x of items) if (typeof x !== 'string') throw elementError('concat', 2, coll, 'string', x);
      return (items as string[]).join(sep);
    },
  },
  contains: {
    arity: 2,
    fn: (args) => argString('contains', args, 0).includes(argString('contains', args, 1)),
  },
  startswith: {
    arity: 2,
    fn: (args) => argString('startswith', args, 0).startsWith(argString('startswith', args, 1)),
  },
  endswith: {
    arity: 2,
    fn: (args) => argString('endswith', args, 0).endsWith(argString('endswith', args, 1)),
  },
  format_int: {
    arity: 2,
    fn: (args) => {
      const x = argNumber('format_int', args, 0);
      const base = argNumber('format_int', args, 1);
      if (base !== 2 && base !== 8 && base !== 10 && base !== 16) {
        throw operandError('format_int', 2, 'must be one of {2, 8, 10, 16}');
      }
      // The number is truncated toward zero first.
      let i: bigint;
      if (isIntegral(x)) i = toBig(x);
      else {
        const d = toDecimal(x);
        i = d.m / 10n ** BigInt(-d.e);
      }
      return i.toString(base);
    },
  },
  indexof: {
    arity: 2,
    fn: (args) => {
      const base = argString('indexof', args, 0);
      const search = argString('indexof', args, 1);
      if (search === '') throw builtinError('indexof', 'empty search character');
      return indexOfRunes(base, search, false) as number;
    },
  },
  indexof_n: {
    arity: 2,
    fn: (args) => {
      const base = argString('indexof_n', args, 0);
      const search = argString('indexof_n', args, 1);
      if (search === '') throw builtinError('indexof_n', 'empty search character');
      return indexOfRunes(base, search, true) as number[];
    },
  },
  lower: { arity: 1, fn: (args) => goLower(argString('lower', args, 0)) },
  upper: { arity: 1, fn: (args) => goUpper(argString('upper', args, 0)) },
  replace: {
    arity: 3,
    fn: (args) => {
      const s = argString('replace', args, 0);
      const old = argString('replace', args, 1);
      const rep = argString('replace', args, 2);
      return replaceAllPairs(s, [[old, rep]]);
    },
  },
  'strings.replace_n': {
    arity: 2,
    fn: (args) => {
      const patterns = argObject('strings.replace_n', args, 0);
      const s = argString('strings.replace_n', args, 1);
      const pairs: [string, string][] = [];
      for (const [k, v] of [...patterns.entries.values()].sort((a, b) => compare(a[0], b[0]))) {
        if (typeof k !== 'string')
          throw operandError('strings.replace_n', 1, 'non-string key found in pattern object');
        if (typeof v !== 'string') {
          throw operandError('strings.replace_n', 1, 'non-string value found in pattern object');
        }
        pairs.push([k, v]);
      }
      if (pairs.length === 0) return s;
      return replaceAllPairs(s, pairs);
    },
  },
  split: {
    arity: 2,
    fn: (args) => goSplit(argString('split', args, 0), argString('split', args, 1)),
  },
  'strings.split_n': {
    arity: 3,
    fn: (args) => {
      const parts = goSplit(argString('strings.split_n', args, 0), argString('strings.split_n', args, 1));
      const n = argInt('strings.split_n', args, 2);
      // n ≥ 0 keeps the first n parts, n < 0 the last |n| parts.
      if (n >= 0n) return n >= BigInt(parts.length) ? parts : parts.slice(0, Number(n));
      return -n >= BigInt(parts.length) ? parts : parts.slice(parts.length + Number(n));
    },
  },
  sprintf: {
    arity: 2,
    fn: (args) => {
      const format = argString('sprintf', args, 0);
      const items = argArray('sprintf', args, 1);
      return goSprintf(format, items.map(toGoArg));
    },
  },
  'strings.any_prefix_match': { arity: 2, fn: (args) => anyPrefix('strings.any_prefix_match', args, false) },
  'strings.any_suffix_match': { arity: 2, fn: (args) => anyPrefix('strings.any_suffix_match', args, true) },
  'strings.count': {
    arity: 2,
    fn: (args) => countSubstr(argString('strings.count', args, 0), argString('strings.count', args, 1)),
  },
  'strings.reverse': {
    arity: 1,
    fn: (args) =>
      runes(argString('strings.reverse', args, 0))
        .reverse()
        .join(''),
  },
  substring: {
    arity: 3,
    fn: (args) => {
      const s = argString('substring', args, 0);
      const start = argSmallInt('substring', args, 1);
      const length = argSmallInt('substring', args, 2);
      if (start < 0) throw builtinError('substring', 'negative offset');
      if (isAscii(s)) {
        if (start >= s.length) return '';
        return length < 0 ? s.slice(start) : s.slice(start, Math.min(s.length, start + length));
      }
      const rs = runes(s);
      if (start >= rs.length) return '';
      return (length < 0 ? rs.slice(start) : rs.slice(start, Math.min(rs.length, start + length))).join('');
    },
  },
  trim: {
    arity: 2,
    fn: (args) => goTrim(argString('trim', args, 0), argString('trim', args, 1), true, true),
  },
  trim_left: {
    arity: 2,
    fn: (args) => goTrim(argString('trim_left', args, 0), argString('trim_left', args, 1), true, false),
  },
  trim_right: {
    arity: 2,
    fn: (args) => goTrim(argString('trim_right', args, 0), argString('trim_right', args, 1), false, true),
  },
  trim_prefix: {
    arity: 2,
    fn: (args) => {
      const s = argString('trim_prefix', args, 0);
      const p = argString('trim_prefix', args, 1);
      return s.startsWith(p) ? s.slice(p.length) : s;
    },
  },
  trim_suffix: {
    arity: 2,
    fn: (args) => {
      const s = argString('trim_suffix', args, 0);
      const p = argString('trim_suffix', args, 1);
      return p !== '' && s.endsWith(p) ? s.slice(0, s.length - p.length) : s;
    },
  },
  trim_space: { arity: 1, fn: (args) => goTrimSpace(argString('trim_space', args, 0)) },
};
