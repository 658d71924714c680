// arrays, sets, types and comparison builtins.
import { describe, expect, it } from 'vitest';
import { call, failure, set, show } from './testkit.js';

describe('arrays', () => {
  it('concat, slice and reverse', () => {
    expect(show(call('array.concat', [1], [2, 3]))).toBe('[1, 2, 3]');
    expect(show(call('array.concat', [], []))).toBe('[]');
    expect(show(call('array.slice', [1, 2, 3], 0, 1))).toBe('[1]');
    expect(show(call('array.slice', [1, 2, 3], 2, 3))).toBe('[3]');
    expect(show(call('array.slice', [1, 2, 3], 0, 5))).toBe('[1, 2, 3]');
    expect(show(call('array.slice', [1, 2, 3], 5, 5))).toBe('[]');
    expect(show(call('array.slice', [1, 2, 3], -5, 1))).toBe('[1]');
    expect(show(call('array.slice', [1, 2, 3], 2, 1))).toBe('[]');
    expect(show(call('array.reverse', [1, 2, 3]))).toBe('[3, 2, 1]');
  });

  it('reject wrong operands with OPA wording', () => {
    expect(failure('array.concat', [1], set()).message).toBe(
      'array.concat: operand 2 must be array but got set',
    );
    expect(failure('array.slice', [1], 1.5, 2).message).toBe(
      'array.slice: operand 2 must be integer number but got floating-point number',
    );
    expect(failure('array.slice', [1], 'a', 2).message).toBe(
      'array.slice: operand 2 must be number but got string',
    );
  });
});

describe('sets', () => {
  it('and/or and the n-ary forms', () => {
    expect(show(call('and', set(1, 2, 3), set(2, 3, 4)))).toBe('{2, 3}');
    expect(show(call('or', set(1), set(2)))).toBe('{1, 2}');
    expect(show(call('intersection', set(set(1, 2), set(2, 3))))).toBe('{2}');
    expect(show(call('intersection', set()))).toBe('set()');
    expect(show(call('union', set(set(1), set(2), set())))).toBe('{1, 2}');
    expect(show(call('set_diff', set(1, 2), set(1)))).toBe('{2}');
  });

  it('reject non-sets', () => {
    expect(failure('and', [1], set()).message).toBe('and: operand 1 must be set but got array');
    expect(failure('union', set([1])).message).toBe('union: operand 1 must be set but got array');
  });
});

describe('types', () => {
  it('predicates never fail', () => {
    expect(call('is_number', 1)).toBe(true);
    expect(call('is_number', 2n ** 70n)).toBe(true);
    expect(call('is_number', '1')).toBe(false);
    expect(call('is_string', 'a')).toBe(true);
    expect(call('is_boolean', false)).toBe(true);
    expect(call('is_array', [])).toBe(true);
    expect(call('is_set', set())).toBe(true);
    expect(call('is_set', [])).toBe(false);
    expect(call('is_object', {})).toBe(true);
    expect(call('is_null', null)).toBe(true);
    expect(call('is_null', false)).toBe(false);
  });

  it('type_name', () => {
    expect(call('type_name', null)).toBe('null');
    expect(call('type_name', 1.5)).toBe('number');
    expect(call('type_name', set())).toBe('set');
    expect(call('type_name', {})).toBe('object');
  });
});

describe('comparison', () => {
  it('orders values of every type', () => {
    expect(call('lt', 1, 2)).toBe(true);
    expect(call('lt', 1, 1.0)).toBe(false);
    expect(call('lte', 1, 1.0)).toBe(true);
    expect(call('gt', 'b', 'a')).toBe(true);
    expect(call('gt', 'a', 100)).toBe(true);
    expect(call('lt', null, false)).toBe(true);
    expect(call('lt', [1], {})).toBe(true);
    expect(call('lt', {}, set())).toBe(true);
    expect(call('gte', 9007199254740993n, 9007199254740992)).toBe(true);
    expect(call('equal', 1, 1.0)).toBe(true);
    expect(call('equal', set(1, 2), set(2, 1))).toBe(true);
    expect(call('neq', { a: 1 }, { a: 1 })).toBe(false);
    expect(call('neq', [1], [1, 2])).toBe(true);
  });
});
