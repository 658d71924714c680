import { describe, expect, it } from 'vitest';
import { call, callIn, failure, show, testContext } from './testkit.js';

const ns = (iso: string) => BigInt(Date.parse(iso)) * 1_000_000n;
const num = (v: bigint) => (v >= -(2n ** 53n) && v < 2n ** 53n ? Number(v) : v);

describe('time.parse_rfc3339_ns (trustee)', () => {
  it('parses offsets and fractional seconds to the nanosecond', () => {
    expect(call('time.parse_rfc3339_ns', '2017-06-02T19:00:00.000000000-07:00')).toBe(1496455200000000000n);
    expect(call('time.parse_rfc3339_ns', '1985-04-12T23:20:50.52Z')).toBe(482196050520000000n);
    expect(call('time.parse_rfc3339_ns', '2023-12-24T18:58:45.734390123Z')).toBe(1703444325734390123n);
    expect(call('time.parse_rfc3339_ns', '1970-01-01T00:00:00Z')).toBe(0);
    expect(call('time.parse_rfc3339_ns', '1969-12-31T23:59:59.999999999Z')).toBe(-1);
    expect(call('time.parse_rfc3339_ns', '2024-02-29T12:00:00+05:30')).toBe(num(ns('2024-02-29T06:30:00Z')));
  });

  it('reports Go parse errors', () => {
    const e = failure('time.parse_rfc3339_ns', '2017-06-02');
    expect(e.code).toBe('eval_builtin_error');
    expect(e.message).toBe(
      'time.parse_rfc3339_ns: parsing time "2017-06-02" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "T"',
    );
    expect(failure('time.parse_rfc3339_ns', '2017-13-01T00:00:00Z').message).toBe(
      'time.parse_rfc3339_ns: parsing time "2017-13-01T00:00:00Z": month out of range',
    );
    expect(failure('time.parse_rfc3339_ns', '2017-02-30T00:00:00Z').message).toBe(
      'time.parse_rfc3339_ns: parsing time "2017-02-30T00:00:00Z": day out of range',
    );
    expect(failure('time.parse_rfc3339_ns', '2017-01-01T00:00:00').message).toBe(
      'time.parse_rfc3339_ns: parsing time "2017-01-01T00:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"',
    );
    expect(failure('time.parse_rfc3339_ns', '2017-01-01T00:00:00Zjunk').message).toBe(
      'time.parse_rfc3339_ns: parsing time "2017-01-01T00:00:00Zjunk": extra text: "junk"',
    );
    expect(failure('time.parse_rfc3339_ns', 'x2017').message).toBe(
      'time.parse_rfc3339_ns: parsing time "x2017" as "2006-01-02T15:04:05Z07:00": cannot parse "x2017" as "2006"',
    );
    expect(failure('time.parse_rfc3339_ns', '3000-01-01T00:00:00Z').message).toBe(
      'time.parse_rfc3339_ns: time outside of valid range',
    );
    expect(failure('time.parse_rfc3339_ns', 1).message).toBe(
      'time.parse_rfc3339_ns: operand 1 must be string but got number',
    );
  });
});

describe('time.parse_ns', () => {
  it('parses Go layouts and named layouts', () => {
    expect(call('time.parse_ns', '2006-01-02', '2020-05-06')).toBe(num(ns('2020-05-06T00:00:00Z')));
    expect(call('time.parse_ns', 'RFC822', '02 Jan 06 15:04 MST')).toBe(num(ns('2006-01-02T15:04:00Z')));
    expect(call('time.parse_ns', 'RFC1123Z', 'Mon, 02 Jan 2006 15:04:05 -0700')).toBe(
      num(ns('2006-01-02T22:04:05Z')),
    );
    expect(call('time.parse_ns', 'ANSIC', 'Mon Jan  2 15:04:05 2006')).toBe(num(ns('2006-01-02T15:04:05Z')));
    expect(call('time.parse_ns', '3:04PM Jan 2 2006', '11:30AM Feb 10 2020')).toBe(
      num(ns('2020-02-10T11:30:00Z')),
    );
    expect(call('time.parse_ns', '3:04pm Jan 2 2006', '12:15am Feb 10 2020')).toBe(
      num(ns('2020-02-10T00:15:00Z')),
    );
    // Without a year the time is in year 0, outside the nanosecond range.
    expect(failure('time.parse_ns', '3:04pm', '12:15am').message).toBe(
      'time.parse_ns: time outside of valid range',
    );
    expect(call('time.parse_ns', '2006-01-02 15:04:05.000', '2020-01-01 10:00:00.123')).toBe(
      num(ns('2020-01-01T10:00:00.123Z')),
    );
    expect(call('time.parse_ns', '2006-01-02 15:04:05', '2020-01-01 10:00:00.5')).toBe(
      num(ns('2020-01-01T10:00:00.5Z')),
    );
    expect(call('time.parse_ns', '2006 002', '2020 060')).toBe(num(ns('2020-02-29T00:00:00Z')));
    expect(call('time.parse_ns', 'January 2, 2006 MST', 'march 5, 2021 GMT+3')).toBe(
      num(ns('2021-03-04T21:00:00Z')),
    );
  });

  it('reports Go parse errors', () => {
    expect(failure('time.parse_ns', '2006-01-02', '2020-5-06').message).toBe(
      'time.parse_ns: parsing time "2020-5-06" as "2006-01-02": cannot parse "5-06" as "01"',
    );
    expect(failure('time.parse_ns', '15:04', '25:00').message).toBe(
      'time.parse_ns: parsing time "25:00": hour out of range',
    );
  });

  it('does not treat inherited property names as layouts', () => {
    expect(failure('time.parse_ns', 'toString', 'x').code).toBe('eval_builtin_error');
  });
});

describe('time.parse_duration_ns', () => {
  it('parses Go durations exactly', () => {
    expect(call('time.parse_duration_ns', '1h30m')).toBe(5400000000000);
    expect(call('time.parse_duration_ns', '1.5h')).toBe(5400000000000);
    expect(call('time.parse_duration_ns', '-1m')).toBe(-60000000000);
    expect(call('time.parse_duration_ns', '1µs')).toBe(1000);
    expect(call('time.parse_duration_ns', '1us2ns')).toBe(1002);
    expect(call('time.parse_duration_ns', '.5s')).toBe(500000000);
    expect(call('time.parse_duration_ns', '0')).toBe(0);
    expect(call('time.parse_duration_ns', '9223372036854775807ns')).toBe(9223372036854775807n);
  });

  it('reports Go errors', () => {
    expect(failure('time.parse_duration_ns', '').message).toBe(
      'time.parse_duration_ns: time: invalid duration ""',
    );
    expect(failure('time.parse_duration_ns', '1').message).toBe(
      'time.parse_duration_ns: time: missing unit in duration "1"',
    );
    expect(failure('time.parse_duration_ns', '1x').message).toBe(
      'time.parse_duration_ns: time: unknown unit "x" in duration "1x"',
    );
    expect(failure('time.parse_duration_ns', '1constructor').message).toBe(
      'time.parse_duration_ns: time: unknown unit "constructor" in duration "1constructor"',
    );
    expect(failure('time.parse_duration_ns', '9223372036854775808ns').message).toBe(
      'time.parse_duration_ns: time: invalid duration "9223372036854775808ns"',
    );
  });
});

describe('calendar builtins', () => {
  const t = 1703444325734390000n; // 2023-12-24T18:58:45.73439Z, a Sunday

  it('format uses RFC3339Nano by default and Go layouts otherwise', () => {
    expect(call('time.format', t)).toBe('2023-12-24T18:58:45.73439Z');
    expect(call('time.format', [t, 'UTC'])).toBe('2023-12-24T18:58:45.73439Z');
    expect(call('time.format', 1257894000000000000n)).toBe('2009-11-10T23:00:00Z');
    expect(call('time.format', [0, 'UTC', 'ANSIC'])).toBe('Thu Jan  1 00:00:00 1970');
    expect(call('time.format', [t, 'America/New_York', '2006-01-02 15:04:05 MST -07:00'])).toBe(
      '2023-12-24 13:58:45 EST -05:00',
    );
    expect(call('time.format', [t, 'Europe/Paris', 'Monday 3:04PM .000 Z07:00'])).toBe(
      'Sunday 7:58PM .734 +01:00',
    );
    expect(call('time.format', [t, '', '06 Jan _2 002 __2 .9 ,000000'])).toBe('23 Dec 24 358 358 .7 ,734390');
  });

  it('date, clock and weekday', () => {
    expect(show(call('time.date', t))).toBe('[2023, 12, 24]');
    expect(show(call('time.clock', t))).toBe('[18, 58, 45]');
    expect(call('time.weekday', t)).toBe('Sunday');
    expect(call('time.weekday', 0)).toBe('Thursday');
    expect(show(call('time.date', [t, 'Asia/Tokyo']))).toBe('[2023, 12, 25]');
    expect(show(call('time.date', -1))).toBe('[1969, 12, 31]');
  });

  it('add_date normalizes like Go', () => {
    expect(call('time.add_date', 0, 1, 1, 1)).toBe(num(ns('1971-02-02T00:00:00Z')));
    expect(call('time.add_date', ns('2023-01-31T00:00:00Z'), 0, 1, 0)).toBe(num(ns('2023-03-03T00:00:00Z')));
    expect(call('time.add_date', ns('2024-02-29T00:00:00Z'), 1, 0, 0)).toBe(num(ns('2025-03-01T00:00:00Z')));
    expect(failure('time.add_date', t, 2147483647, 0, 0).message).toBe(
      'time.add_date: time outside of valid range',
    );
  });

  it('diff counts calendar units', () => {
    expect(show(call('time.diff', ns('2021-11-04T00:00:00Z'), ns('2020-02-10T13:30:15Z')))).toBe(
      '[1, 8, 22, 10, 29, 45]',
    );
    expect(show(call('time.diff', 0, 0))).toBe('[0, 0, 0, 0, 0, 0]');
  });

  it('reports bad operands', () => {
    expect(failure('time.format', 'x').message).toBe(
      'time.format: operand 1 must be either number (ns) or [number (ns), string (tz)] but got string',
    );
    expect(failure('time.date', [0, 'Mars/Olympus_Mons']).message).toBe(
      'time.date: unknown time zone Mars/Olympus_Mons',
    );
    expect(failure('time.date', [0, '../../etc/passwd']).message).toBe(
      'time.date: unknown time zone ../../etc/passwd',
    );
    expect(failure('time.date', 1.5).message).toBe('time.date: timestamp too big');
    expect(failure('time.date', 2n ** 64n).message).toBe('time.date: timestamp too big');
  });
});

describe('time.now_ns', () => {
  it('is the query time', () => {
    expect(callIn(testContext({ nowNs: 1234n }), 'time.now_ns')).toBe(1234);
    expect(call('time.now_ns')).toBe(1700000000123456789n);
  });
});
