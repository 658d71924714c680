// Set builtins and the set operators `&` (and) and `|` (or).
import { SetValue, type Value } from '../value.js';
import { argSet, type BuiltinTable, typeError } from './api.js';

function intersect(a: SetValue, b: SetValue): SetValue {
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  const out = new SetValue();
  for (const [k, v] of small.items) if (large.items.has(k)) out.add(v);
  return out;
}

function unite(into: SetValue, from: SetValue): void {
  for (const v of from.values()) into.add(v);
}

function innerSets(name: string, outer: SetValue): SetValue[] {
  return outer.sorted().map((x: Value) => {
    if (!(x instanceof SetValue)) throw typeError(name, 1, 'set', x);
    return x;
  });
}

export const setBuiltins: BuiltinTable = {
  and: { arity: 2, fn: (args) => intersect(argSet('and', args, 0), argSet('and', args, 1)) },
  or: {
    arity: 2,
    fn: (args) => {
      const out = new SetValue();
      unite(out, argSet('or', args, 0));
      unite(out, argSet('or', args, 1));
      return out;
    },
  },
  intersection: {
    arity: 1,
    fn: (args) => {
      const sets = innerSets('intersection', argSet('intersection', args, 0));
      let acc: SetValue | undefined;
      for (const s of sets) acc = acc === undefined ? s : intersect(acc, s);
      return acc ?? new SetValue();
    },
  },
  union: {
    arity: 1,
    fn: (args) => {
      const out = new SetValue();
      for (const s of innerSets('union', argSet('union', args, 0))) unite(out, s);
      return out;
    },
  },
  // Deprecated (v0 only): use `a - b`.
  set_diff: {
    arity: 2,
    fn: (args) => {
      const a = argSet('set_diff', args, 0);
      const b = argSet('set_diff', args, 1);
      const out = new SetValue();
      for (const [k, v] of a.items) if (!b.items.has(k)) out.add(v);
      return out;
    },
  },
};
