// Bitwise builtins on integers of any size (two's complement semantics, as Go's big.Int).
import type { Value } from '../value.js';
import { argBigInt, argInt, type BuiltinTable, builtinError, operandError } from './api.js';
import { fromBig, MAX_INT_BITS } from './numeric.js';

function binary(name: string, op: (a: bigint, b: bigint) => bigint) {
  return {
    arity: 2,
    fn: (args: readonly Value[]) => fromBig(name, op(argBigInt(name, args, 0), argBigInt(name, args, 1))),
  };
}

function shiftAmount(name: string, args: readonly Value[]): number {
  const s = argInt(name, args, 1);
  if (s < 0n) throw operandError(name, 2, 'must be an unsigned integer number but got a negative integer');
  return s > BigInt(MAX_INT_BITS) * 2n ? MAX_INT_BITS * 2 : Number(s);
}

export const bitBuiltins: BuiltinTable = {
  'bits.and': binary('bits.and', (a, b) => a & b),
  'bits.or': binary('bits.or', (a, b) => a | b),
  'bits.xor': binary('bits.xor', (a, b) => a ^ b),
  'bits.negate': {
    arity: 1,
    fn: (args) => fromBig('bits.negate', ~argBigInt('bits.negate', args, 0)),
  },
  'bits.lsh': {
    arity: 2,
    fn: (args) => {
      const x = argBigInt('bits.lsh', args, 0);
      const s = shiftAmount('bits.lsh', args);
      if (x === 0n) return 0;
      // Refuse before allocating: the result would exceed the integer size bound.
      const bits = (x < 0n ? -x : x).toString(2).length;
      if (bits + s > MAX_INT_BITS) throw builtinError('bits.lsh', 'integer result too large');
      return fromBig('bits.lsh', x << BigInt(s));
    },
  },
  'bits.rsh': {
    arity: 2,
    fn: (args) => {
      const x = argBigInt('bits.rsh', args, 0);
      const s = shiftAmount('bits.rsh', args);
      return fromBig('bits.rsh', x >> BigInt(s));
    },
  },
};
