import { describe, expect, it } from 'vitest';
import { call, failure } from './testkit.js';

describe('bits', () => {
  it('computes on integers of any size, two-complement style', () => {
    expect(call('bits.and', 5, 3)).toBe(1);
    expect(call('bits.or', 5, 3)).toBe(7);
    expect(call('bits.xor', 42, 3)).toBe(41);
    expect(call('bits.negate', 42)).toBe(-43);
    expect(call('bits.negate', -1)).toBe(0);
    expect(call('bits.and', -1, 255)).toBe(255);
    expect(call('bits.lsh', 1, 3)).toBe(8);
    expect(call('bits.lsh', 2147483647, 1)).toBe(4294967294);
    expect(call('bits.lsh', 9223372036854775807n, 1)).toBe(18446744073709551614n);
    expect(call('bits.rsh', 8, 3)).toBe(1);
    expect(call('bits.rsh', -8, 1)).toBe(-4);
    expect(call('bits.rsh', 1, 1000000)).toBe(0);
    expect(call('bits.or', 2n ** 64n, 1)).toBe(2n ** 64n + 1n);
  });

  it('matches the kata policy use on capability masks', () => {
    const caps = 0x00000000a80425fb;
    expect(call('bits.and', caps, call('bits.negate', 1 << 5))).toBe(0xa80425db);
    expect(call('bits.or', 0, 1 << 21)).toBe(2097152);
  });

  it('reports operand errors as OPA', () => {
    expect(failure('bits.xor', 7.2, 42).message).toBe(
      'bits.xor: operand 1 must be integer number but got floating-point number',
    );
    expect(failure('bits.and', 'a', 1).message).toBe('bits.and: operand 1 must be integer but got string');
    expect(failure('bits.lsh', 7, -1).message).toBe(
      'bits.lsh: operand 2 must be an unsigned integer number but got a negative integer',
    );
    expect(failure('bits.lsh', 7, 'hi').message).toBe('bits.lsh: operand 2 must be number but got string');
  });

  it('refuses shifts that would exhaust memory', () => {
    expect(failure('bits.lsh', 1, 100000000).message).toBe('bits.lsh: integer result too large');
  });
});
