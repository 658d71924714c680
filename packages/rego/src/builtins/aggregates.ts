// Aggregates: count, sum, product, max, min, sort, the deprecated any/all, and membership (`in`).
import { compare, equals, ObjectValue, SetValue, type Value } from '../value.js';
import { type BuiltinTable, elementError, typeErrorOneOf } from './api.js';
import { add, mul } from './numbers.js';
import type { Num } from './numeric.js';

function members(name: string, v: Value, order: readonly string[]): readonly Value[] {
  if (Array.isArray(v)) return v;
  if (v instanceof SetValue) return v.sorted();
  throw typeErrorOneOf(name, 1, order, v);
}

function fold(name: string, v: Value, init: Num, op: (name: string, a: Num, b: Num) => Num): Num {
  let acc = init;
  for (const x of members(name, v, ['set', 'array'])) {
    if (typeof x !== 'number' && typeof x !== 'bigint') throw elementError(name, 1, v, 'number', x);
    acc = op(name, acc, x);
  }
  return acc;
}

function countCodePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

export const aggregateBuiltins: BuiltinTable = {
  count: {
    arity: 1,
    fn: ([v = null]) => {
      if (typeof v === 'string') return countCodePoints(v);
      if (Array.isArray(v)) return v.length;
      if (v instanceof SetValue || v instanceof ObjectValue) return v.size;
      throw typeErrorOneOf('count', 1, ['array', 'object', 'set', 'string'], v);
    },
  },
  sum: { arity: 1, fn: ([v = null]) => fold('sum', v, 0, add) },
  product: { arity: 1, fn: ([v = null]) => fold('product', v, 1, mul) },
  max: {
    arity: 1,
    fn: ([v = null]) => {
      const xs = members('max', v, ['set', 'array']);
      let best: Value | undefined;
      for (const x of xs) if (best === undefined || compare(best, x) <= 0) best = x;
      return best;
    },
  },
  min: {
    arity: 1,
    fn: ([v = null]) => {
      const xs = members('min', v, ['set', 'array']);
      let best: Value | undefined;
      for (const x of xs) if (best === undefined || compare(best, x) >= 0) best = x;
      return best;
    },
  },
  sort: {
    arity: 1,
    fn: ([v = null]) => {
      if (v instanceof SetValue) return [...v.sorted()];
      return [...members('sort', v, ['set', 'array'])].sort(compare);
    },
  },
  // Deprecated (v0 only): use `every` / `some ... in`.
  all: {
    arity: 1,
    fn: ([v = null]) => members('all', v, ['array', 'set']).every((x) => x === true),
  },
  // Deprecated (v0 only).
  any: {
    arity: 1,
    fn: ([v = null]) => {
      if (v instanceof SetValue) return v.has(true);
      return members('any', v, ['array', 'set']).some((x) => x === true);
    },
  },
  // `x in c`: membership in the values of a collection; false for scalars.
  'internal.member_2': {
    arity: 2,
    fn: ([x = null, c = null]) => {
      if (c instanceof SetValue) return c.has(x);
      if (Array.isArray(c)) return c.some((y) => equals(x, y));
      if (c instanceof ObjectValue) {
        for (const [, y] of c.entries.values()) if (equals(x, y)) return true;
      }
      return false;
    },
  },
  // `k, v in c`: key (index) and value membership.
  'internal.member_3': {
    arity: 3,
    fn: ([k = null, x = null, c = null]) => {
      if (c instanceof SetValue) return c.has(k) && equals(k, x);
      if (c instanceof ObjectValue) {
        const y = c.get(k);
        return y !== undefined && equals(x, y);
      }
      if (Array.isArray(c)) {
        if (typeof k !== 'number' || !Number.isInteger(k) || k < 0 || k >= c.length) return false;
        return equals(x, c[k]!);
      }
      return false;
    },
  },
};
