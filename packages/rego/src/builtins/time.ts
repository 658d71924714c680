// Time builtins: nanosecond timestamps (bigint-exact), Go layouts, IANA zones.
import { normalizeInt, type Value } from '../value.js';
import { argSmallInt, argString, type BuiltinTable, builtinError, typeError } from './api.js';
import {
  addDate,
  diff,
  formatTime,
  GoTimeError,
  loadZone,
  NAMED_LAYOUTS,
  parseDuration,
  parseTime,
  toCivil,
  weekdayName,
  type Zone,
} from './gotime.js';
import { isIntegral, toBig } from './numeric.js';

const RFC3339 = NAMED_LAYOUTS.get('RFC3339')!;
const RFC3339_NANO = NAMED_LAYOUTS.get('RFC3339Nano')!;
const MIN_NS = -(2n ** 63n);
const MAX_NS = 2n ** 63n - 1n;

function safeNs(name: string, ns: bigint): Value {
  if (ns < MIN_NS || ns > MAX_NS) throw builtinError(name, 'time outside of valid range');
  return normalizeInt(ns);
}

function goErr<T>(name: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof GoTimeError) throw builtinError(name, e.message);
    throw e;
  }
}

const EXPECTED = 'either number (ns) or [number (ns), string (tz)]';

/** OPA's tzTime: a number of nanoseconds, or [ns, zone] or [ns, zone, layout]. */
function tzTime(name: string, v: Value): { ns: bigint; zone: Zone; layout: string } {
  let n: Value;
  let zone: Zone = loadZone('');
  let layout = '';
  if (Array.isArray(v)) {
    if (v.length === 0) throw typeError(name, 1, EXPECTED, v);
    n = v[0]!;
    if (typeof n !== 'number' && typeof n !== 'bigint') throw typeError(name, 1, 'number', n);
    if (v.length > 1) {
      const tz = v[1]!;
      if (typeof tz !== 'string') throw typeError(name, 1, 'string', tz);
      zone = goErr(name, () => loadZone(tz));
    }
    if (v.length > 2) {
      const l = v[2]!;
      if (typeof l !== 'string') throw typeError(name, 1, 'string', l);
      layout = l;
    }
  } else if (typeof v === 'number' || typeof v === 'bigint') {
    n = v;
  } else {
    throw typeError(name, 1, EXPECTED, v);
  }
  if (!isIntegral(n)) throw builtinError(name, 'timestamp too big');
  const ns = toBig(n);
  if (ns < MIN_NS || ns > MAX_NS) throw builtinError(name, 'timestamp too big');
  return { ns, zone, layout };
}

export const timeBuiltins: BuiltinTable = {
  'time.now_ns': { arity: 0, nondeterministic: true, fn: (_args, ctx) => normalizeInt(ctx.nowNs) },
  'time.parse_ns': {
    arity: 2,
    fn: (args) => {
      const layoutArg = argString('time.parse_ns', args, 0);
      const value = argString('time.parse_ns', args, 1);
      const layout = NAMED_LAYOUTS.get(layoutArg) ?? layoutArg;
      return safeNs(
        'time.parse_ns',
        goErr('time.parse_ns', () => parseTime(layout, value)),
      );
    },
  },
  'time.parse_rfc3339_ns': {
    arity: 1,
    fn: (args) => {
      const value = argString('time.parse_rfc3339_ns', args, 0);
      return safeNs(
        'time.parse_rfc3339_ns',
        goErr('time.parse_rfc3339_ns', () => parseTime(RFC3339, value)),
      );
    },
  },
  'time.parse_duration_ns': {
    arity: 1,
    fn: (args) => {
      const s = argString('time.parse_duration_ns', args, 0);
      return normalizeInt(goErr('time.parse_duration_ns', () => parseDuration(s)));
    },
  },
  'time.format': {
    arity: 1,
    fn: ([v = null]) => {
      const { ns, zone, layout } = tzTime('time.format', v);
      const l = layout === '' ? RFC3339_NANO : (NAMED_LAYOUTS.get(layout) ?? layout);
      return formatTime(ns, zone, l);
    },
  },
  'time.date': {
    arity: 1,
    fn: ([v = null]) => {
      const { ns, zone } = tzTime('time.date', v);
      const t = toCivil(ns, zone);
      return [t.year, t.month, t.day];
    },
  },
  'time.clock': {
    arity: 1,
    fn: ([v = null]) => {
      const { ns, zone } = tzTime('time.clock', v);
      const t = toCivil(ns, zone);
      return [t.hour, t.minute, t.second];
    },
  },
  'time.weekday': {
    arity: 1,
    fn: ([v = null]) => {
      const { ns, zone } = tzTime('time.weekday', v);
      return weekdayName(toCivil(ns, zone).weekday);
    },
  },
  'time.add_date': {
    arity: 4,
    fn: (args) => {
      const { ns, zone } = tzTime('time.add_date', args[0] ?? null);
      const years = argSmallInt('time.add_date', args, 1);
      const months = argSmallInt('time.add_date', args, 2);
      const days = argSmallInt('time.add_date', args, 3);
      if (Math.abs(years) > 1e6 || Math.abs(months) > 1e7 || Math.abs(days) > 1e9) {
        throw builtinError('time.add_date', 'time outside of valid range');
      }
      return safeNs('time.add_date', addDate(ns, zone, years, months, days));
    },
  },
  'time.diff': {
    arity: 2,
    fn: (args) => {
      const a = tzTime('time.diff', args[0] ?? null);
      const b = tzTime('time.diff', args[1] ?? null);
      return diff(a.ns, b.ns, a.zone);
    },
  },
};
