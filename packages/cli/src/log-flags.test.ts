import { describe, expect, it } from 'vitest';
import { UsageError } from './args.js';
import { logFlags } from './log-flags.js';

describe('logFlags', () => {
  it('passes a directive list and a format through', () => {
    expect(logFlags({ 'log-level': 'mock_tee=debug,info', 'log-format': 'text' }, ['mock_tee'])).toEqual({
      level: 'mock_tee=debug,info',
      format: 'text',
    });
    expect(logFlags({}, ['mock_tee'])).toEqual({});
  });

  it('refuses a level that is not one, naming --log-level', () => {
    const e = (() => {
      try {
        logFlags({ 'log-level': 'loud' }, ['mock_tee']);
      } catch (err) {
        return err;
      }
    })();
    expect(e).toBeInstanceOf(UsageError);
    expect((e as Error).message).toContain('--log-level');
  });

  it('refuses an unknown format, naming --log-format', () => {
    expect(() => logFlags({ 'log-format': 'xml' }, ['x'])).toThrow(/--log-format/);
  });
});
