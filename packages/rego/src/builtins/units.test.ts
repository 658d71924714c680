import { describe, expect, it } from 'vitest';
import { call, failure } from './testkit.js';

describe('units.parse', () => {
  it('understands SI, binary and milli suffixes exactly', () => {
    expect(call('units.parse', '1K')).toBe(1000);
    expect(call('units.parse', '1k')).toBe(1000);
    expect(call('units.parse', '1Ki')).toBe(1024);
    expect(call('units.parse', '1KI')).toBe(1024);
    expect(call('units.parse', '1m')).toBe(0.001);
    expect(call('units.parse', '1M')).toBe(1000000);
    expect(call('units.parse', '1mi')).toBe(1048576);
    expect(call('units.parse', '1.5Gi')).toBe(1610612736);
    expect(call('units.parse', '1E')).toBe(10n ** 18n);
    expect(call('units.parse', '1Ei')).toBe(2n ** 60n);
    expect(call('units.parse', '10e3')).toBe(10000);
    expect(call('units.parse', '0.1m')).toBe(0.0001);
    expect(call('units.parse', '100m')).toBe(0.1);
    expect(call('units.parse', '"1"')).toBe(1);
    expect(call('units.parse', '-2k')).toBe(-2000);
  });

  it('reports bad input', () => {
    expect(failure('units.parse', '1 K').message).toBe('units.parse: spaces not allowed in resource strings');
    expect(failure('units.parse', 'K').message).toBe('units.parse: no amount provided');
    expect(failure('units.parse', '1Q').message).toBe('units.parse: unit Q not recognized');
    expect(failure('units.parse', '1mb').message).toBe('units.parse: unit mb not recognized');
    expect(failure('units.parse', '1.2.3K').message).toBe('units.parse: could not parse amount to a number');
    expect(failure('units.parse', '1e1234567').message).toBe('units.parse: exponent too large');
  });
});

describe('units.parse_bytes', () => {
  it('understands byte units, case-insensitively, truncating to an integer', () => {
    expect(call('units.parse_bytes', '1KB')).toBe(1000);
    expect(call('units.parse_bytes', '1kib')).toBe(1024);
    expect(call('units.parse_bytes', '1.5MiB')).toBe(1572864);
    expect(call('units.parse_bytes', '1.1k')).toBe(1100);
    expect(call('units.parse_bytes', '1.5')).toBe(1);
    expect(call('units.parse_bytes', '2EiB')).toBe(2n ** 61n);
    expect(call('units.parse_bytes', '12')).toBe(12);
  });

  it('reports bad input', () => {
    expect(failure('units.parse_bytes', '1b').message).toBe('units.parse_bytes: byte unit b not recognized');
    expect(failure('units.parse_bytes', '1yib').message).toBe(
      'units.parse_bytes: byte unit yib not recognized',
    );
    expect(failure('units.parse_bytes', '100 B').message).toBe(
      'units.parse_bytes: spaces not allowed in resource strings',
    );
    expect(failure('units.parse_bytes', 'foo').message).toBe('units.parse_bytes: no byte amount provided');
    expect(failure('units.parse_bytes', '1.2.3kb').message).toBe(
      'units.parse_bytes: could not parse byte amount to a number',
    );
    expect(typeof call('units.parse_bytes', '1e9999kb')).toBe('bigint');
    expect(failure('units.parse_bytes', '1e99999kb').message).toBe(
      'units.parse_bytes: integer result too large',
    );
    expect(failure('units.parse', '1e999999').message).toBe('units.parse: integer result too large');
  });
});
