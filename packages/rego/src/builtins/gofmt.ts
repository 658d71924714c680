// Go's fmt.Sprintf, for the argument kinds OPA's sprintf passes: Go ints (integers in int64 range),
// *big.Int (larger integers), float64 (other numbers) and strings (strings, and every other value
// rendered as a Rego term).
import type { Value } from '../value.js';
import { goQuote, runeCount, runes, termString, utf8 } from './text.js';

export type GoArg =
  | { readonly kind: 'int'; readonly v: bigint }
  | { readonly kind: 'big'; readonly v: bigint }
  | { readonly kind: 'float'; readonly v: number }
  | { readonly kind: 'string'; readonly v: string };

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** How OPA's sprintf converts a Rego value into a Go argument. */
export function toGoArg(v: Value): GoArg {
  if (typeof v === 'bigint')
    return v >= INT64_MIN && v <= INT64_MAX ? { kind: 'int', v } : { kind: 'big', v };
  if (typeof v === 'number') {
    if (Number.isInteger(v)) {
      const b = BigInt(v);
      return b >= INT64_MIN && b <= INT64_MAX ? { kind: 'int', v: b } : { kind: 'big', v: b };
    }
    return { kind: 'float', v };
  }
  if (typeof v === 'string') return { kind: 'string', v };
  return { kind: 'string', v: termString(v) };
}

interface Spec {
  minus: boolean;
  plus: boolean;
  sharp: boolean;
  space: boolean;
  zero: boolean;
  width: number | undefined;
  prec: number | undefined;
}

const TYPE_NAME: Record<GoArg['kind'], string> = {
  int: 'int',
  big: '*big.Int',
  float: 'float64',
  string: 'string',
};

function pad(s: string, sp: Spec, zeroOk = true): string {
  if (sp.width === undefined) return s;
  const n = runeCount(s);
  if (n >= sp.width) return s;
  const fill = sp.width - n;
  if (sp.minus) return s + ' '.repeat(fill);
  if (sp.zero && zeroOk) {
    // Zero padding goes after a sign or base prefix.
    const m = /^([+\- ]?(?:0[xXbBoO])?)(.*)$/s.exec(s)!;
    return m[1] + '0'.repeat(fill) + m[2];
  }
  return ' '.repeat(fill) + s;
}

function formatInteger(v: bigint, verb: string, sp: Spec): string {
  const neg = v < 0n;
  const abs = neg ? -v : v;
  let digits: string;
  let prefix = '';
  switch (verb) {
    case 'b':
      digits = abs.toString(2);
      if (sp.sharp) prefix = '0b';
      break;
    case 'o':
      digits = abs.toString(8);
      if (sp.sharp) prefix = '0';
      break;
    case 'O':
      digits = abs.toString(8);
      prefix = '0o';
      break;
    case 'x':
      digits = abs.toString(16);
      if (sp.sharp) prefix = '0x';
      break;
    case 'X':
      digits = abs.toString(16).toUpperCase();
      if (sp.sharp) prefix = '0X';
      break;
    default:
      digits = abs.toString(10);
  }
  if (sp.prec !== undefined) {
    if (sp.prec === 0 && abs === 0n) digits = '';
    digits = digits.padStart(sp.prec, '0');
  }
  if (prefix === '0' && digits.startsWith('0')) prefix = '';
  const sign = neg ? '-' : sp.plus ? '+' : sp.space ? ' ' : '';
  // Go ignores the zero flag when a precision is given for integers.
  return pad(sign + prefix + digits, sp, sp.prec === undefined);
}

function expDigits(s: string): string {
  // JS writes e+6; Go writes e+06.
  return s.replace(/e([+-])(\d)$/, 'e$10$2');
}

/** strconv.FormatFloat(v, 'g', prec): %e for exponents < -4 or >= the precision (6 when shortest). */
function formatG(v: number, prec: number | undefined, upper: boolean, sharp: boolean): string {
  let s: string;
  if (prec === undefined) {
    const exp = v === 0 ? 0 : Number(/e([+-]\d+)$/.exec(v.toExponential())![1]);
    s = exp < -4 || exp >= 6 ? expDigits(v.toExponential()) : String(v);
  } else {
    const p = prec === 0 ? 1 : prec;
    const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(v.toExponential(p - 1))!;
    const exp = Number(m[4]);
    let frac = m[3] ?? '';
    if (!sharp) frac = frac.replace(/0+$/, '');
    const nd = 1 + frac.length;
    let eprec = p;
    if (eprec > nd && nd >= exp + 1) eprec = nd;
    if (exp < -4 || exp >= eprec) {
      s = expDigits(`${m[1]}${m[2]}${frac === '' ? '' : `.${frac}`}e${m[4]}`);
    } else {
      s = Math.abs(v).toFixed(Math.max(nd - exp - 1, 0));
      if (m[1] === '-') s = `-${s}`;
    }
  }
  if (Object.is(v, -0) && !s.startsWith('-')) s = `-${s}`;
  return upper ? s.toUpperCase() : s;
}

function formatFloat(v: number, verb: string, sp: Spec): string {
  let s: string;
  switch (verb) {
    case 'e':
    case 'E':
      s = expDigits(v.toExponential(sp.prec ?? 6));
      if (verb === 'E') s = s.toUpperCase();
      break;
    case 'f':
    case 'F':
      s = v.toFixed(Math.min(sp.prec ?? 6, 100));
      break;
    case 'g':
    case 'G':
      s = formatG(v, sp.prec, verb === 'G', sp.sharp);
      break;
    default: // 'v'
      s = formatG(v, sp.prec, false, sp.sharp);
  }
  if (!s.startsWith('-')) {
    if (sp.plus) s = `+${s}`;
    else if (sp.space) s = ` ${s}`;
  }
  return pad(s, sp);
}

function formatString(v: string, verb: string, sp: Spec): string {
  switch (verb) {
    case 'v':
    case 's': {
      const s = sp.prec !== undefined ? runes(v).slice(0, sp.prec).join('') : v;
      return pad(s, sp);
    }
    case 'q': {
      const s = sp.prec !== undefined ? runes(v).slice(0, sp.prec).join('') : v;
      if (sp.sharp && !/[`\x00-\x08\x0a-\x1f\x7f\ufeff]/.test(s)) return pad(`\`${s}\``, sp);
      return pad(goQuote(s, sp.plus), sp);
    }
    case 'x':
    case 'X': {
      let bytes = utf8(v);
      if (sp.prec !== undefined) bytes = bytes.slice(0, sp.prec);
      const parts = [...bytes].map((b) => {
        const h = b.toString(16).padStart(2, '0');
        return verb === 'X' ? h.toUpperCase() : h;
      });
      const pre = sp.sharp ? (verb === 'X' ? '0X' : '0x') : '';
      const s = sp.space ? parts.map((p) => pre + p).join(' ') : pre + parts.join('');
      return pad(s, sp);
    }
  }
  return badVerb(verb, { kind: 'string', v });
}

function plainV(a: GoArg): string {
  switch (a.kind) {
    case 'int':
    case 'big':
      return a.v.toString();
    case 'float':
      return formatG(a.v, undefined, false, false);
    case 'string':
      return a.v;
  }
}

function badVerb(verb: string, a: GoArg): string {
  // big.Int formats its own bad verbs, without the pointer star.
  const t = a.kind === 'big' ? 'big.Int' : TYPE_NAME[a.kind];
  return `%!${verb}(${t}=${plainV(a)})`;
}

function formatArg(a: GoArg, verb: string, sp: Spec): string {
  if (verb === 'T') return pad(TYPE_NAME[a.kind], sp);
  switch (a.kind) {
    case 'int':
      switch (verb) {
        case 'v':
        case 'd':
        case 'b':
        case 'o':
        case 'O':
        case 'x':
        case 'X':
          return formatInteger(a.v, verb, sp);
        case 'c':
          return pad(String.fromCodePoint(validRune(a.v)), sp);
        case 'q':
          return pad(goQuote(String.fromCodePoint(validRune(a.v)), sp.plus, "'"), sp);
        case 'U': {
          const r = a.v;
          let s = `U+${(r < 0n ? -r : r)
            .toString(16)
            .toUpperCase()
            .padStart(Math.max(4, sp.prec ?? 0), '0')}`;
          if (sp.sharp && r >= 0n && r <= 0x10ffffn) s += ` '${String.fromCodePoint(Number(r))}'`;
          return pad(s, sp);
        }
      }
      return badVerb(verb, a);
    case 'big':
      switch (verb) {
        case 'v':
        case 'd':
        case 's':
          return formatInteger(a.v, 'd', sp);
        case 'b':
        case 'o':
        case 'O':
        case 'x':
        case 'X':
          return formatInteger(a.v, verb, sp);
      }
      return badVerb(verb, a);
    case 'float':
      switch (verb) {
        case 'v':
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G':
          return formatFloat(a.v, verb, sp);
      }
      return badVerb(verb, a);
    case 'string':
      return formatString(a.v, verb, sp);
  }
}

function validRune(v: bigint): number {
  return v >= 0n && v <= 0x10ffffn && !(v >= 0xd800n && v <= 0xdfffn) ? Number(v) : 0xfffd;
}

/** Go's fmt.Sprintf. */
export function goSprintf(format: string, args: readonly GoArg[]): string {
  let out = '';
  let argi = 0;
  let i = 0;
  const n = format.length;
  while (i < n) {
    const pct = format.indexOf('%', i);
    if (pct < 0) {
      out += format.slice(i);
      break;
    }
    out += format.slice(i, pct);
    i = pct + 1;
    const sp: Spec = {
      minus: false,
      plus: false,
      sharp: false,
      space: false,
      zero: false,
      width: undefined,
      prec: undefined,
    };
    flags: while (i < n) {
      switch (format[i]) {
        case '-':
          sp.minus = true;
          sp.zero = false;
          break;
        case '+':
          sp.plus = true;
          break;
        case '#':
          sp.sharp = true;
          break;
        case ' ':
          sp.space = true;
          break;
        case '0':
          sp.zero = !sp.minus;
          break;
        default:
          break flags;
      }
      i++;
    }
    const num = (): number | undefined => {
      if (format[i] === '*') {
        i++;
        const a = args[argi++];
        if (a === undefined || a.kind !== 'int') {
          out += '%!(BADWIDTH)';
          return undefined;
        }
        return Number(a.v);
      }
      const start = i;
      while (i < n && format.charCodeAt(i) >= 48 && format.charCodeAt(i) <= 57) i++;
      return i > start ? Math.min(Number(format.slice(start, i)), 1_000_000) : undefined;
    };
    sp.width = num();
    if (sp.width !== undefined && sp.width < 0) {
      sp.minus = true;
      sp.width = -sp.width;
    }
    if (format[i] === '.') {
      i++;
      sp.prec = num() ?? 0;
    }
    if (i >= n) {
      out += '%!(NOVERB)';
      break;
    }
    const verb = String.fromCodePoint(format.codePointAt(i)!);
    i += verb.length;
    if (verb === '%') {
      out += '%';
      continue;
    }
    const a = args[argi];
    if (a === undefined) {
      out += `%!${verb}(MISSING)`;
      continue;
    }
    argi++;
    out += formatArg(a, verb, sp);
  }
  if (argi < args.length) {
    out += `%!(EXTRA ${args
      .slice(argi)
      .map((a) => `${TYPE_NAME[a.kind]}=${plainV(a)}`)
      .join(', ')})`;
  }
  return out;
}
