// Go's time package as OPA uses it: layouts for Parse and Format (reference time
// "Mon Jan 2 15:04:05 MST 2006"), ParseDuration, AddDate, and IANA zones (through Intl).
// Instants are nanoseconds since the Unix epoch as bigint, so nothing is lost at nanosecond precision.
import { goQuote } from './text.js';

export class GoTimeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GoTimeError';
  }
}

// ---- civil calendar (proleptic Gregorian) ----

export function daysFromCivil(y: number, m: number, d: number): number {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const mp = (m + 9) % 12;
  const doy = Math.floor((153 * mp + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

export function civilFromDays(z0: number): [number, number, number] {
  const z = z0 + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  return [yoe + era * 400 + (m <= 2 ? 1 : 0), m, d];
}

function isLeap(y: number): boolean {
  return y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
}

export function daysIn(m: number, y: number): number {
  if (m === 2) return isLeap(y) ? 29 : 28;
  return [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]!;
}

const NS = 1_000_000_000n;

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

// ---- zones ----

export interface Zone {
  readonly name: string;
  /** Offset east of UTC in seconds and abbreviation, at a UTC instant given in seconds. */
  at(utcSec: number): { offset: number; abbr: string };
}

export const UTC: Zone = { name: 'UTC', at: () => ({ offset: 0, abbr: 'UTC' }) };

export function fixedZone(offset: number, abbr: string): Zone {
  return { name: abbr, at: () => ({ offset, abbr }) };
}

const zones = new Map<string, Zone>();

function intlZone(tz: string | undefined): Zone {
  const options: Intl.DateTimeFormatOptions = {
    timeZone: tz,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
    era: 'short',
    timeZoneName: 'short',
  };
  const fmt = new Intl.DateTimeFormat('en-US', options);
  // en-US names US zones (EST, PDT); en-GB names European ones (CET, BST); other zones get "+01".
  let gb: Intl.DateTimeFormat | undefined;
  const name = fmt.resolvedOptions().timeZone;
  return {
    name,
    at(utcSec: number) {
      // Intl covers years -271821..275760; clamp beyond that (no zone has rules there anyway).
      const clamped = Math.max(-8.64e12, Math.min(8.64e12, utcSec));
      const date = new Date(clamped * 1000);
      const parts = fmt.formatToParts(date);
      const get = (t: string) => parts.find((p) => p.type === t)?.value ?? '';
      let year = Number(get('year'));
      if (get('era') === 'BC') year = 1 - year;
      const local =
        daysFromCivil(year, Number(get('month')), Number(get('day'))) * 86400 +
        Number(get('hour')) * 3600 +
        Number(get('minute')) * 60 +
        Number(get('second'));
      const offset = local - Math.floor(clamped);
      let abbr = get('timeZoneName');
      if (/^GMT[+-]/.test(abbr)) {
        gb ??= new Intl.DateTimeFormat('en-GB', options);
        abbr = gb.formatToParts(date).find((p) => p.type === 'timeZoneName')?.value ?? abbr;
      }
      if (/^(GMT|UTC)[+-]/.test(abbr)) abbr = formatOffsetAbbr(offset);
      return { offset, abbr };
    },
  };
}

// Go names zones without an abbreviation by their offset, e.g. "+01" or "-0330".
function formatOffsetAbbr(offset: number): string {
  const sign = offset < 0 ? '-' : '+';
  const a = Math.abs(offset);
  const h = String(Math.floor(a / 3600)).padStart(2, '0');
  const m = Math.floor((a % 3600) / 60);
  return m === 0 ? `${sign}${h}` : `${sign}${h}${String(m).padStart(2, '0')}`;
}

/** time.LoadLocation: "" and "UTC" are UTC, "Local" the process zone, anything else an IANA name. */
export function loadZone(name: string): Zone {
  if (name === '' || name === 'UTC') return UTC;
  const cached = zones.get(name);
  if (cached !== undefined) return cached;
  let z: Zone;
  if (name === 'Local') z = intlZone(undefined);
  else {
    if (!/^[A-Za-z0-9_+\-/]+$/.test(name) || name.includes('..'))
      throw new GoTimeError(`unknown time zone ${name}`);
    try {
      z = intlZone(name);
    } catch {
      throw new GoTimeError(`unknown time zone ${name}`);
    }
  }
  if (zones.size < 512) zones.set(name, z);
  return z;
}

// ---- broken-down time ----

export interface Civil {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  nanos: number;
  weekday: number;
  yday: number;
  offset: number;
  abbr: string;
}

export function toCivil(ns: bigint, zone: Zone): Civil {
  const secs = floorDiv(ns, NS);
  const nanos = Number(ns - secs * NS);
  const { offset, abbr } = zone.at(Number(secs));
  const local = Number(secs) + offset;
  const days = Math.floor(local / 86400);
  const sod = local - days * 86400;
  const [year, month, day] = civilFromDays(days);
  return {
    year,
    month,
    day,
    hour: Math.floor(sod / 3600),
    minute: Math.floor((sod % 3600) / 60),
    second: sod % 60,
    nanos,
    weekday: (((days + 4) % 7) + 7) % 7,
    yday: days - daysFromCivil(year, 1, 1) + 1,
    offset,
    abbr,
  };
}

/** time.Date: normalizes overflowing fields, then resolves the wall time in the zone. */
export function fromCivil(
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
  second: number,
  nanos: number,
  zone: Zone,
): bigint {
  // Normalize month into 1..12, carrying into the year.
  const m0 = month - 1;
  const y = year + Math.floor(m0 / 12);
  const m = (((m0 % 12) + 12) % 12) + 1;
  const days = daysFromCivil(y, m, 1) + (day - 1);
  const wall = BigInt(days) * 86400n + BigInt(hour) * 3600n + BigInt(minute) * 60n + BigInt(second);
  // Go picks the offset in effect at (wall - offset), trying the offset just before and after.
  const w = Number(wall);
  let off = zone.at(w).offset;
  const off2 = zone.at(w - off).offset;
  if (off2 !== off) {
    const off3 = zone.at(w - off2).offset;
    off = off3 === off2 ? off2 : off;
  }
  return (wall - BigInt(off)) * NS + BigInt(nanos);
}

// ---- layouts ----

enum Std {
  None = 0,
  LongMonth,
  Month,
  NumMonth,
  ZeroMonth,
  LongWeekDay,
  WeekDay,
  Day,
  UnderDay,
  ZeroDay,
  UnderYearDay,
  ZeroYearDay,
  Hour,
  Hour12,
  ZeroHour12,
  Minute,
  ZeroMinute,
  Second,
  ZeroSecond,
  LongYear,
  Year,
  PM,
  pm,
  TZ,
  ISO8601TZ,
  ISO8601SecondsTZ,
  ISO8601ShortTZ,
  ISO8601ColonTZ,
  ISO8601ColonSecondsTZ,
  NumTZ,
  NumSecondsTz,
  NumShortTZ,
  NumColonTZ,
  NumColonSecondsTZ,
  FracSecond0,
  FracSecond9,
}

interface Chunk {
  prefix: string;
  std: Std;
  stdText: string;
  /** Digits of a fractional second element. */
  digits: number;
  /** The separator of a fractional second element ('.' or ','). */
  sep: string;
  suffix: string;
}

function startsWithLower(s: string): boolean {
  const c = s.charCodeAt(0);
  return c >= 97 && c <= 122;
}

function isDigitAt(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  return c >= 48 && c <= 57;
}

const TZ_FORMS: [string, Std][] = [
  ['Z070000', Std.ISO8601SecondsTZ],
  ['Z07:00:00', Std.ISO8601ColonSecondsTZ],
  ['Z0700', Std.ISO8601TZ],
  ['Z07:00', Std.ISO8601ColonTZ],
  ['Z07', Std.ISO8601ShortTZ],
  ['-070000', Std.NumSecondsTz],
  ['-07:00:00', Std.NumColonSecondsTZ],
  ['-0700', Std.NumTZ],
  ['-07:00', Std.NumColonTZ],
  ['-07', Std.NumShortTZ],
];

const ZERO_X: Std[] = [Std.ZeroMonth, Std.ZeroDay, Std.ZeroHour12, Std.ZeroMinute, Std.ZeroSecond, Std.Year];

/** Go's nextStdChunk: the text before the first layout element, the element, and the rest. */
function nextChunk(layout: string): Chunk {
  const mk = (i: number, len: number, std: Std, digits = 0, sep = '.'): Chunk => ({
    prefix: layout.slice(0, i),
    std,
    stdText: layout.slice(i, i + len),
    digits,
    sep,
    suffix: layout.slice(i + len),
  });
  for (let i = 0; i < layout.length; i++) {
    const c = layout[i]!;
    const rest = layout.slice(i);
    switch (c) {
      case 'J':
        if (rest.startsWith('Jan')) {
          if (rest.startsWith('January')) return mk(i, 7, Std.LongMonth);
          if (!startsWithLower(rest.slice(3))) return mk(i, 3, Std.Month);
        }
        break;
      case 'M':
        if (rest.startsWith('Mon')) {
          if (rest.startsWith('Monday')) return mk(i, 6, Std.LongWeekDay);
          if (!startsWithLower(rest.slice(3))) return mk(i, 3, Std.WeekDay);
        }
        if (rest.startsWith('MST')) return mk(i, 3, Std.TZ);
        break;
      case '0':
        if (rest.length >= 2 && rest[1]! >= '1' && rest[1]! <= '6')
          return mk(i, 2, ZERO_X[rest.charCodeAt(1) - 49]!);
        if (rest.startsWith('002')) return mk(i, 3, Std.ZeroYearDay);
        break;
      case '1':
        if (rest.startsWith('15')) return mk(i, 2, Std.Hour);
        return mk(i, 1, Std.NumMonth);
      case '2':
        if (rest.startsWith('2006')) return mk(i, 4, Std.LongYear);
        return mk(i, 1, Std.Day);
      case '_':
        if (rest.startsWith('_2')) {
          // "_2006" is a literal underscore followed by the year.
          if (rest.startsWith('_2006'))
            return { ...mk(i + 1, 4, Std.LongYear), prefix: layout.slice(0, i + 1) };
          return mk(i, 2, Std.UnderDay);
        }
        if (rest.startsWith('__2')) return mk(i, 3, Std.UnderYearDay);
        break;
      case '3':
        return mk(i, 1, Std.Hour12);
      case '4':
        return mk(i, 1, Std.Minute);
      case '5':
        return mk(i, 1, Std.Second);
      case 'P':
        if (rest.startsWith('PM')) return mk(i, 2, Std.PM);
        break;
      case 'p':
        if (rest.startsWith('pm')) return mk(i, 2, Std.pm);
        break;
      case '-':
      case 'Z':
        for (const [form, std] of TZ_FORMS) if (rest.startsWith(form)) return mk(i, form.length, std);
        break;
      case '.':
      case ',':
        if (rest.length > 1 && (rest[1] === '0' || rest[1] === '9')) {
          const ch = rest[1]!;
          let j = 1;
          while (j < rest.length && rest[j] === ch) j++;
          if (!isDigitAt(rest, j)) return mk(i, j, ch === '0' ? Std.FracSecond0 : Std.FracSecond9, j - 1, c);
        }
        break;
    }
  }
  return { prefix: layout, std: Std.None, stdText: '', digits: 0, sep: '.', suffix: '' };
}

const LONG_MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];
const LONG_DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

export function weekdayName(d: number): string {
  return LONG_DAYS[d]!;
}

export const NAMED_LAYOUTS = new Map<string, string>(
  Object.entries({
    ANSIC: 'Mon Jan _2 15:04:05 2006',
    UnixDate: 'Mon Jan _2 15:04:05 MST 2006',
    RubyDate: 'Mon Jan 02 15:04:05 -0700 2006',
    RFC822: '02 Jan 06 15:04 MST',
    RFC822Z: '02 Jan 06 15:04 -0700',
    RFC850: 'Monday, 02-Jan-06 15:04:05 MST',
    RFC1123: 'Mon, 02 Jan 2006 15:04:05 MST',
    RFC1123Z: 'Mon, 02 Jan 2006 15:04:05 -0700',
    RFC3339: '2006-01-02T15:04:05Z07:00',
    RFC3339Nano: '2006-01-02T15:04:05.999999999Z07:00',
  }),
);

function pad(n: number, width: number): string {
  const s = String(Math.abs(n)).padStart(width, '0');
  return n < 0 ? `-${s}` : s;
}

function formatOffset(offset: number, std: Std): string {
  const isISO =
    std === Std.ISO8601TZ ||
    std === Std.ISO8601SecondsTZ ||
    std === Std.ISO8601ShortTZ ||
    std === Std.ISO8601ColonTZ ||
    std === Std.ISO8601ColonSecondsTZ;
  if (isISO && offset === 0) return 'Z';
  const sign = offset < 0 ? '-' : '+';
  const a = Math.abs(offset);
  const hh = pad(Math.floor(a / 3600), 2);
  const mm = pad(Math.floor((a % 3600) / 60), 2);
  const ss = pad(a % 60, 2);
  switch (std) {
    case Std.ISO8601ShortTZ:
    case Std.NumShortTZ:
      return sign + hh;
    case Std.ISO8601ColonTZ:
    case Std.NumColonTZ:
      return `${sign}${hh}:${mm}`;
    case Std.ISO8601SecondsTZ:
    case Std.NumSecondsTz:
      return sign + hh + mm + ss;
    case Std.ISO8601ColonSecondsTZ:
    case Std.NumColonSecondsTZ:
      return `${sign}${hh}:${mm}:${ss}`;
    default:
      return sign + hh + mm;
  }
}

/** Time.Format. */
export function formatTime(ns: bigint, zone: Zone, layout: string): string {
  const t = toCivil(ns, zone);
  let out = '';
  let rest = layout;
  for (;;) {
    const ch = nextChunk(rest);
    out += ch.prefix;
    if (ch.std === Std.None) break;
    rest = ch.suffix;
    switch (ch.std) {
      case Std.Year: {
        const y = t.year % 100;
        out += pad(y < 0 ? -y : y, 2);
        break;
      }
      case Std.LongYear:
        out += t.year < 0 ? `-${pad(-t.year, 4)}` : pad(t.year, 4);
        break;
      case Std.Month:
        out += LONG_MONTHS[t.month - 1]!.slice(0, 3);
        break;
      case Std.LongMonth:
        out += LONG_MONTHS[t.month - 1];
        break;
      case Std.NumMonth:
        out += t.month;
        break;
      case Std.ZeroMonth:
        out += pad(t.month, 2);
        break;
      case Std.WeekDay:
        out += LONG_DAYS[t.weekday]!.slice(0, 3);
        break;
      case Std.LongWeekDay:
        out += LONG_DAYS[t.weekday];
        break;
      case Std.Day:
        out += t.day;
        break;
      case Std.UnderDay:
        out += t.day < 10 ? ` ${t.day}` : t.day;
        break;
      case Std.ZeroDay:
        out += pad(t.day, 2);
        break;
      case Std.UnderYearDay:
        out += String(t.yday).padStart(3, ' ');
        break;
      case Std.ZeroYearDay:
        out += pad(t.yday, 3);
        break;
      case Std.Hour:
        out += pad(t.hour, 2);
        break;
      case Std.Hour12:
        out += t.hour % 12 === 0 ? 12 : t.hour % 12;
        break;
      case Std.ZeroHour12:
        out += pad(t.hour % 12 === 0 ? 12 : t.hour % 12, 2);
        break;
      case Std.Minute:
        out += t.minute;
        break;
      case Std.ZeroMinute:
        out += pad(t.minute, 2);
        break;
      case Std.Second:
        out += t.second;
        break;
      case Std.ZeroSecond:
        out += pad(t.second, 2);
        break;
      case Std.PM:
        out += t.hour >= 12 ? 'PM' : 'AM';
        break;
      case Std.pm:
        out += t.hour >= 12 ? 'pm' : 'am';
        break;
      case Std.TZ:
        out += t.abbr !== '' ? t.abbr : formatOffset(t.offset, Std.NumTZ);
        break;
      case Std.FracSecond0:
        out += ch.sep + String(t.nanos).padStart(9, '0').slice(0, ch.digits);
        break;
      case Std.FracSecond9: {
        const digits = String(t.nanos).padStart(9, '0').slice(0, ch.digits).replace(/0+$/, '');
        if (digits !== '') out += ch.sep + digits;
        break;
      }
      default:
        out += formatOffset(t.offset, ch.std);
    }
  }
  return out;
}

class Bad extends Error {}

/** time.Parse(layout, value) in UTC, returning nanoseconds since the epoch. */
export function parseTime(layout: string, value: string): bigint {
  const alayout = layout;
  const avalue = value;
  const parseError = (layoutElem: string, valueElem: string, message: string) => {
    if (message === '') {
      return new GoTimeError(
        `parsing time ${goQuote(avalue)} as ${goQuote(alayout)}: cannot parse ${goQuote(valueElem)} as ${goQuote(layoutElem)}`,
      );
    }
    return new GoTimeError(`parsing time ${goQuote(avalue)}${message}`);
  };
  let year = 0;
  let month = -1;
  let day = -1;
  let yday = -1;
  let hour = 0;
  let min = 0;
  let sec = 0;
  let nsec = 0;
  let pmSet = false;
  let amSet = false;
  let utc = false;
  let zoneOffset: number | undefined;
  let zoneName = '';
  let v = value;
  let l = layout;

  const getnum = (fixed: boolean): number => {
    if (!isDigitAt(v, 0)) throw new Bad();
    if (!isDigitAt(v, 1)) {
      if (fixed) throw new Bad();
      const n = v.charCodeAt(0) - 48;
      v = v.slice(1);
      return n;
    }
    const n = Number(v.slice(0, 2));
    v = v.slice(2);
    return n;
  };
  const getnum3 = (fixed: boolean): number => {
    let n = 0;
    let i = 0;
    for (; i < 3 && isDigitAt(v, i); i++) n = n * 10 + v.charCodeAt(i) - 48;
    if (i === 0 || (fixed && i !== 3)) throw new Bad();
    v = v.slice(i);
    return n;
  };
  const lookup = (names: readonly string[], len?: number): number => {
    for (let i = 0; i < names.length; i++) {
      const nm = len === undefined ? names[i]! : names[i]!.slice(0, len);
      if (v.length >= nm.length && v.slice(0, nm.length).toLowerCase() === nm.toLowerCase()) {
        v = v.slice(nm.length);
        return i;
      }
    }
    throw new Bad();
  };
  const nanos = (n: number): number => {
    // v[0] is the separator; up to 9 digits count.
    if (v[0] !== '.' && v[0] !== ',') throw new Bad();
    const digits = v.slice(1, Math.min(n, 10));
    if (!/^\d+$/.test(digits)) throw new Bad();
    return Number(digits.padEnd(9, '0'));
  };
  const skip = (prefix: string): void => {
    let p = prefix;
    while (p.length > 0) {
      if (p[0] === ' ') {
        if (v.length > 0 && v[0] !== ' ') throw new Bad();
        p = p.replace(/^ +/, '');
        v = v.replace(/^ +/, '');
        continue;
      }
      if (v.length === 0 || v[0] !== p[0]) throw new Bad();
      p = p.slice(1);
      v = v.slice(1);
    }
  };

  for (;;) {
    const ch = nextChunk(l);
    try {
      skip(ch.prefix);
    } catch (e) {
      if (e instanceof Bad) throw parseError(ch.prefix, v, '');
      throw e;
    }
    if (ch.std === Std.None) {
      if (v.length !== 0) throw parseError('', v, `: extra text: ${goQuote(v)}`);
      break;
    }
    l = ch.suffix;
    const hold = v;
    let rangeErr = '';
    try {
      switch (ch.std) {
        case Std.Year: {
          if (v.length < 2) throw new Bad();
          const p = v.slice(0, 2);
          if (!/^\d\d$/.test(p)) throw new Bad();
          v = v.slice(2);
          year = Number(p);
          year += year >= 69 ? 1900 : 2000;
          break;
        }
        case Std.LongYear: {
          if (v.length < 4 || !isDigitAt(v, 0)) throw new Bad();
          const p = v.slice(0, 4);
          if (!/^\d{4}$/.test(p)) throw new Bad();
          v = v.slice(4);
          year = Number(p);
          break;
        }
        case Std.Month:
          month = lookup(LONG_MONTHS, 3) + 1;
          break;
        case Std.LongMonth:
          month = lookup(LONG_MONTHS) + 1;
          break;
        case Std.NumMonth:
        case Std.ZeroMonth:
          month = getnum(ch.std === Std.ZeroMonth);
          if (month <= 0 || month > 12) rangeErr = 'month';
          break;
        case Std.WeekDay:
          lookup(LONG_DAYS, 3);
          break;
        case Std.LongWeekDay:
          lookup(LONG_DAYS);
          break;
        case Std.Day:
        case Std.UnderDay:
        case Std.ZeroDay:
          if (ch.std === Std.UnderDay && v[0] === ' ') v = v.slice(1);
          day = getnum(ch.std === Std.ZeroDay);
          break;
        case Std.UnderYearDay:
        case Std.ZeroYearDay:
          for (let i = 0; i < 2; i++) if (ch.std === Std.UnderYearDay && v[0] === ' ') v = v.slice(1);
          yday = getnum3(ch.std === Std.ZeroYearDay);
          if (yday < 1 || yday > 366) rangeErr = 'day-of-year';
          break;
        case Std.Hour:
          hour = getnum(false);
          if (hour < 0 || hour >= 24) rangeErr = 'hour';
          break;
        case Std.Hour12:
        case Std.ZeroHour12:
          hour = getnum(ch.std === Std.ZeroHour12);
          if (hour < 0 || hour > 12) rangeErr = 'hour';
          break;
        case Std.Minute:
        case Std.ZeroMinute:
          min = getnum(ch.std === Std.ZeroMinute);
          if (min < 0 || min >= 60) rangeErr = 'minute';
          break;
        case Std.Second:
        case Std.ZeroSecond: {
          sec = getnum(ch.std === Std.ZeroSecond);
          if (sec < 0 || sec >= 60) {
            rangeErr = 'second';
            break;
          }
          // A fractional second in the value but not in the layout is still accepted.
          if (v.length >= 2 && (v[0] === '.' || v[0] === ',') && isDigitAt(v, 1)) {
            const next = nextChunk(l);
            if (next.std === Std.FracSecond0 || next.std === Std.FracSecond9) break;
            let n = 2;
            while (n < v.length && isDigitAt(v, n)) n++;
            nsec = nanos(n);
            v = v.slice(n);
          }
          break;
        }
        case Std.PM:
        case Std.pm: {
          if (v.length < 2) throw new Bad();
          const p = v.slice(0, 2);
          v = v.slice(2);
          const [pm, am] = ch.std === Std.PM ? ['PM', 'AM'] : ['pm', 'am'];
          if (p === pm) pmSet = true;
          else if (p === am) amSet = true;
          else throw new Bad();
          break;
        }
        case Std.TZ: {
          if (v.startsWith('UTC')) {
            utc = true;
            v = v.slice(3);
            break;
          }
          const n = tzAbbrLength(v);
          if (n === 0) throw new Bad();
          zoneName = v.slice(0, n);
          v = v.slice(n);
          break;
        }
        case Std.FracSecond0: {
          const nd = 1 + ch.digits;
          if (v.length < nd) throw new Bad();
          nsec = nanos(nd);
          v = v.slice(nd);
          break;
        }
        case Std.FracSecond9: {
          if (v.length < 2 || (v[0] !== '.' && v[0] !== ',') || !isDigitAt(v, 1)) break;
          let i = 0;
          while (i + 1 < v.length && isDigitAt(v, i + 1)) i++;
          nsec = nanos(1 + i);
          v = v.slice(1 + i);
          break;
        }
        default: {
          // Numeric zones; ISO 8601 forms also accept Z.
          const iso = ch.std >= Std.ISO8601TZ && ch.std <= Std.ISO8601ColonSecondsTZ;
          if (iso && v[0] === 'Z') {
            v = v.slice(1);
            utc = true;
            break;
          }
          const colon = ch.std === Std.ISO8601ColonTZ || ch.std === Std.NumColonTZ;
          const colonSec = ch.std === Std.ISO8601ColonSecondsTZ || ch.std === Std.NumColonSecondsTZ;
          const short = ch.std === Std.ISO8601ShortTZ || ch.std === Std.NumShortTZ;
          const withSec = ch.std === Std.ISO8601SecondsTZ || ch.std === Std.NumSecondsTz;
          let sign: string;
          let hh: string;
          let mm = '00';
          let ss = '00';
          if (colon) {
            if (v.length < 6 || v[3] !== ':') throw new Bad();
            [sign, hh, mm] = [v[0]!, v.slice(1, 3), v.slice(4, 6)];
            v = v.slice(6);
          } else if (short) {
            if (v.length < 3) throw new Bad();
            [sign, hh] = [v[0]!, v.slice(1, 3)];
            v = v.slice(3);
          } else if (colonSec) {
            if (v.length < 9 || v[3] !== ':' || v[6] !== ':') throw new Bad();
            [sign, hh, mm, ss] = [v[0]!, v.slice(1, 3), v.slice(4, 6), v.slice(7, 9)];
            v = v.slice(9);
          } else if (withSec) {
            if (v.length < 7) throw new Bad();
            [sign, hh, mm, ss] = [v[0]!, v.slice(1, 3), v.slice(3, 5), v.slice(5, 7)];
            v = v.slice(7);
          } else {
            if (v.length < 5) throw new Bad();
            [sign, hh, mm] = [v[0]!, v.slice(1, 3), v.slice(3, 5)];
            v = v.slice(5);
          }
          if (!/^\d\d$/.test(hh) || !/^\d\d$/.test(mm) || !/^\d\d$/.test(ss)) throw new Bad();
          const h = Number(hh);
          const m = Number(mm);
          const s = Number(ss);
          if (h > 24) rangeErr = 'time zone offset hour';
          if (m > 60) rangeErr = 'time zone offset minute';
          if (s > 60) rangeErr = 'time zone offset second';
          let off = (h * 60 + m) * 60 + s;
          if (sign === '-') off = -off;
          else if (sign !== '+') throw new Bad();
          zoneOffset = off;
          break;
        }
      }
    } catch (e) {
      if (e instanceof Bad) throw parseError(ch.stdText, hold, '');
      throw e;
    }
    if (rangeErr !== '') throw parseError(ch.stdText, v, `: ${rangeErr} out of range`);
  }
  if (pmSet && hour < 12) hour += 12;
  else if (amSet && hour === 12) hour = 0;
  if (yday >= 0) {
    let d: number;
    let m: number;
    if (isLeap(year)) {
      if (yday === 31 + 29) {
        m = 2;
        d = 29;
      } else {
        const [, mm, dd] = civilFromDays(daysFromCivil(year, 1, 1) + yday - 1);
        m = mm;
        d = dd;
      }
    } else {
      if (yday > 365) throw parseError('', v, ': day-of-year out of range');
      const [, mm, dd] = civilFromDays(daysFromCivil(year, 1, 1) + yday - 1);
      m = mm;
      d = dd;
    }
    if (month >= 0 && month !== m) throw parseError('', v, ': day-of-year does not match month');
    month = m;
    if (day >= 0 && day !== d) throw parseError('', v, ': day-of-year does not match day');
    day = d;
  } else {
    if (month < 0) month = 1;
    if (day < 0) day = 1;
  }
  if (day < 1 || day > daysIn(month, year)) throw parseError('', v, ': day out of range');
  let zone: Zone = UTC;
  if (utc) zone = UTC;
  else if (zoneOffset !== undefined) zone = fixedZone(zoneOffset, '');
  else if (zoneName !== '') {
    // Parsing in UTC: an abbreviation other than UTC has no known offset, except GMT+h.
    let off = 0;
    if (zoneName.length > 3 && zoneName.startsWith('GMT')) off = Number(zoneName.slice(3)) * 3600;
    zone = fixedZone(off, zoneName);
  }
  return fromCivil(year, month, day, hour, min, sec, nsec, zone);
}

function tzAbbrLength(v: string): number {
  if (v.length < 3) return 0;
  if (v.startsWith('ChST') || v.startsWith('MeST')) return 4;
  if (v.startsWith('GMT')) {
    // GMT, optionally followed by a signed hour offset.
    const m = /^GMT([+-])(\d+)/.exec(v);
    if (m === null) return 3;
    const h = Number(m[2]);
    if (m[2]!.length > 2 || h > 23 || (m[2]!.length > 1 && m[2]![0] === '0')) return 3;
    return 3 + 1 + m[2]!.length;
  }
  if (v[0] === '+' || v[0] === '-') {
    const m = /^[+-](\d\d)(\d\d)?/.exec(v);
    if (m === null) return 0;
    return m[0].length;
  }
  let n = 0;
  while (n < 6 && n < v.length && v[n]! >= 'A' && v[n]! <= 'Z') n++;
  switch (n) {
    case 5:
      return v[4] === 'T' ? 5 : 0;
    case 4:
      return v[3] === 'T' || v.startsWith('WITA') ? 4 : 0;
    case 3:
      return 3;
    default:
      return 0;
  }
}

// ---- durations ----

const UNITS = new Map<string, bigint>(
  Object.entries({
    ns: 1n,
    us: 1000n,
    µs: 1000n,
    μs: 1000n,
    ms: 1_000_000n,
    s: NS,
    m: 60n * NS,
    h: 3600n * NS,
  }),
);

const INT64_MAX = 2n ** 63n - 1n;

/** time.ParseDuration, exactly (to the nanosecond). */
export function parseDuration(s: string): bigint {
  const orig = s;
  const invalid = () => new GoTimeError(`time: invalid duration ${goQuote(orig)}`);
  let neg = false;
  let d = 0n;
  if (s !== '') {
    const c = s[0];
    if (c === '-' || c === '+') {
      neg = c === '-';
      s = s.slice(1);
    }
  }
  if (s === '0') return 0n;
  if (s === '') throw invalid();
  while (s !== '') {
    if (!(s[0] === '.' || isDigitAt(s, 0))) throw invalid();
    const intm = /^\d*/.exec(s)![0];
    s = s.slice(intm.length);
    let frac = '';
    if (s[0] === '.') {
      frac = /^\.(\d*)/.exec(s)![1]!;
      s = s.slice(1 + frac.length);
    }
    if (intm === '' && frac === '') throw invalid();
    const unitm = /^[^0-9.]*/.exec(s)![0];
    s = s.slice(unitm.length);
    if (unitm === '') throw new GoTimeError(`time: missing unit in duration ${goQuote(orig)}`);
    const unit = UNITS.get(unitm);
    if (unit === undefined)
      throw new GoTimeError(`time: unknown unit ${goQuote(unitm)} in duration ${goQuote(orig)}`);
    const v = intm === '' ? 0n : BigInt(intm);
    if (v > INT64_MAX / unit) throw invalid();
    let part = v * unit;
    if (frac !== '') {
      // Go scales the fraction in float64; do the same so results agree.
      const digits = frac.slice(0, 18);
      const f = Number(digits);
      const scale = 10 ** digits.length;
      part += BigInt(Math.trunc(f * (Number(unit) / scale)));
    }
    d += part;
    if (d > INT64_MAX) throw invalid();
  }
  return neg ? -d : d;
}

// ---- AddDate and Diff ----

export function addDate(ns: bigint, zone: Zone, years: number, months: number, days: number): bigint {
  const t = toCivil(ns, zone);
  return fromCivil(t.year + years, t.month + months, t.day + days, t.hour, t.minute, t.second, t.nanos, zone);
}

export function diff(a: bigint, b: bigint, zone: Zone): number[] {
  let t1 = a;
  let t2 = b;
  if (t1 > t2) [t1, t2] = [t2, t1];
  const c1 = toCivil(t1, zone);
  const c2 = toCivil(t2, zone);
  let year = c2.year - c1.year;
  let month = c2.month - c1.month;
  let day = c2.day - c1.day;
  let hour = c2.hour - c1.hour;
  let min = c2.minute - c1.minute;
  let sec = c2.second - c1.second;
  if (sec < 0) {
    sec += 60;
    min--;
  }
  if (min < 0) {
    min += 60;
    hour--;
  }
  if (hour < 0) {
    hour += 24;
    day--;
  }
  if (day < 0) {
    // Days in c1's month: day 32 of that month normalizes into the next one.
    const [, , d32] = civilFromDays(daysFromCivil(c1.year, c1.month, 1) + 31);
    day += 32 - d32;
    month--;
  }
  if (month < 0) {
    month += 12;
    year--;
  }
  return [year, month, day, hour, min, sec];
}
