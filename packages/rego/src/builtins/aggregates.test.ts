import { describe, expect, it } from 'vitest';
import { call, failure, set, show } from './testkit.js';

describe('count', () => {
  it('counts arrays, sets, objects and the runes of strings', () => {
    expect(call('count', [1, 2, 3])).toBe(3);
    expect(call('count', set(1, 2))).toBe(2);
    expect(call('count', { a: 1 })).toBe(1);
    expect(call('count', '')).toBe(0);
    expect(call('count', 'héllo')).toBe(5);
    expect(call('count', '😀x')).toBe(2);
  });

  it('rejects scalars with OPA wording', () => {
    const e = failure('count', 1);
    expect(e.code).toBe('eval_type_error');
    expect(e.message).toBe('count: operand 1 must be one of {array, object, set, string} but got number');
  });
});

describe('sum and product', () => {
  it('sums exactly', () => {
    expect(call('sum', [1, 2, 3])).toBe(6);
    expect(call('sum', set(1, 2, 3))).toBe(6);
    expect(call('sum', [])).toBe(0);
    expect(call('sum', [9007199254740991, 9007199254740991])).toBe(18014398509481982n);
    expect(call('sum', [1.5, 2.5])).toBe(4);
    expect(call('product', [2, 3, 4])).toBe(24);
    expect(call('product', [])).toBe(1);
    expect(call('product', [4294967296, 4294967296, 4294967296])).toBe(2n ** 96n);
  });

  it('rejects non-numbers', () => {
    expect(failure('sum', [1, 'a']).message).toBe(
      'sum: operand 1 must be array of numbers but got array containing string',
    );
    expect(failure('product', set('a')).message).toBe(
      'product: operand 1 must be set of numbers but got set containing string',
    );
    expect(failure('sum', 'a').message).toBe('sum: operand 1 must be one of {set, array} but got string');
  });
});

describe('max, min and sort', () => {
  it('use the total order over all values', () => {
    expect(call('max', [1, 3, 2])).toBe(3);
    expect(call('min', [1, 3, 2])).toBe(1);
    expect(call('max', [1, 'a', null])).toBe('a');
    expect(call('min', set('b', 2))).toBe(2);
    expect(show(call('sort', [3, 'a', 1, null, [1]]))).toBe('[null, 1, 3, "a", [1]]');
    expect(show(call('sort', set(3, 1, 2)))).toBe('[1, 2, 3]');
  });

  it('are undefined on empty collections', () => {
    expect(call('max', [])).toBeUndefined();
    expect(call('min', set())).toBeUndefined();
  });

  it('compare big integers exactly', () => {
    expect(call('max', [9007199254740993n, 9007199254740992])).toBe(9007199254740993n);
  });
});

describe('deprecated any and all', () => {
  it('test for true members', () => {
    expect(call('all', [true, true])).toBe(true);
    expect(call('all', [])).toBe(true);
    expect(call('all', [true, 1])).toBe(false);
    expect(call('any', [false, true])).toBe(true);
    expect(call('any', set())).toBe(false);
    expect(call('any', set(true))).toBe(true);
    expect(failure('any', 1).message).toBe('any: operand 1 must be one of {array, set} but got number');
  });
});

describe('membership', () => {
  it('internal.member_2 looks at values', () => {
    expect(call('internal.member_2', 1, [1, 2])).toBe(true);
    expect(call('internal.member_2', 1.0, set(1))).toBe(true);
    expect(call('internal.member_2', 'v', { k: 'v' })).toBe(true);
    expect(call('internal.member_2', 'k', { k: 'v' })).toBe(false);
    expect(call('internal.member_2', 'a', 'abc')).toBe(false);
  });

  it('internal.member_3 looks at keys and values', () => {
    expect(call('internal.member_3', 0, 'a', ['a'])).toBe(true);
    expect(call('internal.member_3', 1, 'a', ['a'])).toBe(false);
    expect(call('internal.member_3', 'k', 'v', { k: 'v' })).toBe(true);
    expect(call('internal.member_3', 'x', 'x', set('x'))).toBe(true);
    expect(call('internal.member_3', 0.5, 'a', ['a'])).toBe(false);
  });
});
