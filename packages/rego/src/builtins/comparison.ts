// Comparison operators under OPA's internal names; they order any two values with the total order.
import { compare, equals, type Value } from '../value.js';
import type { BuiltinTable } from './api.js';

function cmp(pred: (c: number) => boolean) {
  return { arity: 2, fn: ([a, b]: readonly Value[]) => pred(compare(a ?? null, b ?? null)) };
}

export const comparisonBuiltins: BuiltinTable = {
  equal: { arity: 2, fn: ([a, b]) => equals(a ?? null, b ?? null) },
  neq: { arity: 2, fn: ([a, b]) => !equals(a ?? null, b ?? null) },
  lt: cmp((c) => c < 0),
  lte: cmp((c) => c <= 0),
  gt: cmp((c) => c > 0),
  gte: cmp((c) => c >= 0),
};
