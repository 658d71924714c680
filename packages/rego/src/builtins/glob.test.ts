import { describe, expect, it } from 'vitest';
import { call, failure, set } from './testkit.js';

describe('glob.match', () => {
  it('matches within and across delimiters', () => {
    expect(call('glob.match', '*.github.com', [], 'api.github.com')).toBe(true);
    expect(call('glob.match', '*.github.com', [], 'api.cdn.github.com')).toBe(false);
    expect(call('glob.match', '*.github.com', null, 'api.cdn.github.com')).toBe(true);
    expect(call('glob.match', '**.github.com', [], 'api.cdn.github.com')).toBe(true);
    expect(call('glob.match', '*:github:com', [':'], 'api:github:com')).toBe(true);
    expect(call('glob.match', '*hub.com', ['.'], 'api.github.com')).toBe(false);
  });

  it('supports ?, classes, alternatives and escapes', () => {
    expect(call('glob.match', '?at', [], 'cat')).toBe(true);
    expect(call('glob.match', '?at', [], 'at')).toBe(false);
    expect(call('glob.match', '[ch]at', [], 'cat')).toBe(true);
    expect(call('glob.match', '[!ch]at', [], 'bat')).toBe(true);
    expect(call('glob.match', '[!ch]at', [], 'cat')).toBe(false);
    expect(call('glob.match', '[a-c]at', [], 'bat')).toBe(true);
    expect(call('glob.match', '{cat,bat,[fr]at}', [], 'rat')).toBe(true);
    expect(call('glob.match', 'api.{github,gitlab}.com', [], 'api.gitlab.com')).toBe(true);
    expect(call('glob.match', '\\*.com', [], '*.com')).toBe(true);
    expect(call('glob.match', '\\*.com', [], 'a.com')).toBe(false);
    expect(call('glob.match', 'a+b(c)$', [], 'a+b(c)$')).toBe(true);
    expect(call('glob.match', '*', [], '')).toBe(true);
  });

  it('reports bad patterns and delimiters', () => {
    expect(failure('glob.match', '[abc', [], 'a').code).toBe('eval_builtin_error');
    expect(failure('glob.match', '{a,b', [], 'a').code).toBe('eval_builtin_error');
    expect(failure('glob.match', 'a\\', [], 'a').code).toBe('eval_builtin_error');
    expect(failure('glob.match', 'a', ['ab'], 'a').message).toBe(
      'glob.match: operand 2 must be array of runes but got array containing string',
    );
    expect(failure('glob.match', 'a', set('.'), 'a').message).toBe(
      'glob.match: operand 2 must be one of {array, null} but got set',
    );
  });

  it('stays linear on hostile patterns', () => {
    expect(call('glob.match', '*a*a*a*a*a*a*a*a*b', null, 'a'.repeat(5000))).toBe(false);
  });
});

describe('glob.quote_meta', () => {
  it('escapes glob syntax', () => {
    expect(call('glob.quote_meta', '*.github.com')).toBe('\\*.github.com');
    expect(call('glob.quote_meta', '[x]{y}?\\')).toBe('\\[x\\]\\{y\\}\\?\\\\');
    expect(call('glob.match', call('glob.quote_meta', '*.{a,b}'), [], '*.{a,b}')).toBe(true);
  });
});
