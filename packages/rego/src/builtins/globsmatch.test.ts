import { describe, expect, it } from 'vitest';
import { call, failure } from './testkit.js';

describe('regex.globs_match', () => {
  it('is true when some non-empty string matches both', () => {
    expect(call('regex.globs_match', 'a.a.[0-9]+z', '.b.b2359825792*594823z')).toBe(true);
    expect(call('regex.globs_match', 'b.*', 'bar')).toBe(true);
    expect(call('regex.globs_match', '[a-z]+\\[[0-9]+\\]', 'foo\\[1\\]')).toBe(true);
    expect(call('regex.globs_match', 'a*', 'b*')).toBe(false);
    expect(call('regex.globs_match', '[a-z]+', '[0-9]*')).toBe(false);
    expect(call('regex.globs_match', '[a-z]+\\[[0-9]+\\]', 'foo["bar"]')).toBe(false);
    expect(call('regex.globs_match', 'x+y', 'xxxy')).toBe(true);
    expect(call('regex.globs_match', 'x+y', 'y')).toBe(false);
  });

  it('rejects malformed patterns', () => {
    expect(failure('regex.globs_match', '*a', 'a').message).toContain('regex.globs_match: unexpected *');
    expect(failure('regex.globs_match', 'a', '[a-').message).toContain('unterminated character class');
    expect(failure('regex.globs_match', 'a'.repeat(2000), 'a'.repeat(2000)).message).toBe(
      'regex.globs_match: patterns too large',
    );
    expect(failure('regex.globs_match', 1, 'a').message).toBe(
      'regex.globs_match: operand 1 must be string but got number',
    );
  });
});
