// Arithmetic operators (under OPA's internal names plus/minus/mul/div/rem), rounding, ranges and rand.intn.
import { randomInt } from 'node:crypto';
import { SetValue, type Value } from '../value.js';
import {
  argBigInt,
  argNumber,
  argSmallInt,
  argString,
  type BuiltinTable,
  builtinError,
  typeError,
  typeErrorOneOf,
} from './api.js';
import { divDec, fromBig, fromDecimal, isIntegral, type Num, toBig, toDecimal } from './numeric.js';

/** Ranges longer than this are refused: one builtin call must not allocate without bound. */
export const MAX_RANGE_LENGTH = 1_000_000;

// Integers are exact (bigint beyond the safe range). Anything with a fraction is float64 arithmetic, as
// regorus computes it and as JSON numbers are read; an integral operand beyond the safe range is first
// rounded to float64 in that case.
function float(n: Num): number {
  return typeof n === 'bigint' ? Number(n) : n;
}

function floatResult(name: string, r: number): Num {
  if (!Number.isFinite(r)) throw builtinError(name, 'number out of range');
  return Object.is(r, -0) ? 0 : r;
}

export function add(name: string, a: Num, b: Num): Num {
  if (typeof a === 'number' && typeof b === 'number') {
    const r = a + b;
    if (Number.isSafeInteger(r) || !Number.isInteger(a) || !Number.isInteger(b)) return floatResult(name, r);
  }
  if (isIntegral(a) && isIntegral(b)) return fromBig(name, toBig(a) + toBig(b));
  return floatResult(name, float(a) + float(b));
}

export function sub(name: string, a: Num, b: Num): Num {
  if (typeof a === 'number' && typeof b === 'number') {
    const r = a - b;
    if (Number.isSafeInteger(r) || !Number.isInteger(a) || !Number.isInteger(b)) return floatResult(name, r);
  }
  if (isIntegral(a) && isIntegral(b)) return fromBig(name, toBig(a) - toBig(b));
  return floatResult(name, float(a) - float(b));
}

export function mul(name: string, a: Num, b: Num): Num {
  if (typeof a === 'number' && typeof b === 'number') {
    const r = a * b;
    if (Number.isSafeInteger(r) || !Number.isInteger(a) || !Number.isInteger(b)) return floatResult(name, r);
  }
  if (isIntegral(a) && isIntegral(b)) return fromBig(name, toBig(a) * toBig(b));
  return floatResult(name, float(a) * float(b));
}

function isZero(n: Num): boolean {
  return n === 0 || n === 0n;
}

export function div(name: string, a: Num, b: Num): Num {
  if (isZero(b)) throw builtinError(name, 'divide by zero');
  if (isIntegral(a) && isIntegral(b)) {
    const x = toBig(a);
    const y = toBig(b);
    if (x % y === 0n) return fromBig(name, x / y);
    // A non-exact quotient of big integers is rounded once, from the exact decimal quotient.
    if (typeof a === 'bigint' || typeof b === 'bigint')
      return fromDecimal(name, divDec(toDecimal(a), toDecimal(b)));
  }
  return floatResult(name, float(a) / float(b));
}

export function rem(name: string, a: Num, b: Num): Num {
  if (!isIntegral(a) || !isIntegral(b)) throw builtinError(name, 'modulo on floating-point number');
  if (isZero(b)) throw builtinError(name, 'modulo by zero');
  if (typeof a === 'number' && typeof b === 'number' && Number.isSafeInteger(a) && Number.isSafeInteger(b)) {
    const r = a % b;
    return Object.is(r, -0) ? 0 : r;
  }
  return fromBig(name, toBig(a) % toBig(b));
}

function binary(name: string, op: (name: string, a: Num, b: Num) => Num) {
  return {
    arity: 2,
    fn: (args: readonly Value[]) => op(name, argNumber(name, args, 0), argNumber(name, args, 1)),
  };
}

function roundHalfAway(x: number): number {
  const t = Math.trunc(x);
  const frac = x - t; // exact for float64
  if (frac >= 0.5) return t + 1;
  if (frac <= -0.5) return t - 1;
  return t === 0 ? 0 : t;
}

function unary(name: string, f: (x: number) => number, big: (x: bigint) => bigint) {
  return {
    arity: 1,
    fn: (args: readonly Value[]) => {
      const x = argNumber(name, args, 0);
      if (typeof x === 'bigint') return fromBig(name, big(x));
      const r = f(x);
      return Object.is(r, -0) ? 0 : r;
    },
  };
}

function range(name: string, from: bigint, to: bigint, step: bigint): Value {
  const span = from <= to ? to - from : from - to;
  if (span / step + 1n > BigInt(MAX_RANGE_LENGTH)) {
    throw builtinError(name, `range has more than ${MAX_RANGE_LENGTH} elements`);
  }
  const out: Value[] = [];
  if (from <= to) for (let i = from; i <= to; i += step) out.push(fromBig(name, i));
  else for (let i = from; i >= to; i -= step) out.push(fromBig(name, i));
  return out;
}

export const numberBuiltins: BuiltinTable = {
  plus: binary('plus', add),
  mul: binary('mul', mul),
  div: binary('div', div),
  rem: binary('rem', rem),
  minus: {
    arity: 2,
    fn: ([a = null, b = null]) => {
      const an = typeof a === 'number' || typeof a === 'bigint';
      const bn = typeof b === 'number' || typeof b === 'bigint';
      if (an && bn) return sub('minus', a, b);
      if (a instanceof SetValue && b instanceof SetValue) {
        const out = new SetValue();
        for (const [k, v] of a.items) if (!b.items.has(k)) out.add(v);
        return out;
      }
      if (!an && !(a instanceof SetValue)) throw typeErrorOneOf('minus', 1, ['number', 'set'], a);
      if (bn) throw typeError('minus', 2, 'set', b);
      throw typeError('minus', 2, 'number', b);
    },
  },
  abs: unary('abs', Math.abs, (x) => (x < 0n ? -x : x)),
  round: unary('round', roundHalfAway, (x) => x),
  ceil: unary('ceil', Math.ceil, (x) => x),
  floor: unary('floor', Math.floor, (x) => x),
  'numbers.range': {
    arity: 2,
    fn: (args) => {
      const a = argBigInt('numbers.range', args, 0);
      const b = argBigInt('numbers.range', args, 1);
      return range('numbers.range', a, b, 1n);
    },
  },
  'numbers.range_step': {
    arity: 3,
    fn: (args) => {
      const name = 'numbers.range_step';
      const a = argBigInt(name, args, 0);
      const b = argBigInt(name, args, 1);
      const step = argBigInt(name, args, 2);
      if (step <= 0n) throw builtinError(name, 'step must be a positive integer');
      return range(name, a, b, step);
    },
  },
  'rand.intn': {
    arity: 2,
    nondeterministic: true,
    fn: (args, ctx) => {
      const str = argString('rand.intn', args, 0);
      let n = argSmallInt('rand.intn', args, 1);
      if (n === 0) return 0;
      if (n < 0) n = -n;
      // OPA caches per query on (string, n), so repeated calls in one query agree.
      const key = `rand.intn\u0000${str}\u0000${n}`;
      const cached = ctx.cache.get(key);
      if (typeof cached === 'number') return cached;
      const r = n <= 2 ** 48 - 1 ? randomInt(n) : Math.floor(Math.random() * n);
      ctx.cache.set(key, r);
      return r;
    },
  },
};
