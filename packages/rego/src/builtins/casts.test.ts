import { describe, expect, it } from 'vitest';
import { call, failure, set, show } from './testkit.js';

describe('to_number', () => {
  it('converts null, booleans, numbers and number strings', () => {
    expect(call('to_number', null)).toBe(0);
    expect(call('to_number', true)).toBe(1);
    expect(call('to_number', false)).toBe(0);
    expect(call('to_number', 1.5)).toBe(1.5);
    expect(call('to_number', '3')).toBe(3);
    expect(call('to_number', '-3.5')).toBe(-3.5);
    expect(call('to_number', '+5')).toBe(5);
    expect(call('to_number', '.5')).toBe(0.5);
    expect(call('to_number', '5.')).toBe(5);
    expect(call('to_number', '-1e3')).toBe(-1000);
    expect(call('to_number', '1.0')).toBe(1);
    expect(call('to_number', '12345678901234567890')).toBe(12345678901234567890n);
    expect(call('to_number', '1e30')).toBe(10n ** 30n);
    expect(call('to_number', '0x1p-2')).toBe(0.25);
    expect(call('to_number', '0x1.8p1')).toBe(3);
  });

  it('rejects what strconv.ParseFloat rejects', () => {
    expect(failure('to_number', ' 1').message).toBe(
      'to_number: strconv.ParseFloat: parsing " 1": invalid syntax',
    );
    expect(failure('to_number', '0x10').message).toBe(
      'to_number: strconv.ParseFloat: parsing "0x10": invalid syntax',
    );
    expect(failure('to_number', '1_000').code).toBe('eval_builtin_error');
    expect(failure('to_number', '').message).toBe(
      'to_number: strconv.ParseFloat: parsing "": invalid syntax',
    );
    expect(failure('to_number', '1e400').message).toBe(
      'to_number: strconv.ParseFloat: parsing "1e400": value out of range',
    );
  });

  it('rejects infinities and NaN as type errors', () => {
    for (const s of ['nan', 'inf', '-inf', 'Infinity', '-Infinity', '-NaN', 'iNf', '+inf']) {
      const e = failure('to_number', s);
      expect(e.code).toBe('eval_type_error');
      expect(e.message).toBe('to_number: operand 1 must be valid number string but got string');
    }
  });

  it('rejects composite values', () => {
    expect(failure('to_number', []).message).toBe(
      'to_number: operand 1 must be one of {null, boolean, number, string} but got array',
    );
  });
});

describe('deprecated casts', () => {
  it('pass through the right type, fail otherwise', () => {
    expect(show(call('cast_array', set(2, 1)))).toBe('[1, 2]');
    expect(show(call('cast_set', [1, 1, 2]))).toBe('{1, 2}');
    expect(call('cast_string', 'a')).toBe('a');
    expect(call('cast_boolean', true)).toBe(true);
    expect(call('cast_null', null)).toBeNull();
    expect(show(call('cast_object', { a: 1 }))).toBe('{"a": 1}');
    expect(failure('cast_string', 1).message).toBe('cast_string: operand 1 must be string but got number');
    expect(failure('cast_array', 'a').message).toBe(
      'cast_array: operand 1 must be one of {array, set} but got string',
    );
  });
});
