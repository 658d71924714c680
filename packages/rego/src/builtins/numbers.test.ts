import { describe, expect, it } from 'vitest';
import { call, callIn, failure, set, show, testContext } from './testkit.js';

describe('arithmetic operators', () => {
  it('adds, subtracts and multiplies small integers as numbers', () => {
    expect(call('plus', 2, 3)).toBe(5);
    expect(call('minus', 2, 3)).toBe(-1);
    expect(call('mul', 6, 7)).toBe(42);
  });

  it('keeps integers exact beyond the safe range', () => {
    expect(call('plus', 9007199254740991, 2)).toBe(9007199254740993n);
    expect(call('plus', 2147483647, 1)).toBe(2147483648);
    expect(call('mul', 2147483647, 2147483647)).toBe(4611686014132420609n);
    expect(call('plus', 9223372036854775807n, 1)).toBe(9223372036854775808n);
    expect(call('plus', 123456789012345678901234567890n, 1)).toBe(123456789012345678901234567891n);
    expect(call('minus', -18446744073709551617n, 1)).toBe(-18446744073709551618n);
    expect(call('mul', 18446744073709551617n, 2)).toBe(36893488147419103234n);
  });

  it('returns to plain numbers when a big result is back in the safe range', () => {
    const r = call('minus', 9007199254740993n, 2);
    expect(r).toBe(9007199254740991);
    expect(typeof r).toBe('number');
  });

  it('computes decimals in float64, as regorus does', () => {
    expect(call('plus', 0.1, 0.2)).toBe(0.30000000000000004);
    expect(call('plus', 1.5, 2.5)).toBe(4);
    expect(call('plus', 1, 2.5)).toBe(3.5);
    expect(call('mul', 2.5, 2)).toBe(5);
    expect(call('div', 15.3, 3)).toBe(5.1000000000000005);
  });

  it('divides exactly when the divisor divides the dividend', () => {
    expect(call('div', 6, 3)).toBe(2);
    expect(call('div', -6, 3)).toBe(-2);
    expect(call('div', 1, 4)).toBe(0.25);
    expect(call('div', 0, 5)).toBe(0);
    expect(call('div', 36893488147419103234n, 2)).toBe(18446744073709551617n);
    expect(call('div', 13, 4)).toBe(3.25);
  });

  it('rejects division by zero in any form', () => {
    const e = failure('div', 1, 0);
    expect(e.code).toBe('eval_builtin_error');
    expect(e.message).toBe('div: divide by zero');
    expect(failure('div', 1, 0.0).message).toBe('div: divide by zero');
  });

  it('takes the remainder with the sign of the dividend, on integers only', () => {
    expect(call('rem', -17, 5)).toBe(-2);
    expect(call('rem', 17, -5)).toBe(2);
    expect(call('rem', 4.0, 3)).toBe(1);
    expect(call('rem', 10, 18446744073709551616n)).toBe(10);
    expect(call('rem', 18446744073709551617n, 18446744073709551616n)).toBe(1);
    expect(call('rem', 7, 340282366920938463463374607431768211456n)).toBe(7);
    expect(failure('rem', 1.5, 2).message).toBe('rem: modulo on floating-point number');
    expect(failure('rem', 5, 0).message).toBe('rem: modulo by zero');
    expect(failure('rem', 5, 0).code).toBe('eval_builtin_error');
  });

  it('reports operand types with OPA wording', () => {
    const e = failure('plus', 'a', 1);
    expect(e.code).toBe('eval_type_error');
    expect(e.message).toBe('plus: operand 1 must be number but got string');
    expect(failure('mul', 1, null).message).toBe('mul: operand 2 must be number but got null');
  });

  it('minus is also set difference, with OPA type errors for mixes', () => {
    expect(show(call('minus', set(1, 2, 3), set(2)))).toBe('{1, 3}');
    expect(failure('minus', 'a', set()).message).toBe(
      'minus: operand 1 must be one of {number, set} but got string',
    );
    expect(failure('minus', 1, set()).message).toBe('minus: operand 2 must be number but got set');
    expect(failure('minus', set(), 1).message).toBe('minus: operand 2 must be set but got number');
  });

  it('refuses integers that would grow without bound', () => {
    const huge = 2n ** 60000n;
    expect(failure('mul', huge, huge).message).toBe('mul: integer result too large');
  });
});

describe('rounding', () => {
  it('abs, round, ceil and floor', () => {
    expect(call('abs', -5)).toBe(5);
    expect(call('abs', -9223372036854775808n)).toBe(9223372036854775808n);
    expect(call('abs', -2.5)).toBe(2.5);
    expect(call('round', 2.5)).toBe(3);
    expect(call('round', -2.5)).toBe(-3);
    expect(call('round', 2.4)).toBe(2);
    expect(call('round', 0.49999999999999994)).toBe(0);
    expect(call('round', -0.4)).toBe(0);
    expect(Object.is(call('round', -0.4), -0)).toBe(false);
    expect(call('ceil', 1.2)).toBe(2);
    expect(call('ceil', -1.2)).toBe(-1);
    expect(Object.is(call('ceil', -0.5), -0)).toBe(false);
    expect(call('floor', -1.2)).toBe(-2);
    expect(call('floor', 12345678901234567890n)).toBe(12345678901234567890n);
  });
});

describe('numbers.range', () => {
  it('counts up or down, inclusive', () => {
    expect(show(call('numbers.range', 1, 4))).toBe('[1, 2, 3, 4]');
    expect(show(call('numbers.range', 2, -1))).toBe('[2, 1, 0, -1]');
    expect(show(call('numbers.range_step', 0, 10, 3))).toBe('[0, 3, 6, 9]');
    expect(show(call('numbers.range_step', 10, 0, 4))).toBe('[10, 6, 2]');
  });

  it('rejects non-integers and bad steps', () => {
    expect(failure('numbers.range', 1.5, 3).message).toBe(
      'numbers.range: operand 1 must be integer number but got floating-point number',
    );
    expect(failure('numbers.range', 'a', 3).message).toBe(
      'numbers.range: operand 1 must be integer but got string',
    );
    expect(failure('numbers.range_step', 1, 3, 0).message).toBe(
      'numbers.range_step: step must be a positive integer',
    );
  });

  it('bounds the size of a range', () => {
    expect(failure('numbers.range', 0, 1e12).code).toBe('eval_builtin_error');
  });
});

describe('rand.intn', () => {
  it('is stable for the same arguments within a query', () => {
    const ctx = testContext();
    const a = callIn(ctx, 'rand.intn', 'k', 1000);
    expect(callIn(ctx, 'rand.intn', 'k', 1000)).toBe(a);
    expect(callIn(ctx, 'rand.intn', 'k', -1000)).toBe(a);
    expect(a).toBeGreaterThanOrEqual(0);
    expect(a).toBeLessThan(1000);
    expect(call('rand.intn', 'k', 0)).toBe(0);
  });

  it('wants an integer bound', () => {
    expect(failure('rand.intn', 'k', 1.5).message).toBe(
      'rand.intn: operand 2 must be integer number but got floating-point number',
    );
  });
});
