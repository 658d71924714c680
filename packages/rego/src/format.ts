// Text forms of values: the `print` form (regorus' format) and JSON number formatting without exponents.
import { ObjectValue, SetValue, type Value } from './value.js';

/** Formats a float the way Rust's `f64` Display does: shortest round-trip digits, never an exponent. */
export function plainNumber(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (Object.is(n, -0)) return '0';
  const s = String(n);
  const e = s.indexOf('e');
  if (e < 0) return s;
  const mant = s.slice(0, e);
  const exp = Number(s.slice(e + 1));
  const neg = mant.startsWith('-');
  const digitsWithDot = neg ? mant.slice(1) : mant;
  const dot = digitsWithDot.indexOf('.');
  const intPart = dot < 0 ? digitsWithDot : digitsWithDot.slice(0, dot);
  const frac = dot < 0 ? '' : digitsWithDot.slice(dot + 1);
  const digits = intPart + frac;
  const pointPos = intPart.length + exp;
  let out: string;
  if (pointPos <= 0) out = `0.${'0'.repeat(-pointPos)}${digits}`;
  else if (pointPos >= digits.length) out = digits + '0'.repeat(pointPos - digits.length);
  else out = `${digits.slice(0, pointPos)}.${digits.slice(pointPos)}`;
  return neg ? `-${out}` : out;
}

function scalarJSON(v: Value): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
      return plainNumber(v);
    case 'bigint':
      return v.toString();
    case 'string':
      return JSON.stringify(v);
  }
  return '';
}

/** The form `print` uses for a non-string argument: JSON-like with `", "` and `": "` separators. */
export function printable(v: Value): string {
  const parts: string[] = [];
  printInto(v, parts);
  return parts.join('');
}

function printInto(v: Value, out: string[]): void {
  if (Array.isArray(v)) {
    out.push('[');
    for (let i = 0; i < v.length; i++) {
      if (i > 0) out.push(', ');
      printInto(v[i]!, out);
    }
    out.push(']');
    return;
  }
  if (v instanceof SetValue) {
    out.push('{');
    const items = v.sorted();
    for (let i = 0; i < items.length; i++) {
      if (i > 0) out.push(', ');
      printInto(items[i]!, out);
    }
    out.push('}');
    return;
  }
  if (v instanceof ObjectValue) {
    out.push('{');
    const entries = v.sortedEntries();
    for (let i = 0; i < entries.length; i++) {
      if (i > 0) out.push(', ');
      const [k, x] = entries[i]!;
      printInto(k, out);
      out.push(': ');
      printInto(x, out);
    }
    out.push('}');
    return;
  }
  out.push(scalarJSON(v));
}

/** Compact JSON of a value as regorus prints values in messages (sets as arrays, non-string keys encoded). */
export function jsonText(v: Value): string {
  if (Array.isArray(v)) return `[${v.map(jsonText).join(',')}]`;
  if (v instanceof SetValue) return `[${v.sorted().map(jsonText).join(',')}]`;
  if (v instanceof ObjectValue) {
    return `{${v
      .sortedEntries()
      .map(
        ([k, x]) =>
          `${typeof k === 'string' ? JSON.stringify(k) : JSON.stringify(jsonText(k))}:${jsonText(x)}`,
      )
      .join(',')}}`;
  }
  return scalarJSON(v);
}
