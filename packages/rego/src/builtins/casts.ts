// to_number and the deprecated cast_* builtins.
import { ObjectValue, SetValue } from '../value.js';
import { type BuiltinTable, builtinError, typeError, typeErrorOneOf } from './api.js';
import { fromDecimalText } from './numeric.js';
import { goQuote } from './text.js';

// Go's strconv.ParseFloat syntax for decimal numbers (no underscores without a base prefix).
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
// Hexadecimal floats need a p exponent.
const HEX_FLOAT =
  /^([+-]?)0[xX](_?[0-9a-fA-F](?:_?[0-9a-fA-F])*\.?(?:[0-9a-fA-F](?:_?[0-9a-fA-F])*)?|\.[0-9a-fA-F](?:_?[0-9a-fA-F])*)[pP]([+-]?\d+)$/;

function parseFloatError(s: string, why: string): Error {
  return builtinError('to_number', `strconv.ParseFloat: parsing ${goQuote(s)}: ${why}`);
}

function hexFloat(s: string, m: RegExpExecArray): number {
  const body = m[2]!.replaceAll('_', '');
  const [intPart = '', frac = ''] = body.split('.');
  let v = 0;
  for (const d of intPart + frac) v = v * 16 + Number.parseInt(d, 16);
  const r = v * 2 ** (Number(m[3]) - 4 * frac.length);
  if (!Number.isFinite(r)) throw parseFloatError(s, 'value out of range');
  return m[1] === '-' ? -r : r;
}

export const castBuiltins: BuiltinTable = {
  to_number: {
    arity: 1,
    fn: ([v = null]) => {
      if (v === null) return 0;
      if (typeof v === 'boolean') return v ? 1 : 0;
      if (typeof v === 'number' || typeof v === 'bigint') return v;
      if (typeof v === 'string') {
        const word = v.replace(/^[+-]+/, '').toLowerCase();
        if (word === 'inf' || word === 'infinity' || word === 'nan') {
          throw typeError('to_number', 1, 'valid number string', v);
        }
        if (DECIMAL.test(v)) {
          const f = Number(v);
          if (!Number.isFinite(f)) throw parseFloatError(v, 'value out of range');
          return fromDecimalText(v);
        }
        const hex = HEX_FLOAT.exec(v);
        if (hex !== null) return hexFloat(v, hex);
        throw parseFloatError(v, 'invalid syntax');
      }
      throw typeErrorOneOf('to_number', 1, ['null', 'boolean', 'number', 'string'], v);
    },
  },
  // Deprecated (v0 only) casts.
  cast_array: {
    arity: 1,
    fn: ([v = null]) => {
      if (Array.isArray(v)) return v;
      if (v instanceof SetValue) return [...v.sorted()];
      throw typeErrorOneOf('cast_array', 1, ['array', 'set'], v);
    },
  },
  cast_set: {
    arity: 1,
    fn: ([v = null]) => {
      if (Array.isArray(v)) return SetValue.of(v);
      if (v instanceof SetValue) return v;
      throw typeErrorOneOf('cast_set', 1, ['array', 'set'], v);
    },
  },
  cast_string: {
    arity: 1,
    fn: ([v = null]) => {
      if (typeof v === 'string') return v;
      throw typeError('cast_string', 1, 'string', v);
    },
  },
  cast_boolean: {
    arity: 1,
    fn: ([v = null]) => {
      if (typeof v === 'boolean') return v;
      throw typeError('cast_boolean', 1, 'boolean', v);
    },
  },
  cast_null: {
    arity: 1,
    fn: ([v = null]) => {
      if (v === null) return null;
      throw typeError('cast_null', 1, 'null', v);
    },
  },
  cast_object: {
    arity: 1,
    fn: ([v = null]) => {
      if (v instanceof ObjectValue) return v;
      throw typeError('cast_object', 1, 'object', v);
    },
  },
};
