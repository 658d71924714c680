// Number helpers shared by the builtins: integers (safe `number`s, integral float64s beyond the safe
// range, and bigints) are handled exactly with bigint; decimals are exact on their shortest decimal
// representation where a builtin needs that (units, to_number, big-integer quotients) and rounded once.
import { normalizeInt } from '../value.js';
import { BuiltinError } from './api.js';

export type Num = number | bigint;

/** Integers beyond this many bits are refused, so that repeated squaring cannot exhaust memory. */
export const MAX_INT_BITS = 65536;

export function isIntegral(n: Num): boolean {
  return typeof n === 'bigint' || Number.isInteger(n);
}

/** An integral number as a bigint (callers check isIntegral first). */
export function toBig(n: Num): bigint {
  return typeof n === 'bigint' ? n : BigInt(n);
}

export function fromBig(name: string, n: bigint): Num {
  const abs = n < 0n ? -n : n;
  if (abs > 0xffffffffn && abs.toString(16).length * 4 > MAX_INT_BITS) {
    throw new BuiltinError('eval_builtin_error', `${name}: integer result too large`);
  }
  return normalizeInt(n);
}

/** A decimal as mantissa × 10^exp. */
export interface Decimal {
  readonly m: bigint;
  readonly e: number;
}

export function toDecimal(n: Num): Decimal {
  if (typeof n === 'bigint') return { m: n, e: 0 };
  // JS prints the shortest string that round-trips, e.g. "0.1", "1e-7", "1.5e+300".
  const s = String(n);
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(s);
  if (match === null) throw new BuiltinError('eval_builtin_error', `not a finite number: ${s}`);
  const frac = match[3] ?? '';
  const m = BigInt(`${match[1]}${match[2]}${frac}`);
  return { m, e: Number(match[4] ?? '0') - frac.length };
}

function align(a: Decimal, b: Decimal): [bigint, bigint, number] {
  if (a.e === b.e) return [a.m, b.m, a.e];
  if (a.e > b.e) return [a.m * 10n ** BigInt(a.e - b.e), b.m, b.e];
  return [a.m, b.m * 10n ** BigInt(b.e - a.e), a.e];
}

/** Rounds a decimal to a Rego number: exact when integral, else the nearest float64. */
export function fromDecimal(name: string, d: Decimal): Num {
  if (d.m === 0n) return 0;
  if (d.e >= 0) {
    // Check the size before computing 10^e, which could otherwise be enormous.
    const digits = (d.m < 0n ? -d.m : d.m).toString().length + d.e;
    if (digits * 3.33 > MAX_INT_BITS)
      throw new BuiltinError('eval_builtin_error', `${name}: integer result too large`);
    return fromBig(name, d.m * 10n ** BigInt(d.e));
  }
  let m = d.m;
  let e = d.e;
  while (e < 0 && m % 10n === 0n) {
    m /= 10n;
    e++;
  }
  if (e === 0) return fromBig(name, m);
  return Number(`${m}e${e}`);
}

export function addDec(a: Decimal, b: Decimal): Decimal {
  const [x, y, e] = align(a, b);
  return { m: x + y, e };
}

export function mulDec(a: Decimal, b: Decimal): Decimal {
  return { m: a.m * b.m, e: a.e + b.e };
}

/** Quotient to about 40 significant digits, more than float64 can hold. */
export function divDec(a: Decimal, b: Decimal): Decimal {
  const digits = 40;
  const bDigits = (b.m < 0n ? -b.m : b.m).toString().length;
  const aDigits = (a.m < 0n ? -a.m : a.m).toString().length;
  const shift = Math.max(0, digits + bDigits - aDigits);
  const q = (a.m * 10n ** BigInt(shift)) / b.m;
  return { m: q, e: a.e - b.e - shift };
}

export function cmpNum(a: Num, b: Num): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A number from decimal text (JSON or Go float syntax already checked): exact when integral. */
export function fromDecimalText(text: string): Num {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (m === null) throw new BuiltinError('eval_builtin_error', `invalid number: ${text}`);
  const intPart = m[2] ?? '';
  const frac = m[3] ?? '';
  const exp = Number(m[4] ?? '0');
  if (frac === '' && exp === 0) {
    if (intPart.length <= 15) return (m[1] === '-' ? -1 : 1) * Number(intPart) || 0;
    return normalizeInt(BigInt(`${m[1]}${intPart}`));
  }
  let digits = `${intPart}${frac}`.replace(/^0+/, '');
  let e = exp - frac.length;
  if (digits === '') return 0;
  const trailing = /0*$/.exec(digits)![0].length;
  digits = digits.slice(0, digits.length - trailing);
  e += trailing;
  // An integral value with a modest exponent stays exact; anything else is the nearest float64.
  if (e >= 0 && e + digits.length <= 400) return normalizeInt(BigInt(`${m[1]}${digits}${'0'.repeat(e)}`));
  const f = Number(text);
  if (!Number.isFinite(f)) throw new BuiltinError('eval_builtin_error', `number out of range: ${text}`);
  return Object.is(f, -0) ? 0 : f;
}
