// units.parse (SI and binary suffixes, milli) and units.parse_bytes, computed exactly.
import { argString, type BuiltinTable, builtinError } from './api.js';
import { type Decimal, fromBig, fromDecimal, mulDec } from './numeric.js';

const MAX_EXPONENT_DIGITS = 6;

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

/** Splits "10.5Mi" into "10.5" and "Mi"; scientific notation stays in the number. */
function splitNumUnit(name: string, s: string): [string, string] {
  let first = -1;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (!isDigit(c) && c !== '.' && c !== 'e' && c !== 'E' && c !== '+' && c !== '-') {
      first = i;
      break;
    }
    if (c === 'e' || c === 'E') {
      const next = s[i + 1];
      if (i === s.length - 1 || (!isDigit(next) && next !== '+' && next !== '-')) {
        first = i;
        break;
      }
      if (next === '+' || next === '-') i++;
      let end = i + 1;
      while (end < s.length && isDigit(s[end])) end++;
      if (end - (i + 1) > MAX_EXPONENT_DIGITS) throw builtinError(name, 'exponent too large');
    }
  }
  if (first === -1) return [s, ''];
  if (first === 0) return ['', s];
  return [s.slice(0, first), s.slice(first)];
}

const NUMBER = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

/** An exact decimal from big.Float/big.Rat SetString syntax, or undefined. */
function parseDecimal(s: string): Decimal | undefined {
  const m = NUMBER.exec(s);
  if (m === null) return undefined;
  const int = m[2] ?? '';
  const frac = m[3] ?? '';
  if (int === '' && frac === '') return undefined;
  const mant = BigInt(`${int}${frac}`);
  return { m: m[1] === '-' ? -mant : mant, e: Number(m[4] ?? '0') - frac.length };
}

const K = 1000n;
const SI: Record<string, bigint> = { k: K, m: K ** 2n, g: K ** 3n, t: K ** 4n, p: K ** 5n, e: K ** 6n };
const BIN: Record<string, bigint> = {
  ki: 1n << 10n,
  mi: 1n << 20n,
  gi: 1n << 30n,
  ti: 1n << 40n,
  pi: 1n << 50n,
  ei: 1n << 60n,
};

function roundTo10(d: Decimal): Decimal {
  // big.Rat.FloatString(10): ten decimals, halves rounded away from zero.
  if (d.e >= -10) return d;
  const drop = 10n ** BigInt(-10 - d.e);
  const neg = d.m < 0n;
  const abs = neg ? -d.m : d.m;
  let q = abs / drop;
  if ((abs % drop) * 2n >= drop) q++;
  return { m: neg ? -q : q, e: -10 };
}

export const unitBuiltins: BuiltinTable = {
  'units.parse': {
    arity: 1,
    fn: (args) => {
      const name = 'units.parse';
      const s = argString(name, args, 0).replaceAll('"', '');
      if (s.includes(' ')) throw builtinError(name, 'spaces not allowed in resource strings');
      let [num, unit] = splitNumUnit(name, s);
      if (num === '') throw builtinError(name, 'no amount provided');
      // Only the first letter keeps its case, so that m (milli) and M (mega) differ.
      if (unit.length > 1) unit = unit[0] + unit.slice(1).toLowerCase();
      let factor: Decimal;
      if (unit === 'm') factor = { m: 1n, e: -3 };
      else if (unit === '') factor = { m: 1n, e: 0 };
      else if (unit === 'M') factor = { m: SI.m!, e: 0 };
      else if (unit.length === 1 && unit !== 'M' && SI[unit.toLowerCase()] !== undefined) {
        factor = { m: SI[unit.toLowerCase()]!, e: 0 };
      } else if (unit.length === 2 && BIN[unit.toLowerCase()] !== undefined) {
        factor = { m: BIN[unit.toLowerCase()]!, e: 0 };
      } else {
        throw builtinError(name, `unit ${unit} not recognized`);
      }
      const n = parseDecimal(num);
      if (n === undefined) throw builtinError(name, 'could not parse amount to a number');
      return fromDecimal(name, roundTo10(mulDec(n, factor)));
    },
  },
  'units.parse_bytes': {
    arity: 1,
    fn: (args) => {
      const name = 'units.parse_bytes';
      const s = argString(name, args, 0).toLowerCase().replaceAll('"', '');
      if (s.includes(' ')) throw builtinError(name, 'spaces not allowed in resource strings');
      const [num, unit] = splitNumUnit(name, s);
      if (num === '') throw builtinError(name, 'no byte amount provided');
      let factor: bigint | undefined;
      if (unit === '') factor = 1n;
      else {
        const u = unit.endsWith('b') && unit.length > 1 ? unit.slice(0, -1) : unit;
        if (unit.length <= 3) factor = u.endsWith('i') ? BIN[u] : SI[u];
        if (unit === 'b') factor = undefined;
      }
      if (factor === undefined) throw builtinError(name, `byte unit ${unit} not recognized`);
      const n = parseDecimal(num);
      if (n === undefined) throw builtinError(name, 'could not parse byte amount to a number');
      const d = mulDec(n, { m: factor, e: 0 });
      // Truncated toward zero, as big.Float.Int does.
      if (d.e >= 0) return fromDecimal(name, d);
      return fromBig(name, d.m / 10n ** BigInt(-d.e));
    },
  },
};
