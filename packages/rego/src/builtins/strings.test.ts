import { describe, expect, it } from 'vitest';
import { call, failure, set, show } from './testkit.js';

describe('kata genpolicy string builtins', () => {
  it('replace replaces every occurrence, left to right, without overlaps', () => {
    expect(call('replace', '$(sfprefix)resolv.conf$', '$(sfprefix)', '^/run/x-')).toBe(
      '^/run/x-resolv.conf$',
    );
    expect(call('replace', 'aaa', 'aa', 'b')).toBe('ba');
    expect(call('replace', 'abc', 'x', 'y')).toBe('abc');
    expect(call('replace', 'a.b.c', '.', '\\.')).toBe('a\\.b\\.c');
    expect(call('replace', 'ab', '', '-')).toBe('-a-b-');
    expect(call('replace', 'é😀', '', '-')).toBe('-é-😀-');
    expect(failure('replace', 1, 'a', 'b').message).toBe('replace: operand 1 must be string but got number');
  });

  it('split keeps empty fields and splits runes on an empty delimiter', () => {
    expect(show(call('split', 'a:b::c', ':'))).toBe('["a", "b", "", "c"]');
    expect(show(call('split', 'abc', ','))).toBe('["abc"]');
    expect(show(call('split', '', ','))).toBe('[""]');
    expect(show(call('split', 'aé😀', ''))).toBe('["a", "é", "😀"]');
    expect(show(call('split', 'KEY=VAL=X', '='))).toBe('["KEY", "VAL", "X"]');
  });

  it('startswith, endswith and contains', () => {
    expect(call('startswith', '/run/kata', '/run')).toBe(true);
    expect(call('startswith', 'a', '')).toBe(true);
    expect(call('endswith', 'file.txt', '.txt')).toBe(true);
    expect(call('contains', 'hello', 'ell')).toBe(true);
    expect(call('contains', 'hello', '')).toBe(true);
    expect(call('contains', 'hello', 'x')).toBe(false);
    expect(failure('startswith', 'a', 1).message).toBe('startswith: operand 2 must be string but got number');
  });

  it('concat joins arrays and sets (in sorted order)', () => {
    expect(call('concat', '/', ['a', 'b', 'c'])).toBe('a/b/c');
    expect(call('concat', ',', set('b', 'a'))).toBe('a,b');
    expect(call('concat', ',', [])).toBe('');
    expect(failure('concat', ',', ['a', 1]).message).toBe(
      'concat: operand 2 must be array of strings but got array containing number',
    );
    expect(failure('concat', ',', 'ab').message).toBe(
      'concat: operand 2 must be one of {set, array} but got string',
    );
  });

  it('trim_prefix only removes a leading match', () => {
    expect(call('trim_prefix', 'sandbox-abc', 'sandbox-')).toBe('abc');
    expect(call('trim_prefix', 'abc', 'x')).toBe('abc');
    expect(call('trim_prefix', 'aaa', 'a')).toBe('aa');
  });

  it('substring counts runes and clamps', () => {
    expect(call('substring', 'abcdef', 1, 3)).toBe('bcd');
    expect(call('substring', 'abcdef', 4, 100)).toBe('ef');
    expect(call('substring', 'abcdef', 2, -1)).toBe('cdef');
    expect(call('substring', 'abc', 5, 1)).toBe('');
    expect(call('substring', 'héllo', 1, 2)).toBe('él');
    expect(call('substring', '', 0, 1)).toBe('');
    const e = failure('substring', 'abc', -1, 1);
    expect(e.code).toBe('eval_builtin_error');
    expect(e.message).toBe('substring: negative offset');
    expect(failure('substring', 'abc', 1.5, 1).message).toBe(
      'substring: operand 2 must be integer number but got floating-point number',
    );
  });

  it('lower and upper map rune by rune, as Go', () => {
    expect(call('lower', 'ABC-Def')).toBe('abc-def');
    expect(call('upper', 'abc')).toBe('ABC');
    expect(call('lower', 'ΣΑΣ')).toBe('σασ');
    expect(call('lower', 'İ')).toBe('i');
    expect(call('upper', 'ß')).toBe('ß');
  });
});

describe('other string builtins', () => {
  it('indexof and indexof_n count runes', () => {
    expect(call('indexof', 'Hello world', 'llo')).toBe(2);
    expect(call('indexof', 'Hello world', 'hel')).toBe(-1);
    expect(call('indexof', 'μx', 'x')).toBe(1);
    expect(show(call('indexof_n', 'sad sad sad', 'sad'))).toBe('[0, 4, 8]');
    expect(show(call('indexof_n', 'aaa', 'aa'))).toBe('[0, 1]');
    expect(failure('indexof', 'abc', '').message).toBe('indexof: empty search character');
  });

  it('format_int truncates and formats in bases 2, 8, 10 and 16', () => {
    expect(call('format_int', 255, 16)).toBe('ff');
    expect(call('format_int', -5, 2)).toBe('-101');
    expect(call('format_int', 8, 8)).toBe('10');
    expect(call('format_int', 3.9, 10)).toBe('3');
    expect(call('format_int', -3.9, 10)).toBe('-3');
    expect(call('format_int', 2n ** 70n, 16)).toBe('400000000000000000');
    expect(failure('format_int', 1, 3).message).toBe('format_int: operand 2 must be one of {2, 8, 10, 16}');
  });

  it('trim family follows Go (cutsets of runes, Unicode spaces)', () => {
    expect(call('trim', '  abc  ', ' ')).toBe('abc');
    expect(call('trim', 'xyabcyx', 'xy')).toBe('abc');
    expect(call('trim_left', 'xxabc', 'x')).toBe('abc');
    expect(call('trim_right', 'abcxx', 'x')).toBe('abc');
    expect(call('trim_suffix', 'abc.txt', '.txt')).toBe('abc');
    expect(call('trim_suffix', 'abc', '')).toBe('abc');
    expect(call('trim_space', '\t\n abc \u00a0\u0085')).toBe('abc');
    expect(call('trim_space', '\ufeffabc')).toBe('\ufeffabc');
  });

  it('strings.count, strings.reverse, strings.replace_n', () => {
    expect(call('strings.count', 'cheese', 'e')).toBe(3);
    expect(call('strings.count', 'five', '')).toBe(5);
    expect(call('strings.count', 'aaaa', 'aa')).toBe(2);
    expect(call('strings.reverse', 'aé😀')).toBe('😀éa');
    expect(call('strings.replace_n', { a: '1', b: '2' }, 'abcab')).toBe('12c12');
    // Earlier keys (in sorted order) win at the same position.
    expect(call('strings.replace_n', { ab: 'X', a: 'Y' }, 'abab')).toBe('YbYb');
    expect(failure('strings.replace_n', { a: 1 }, 'a').message).toBe(
      'strings.replace_n: operand 1 non-string value found in pattern object',
    );
  });

  it('any_prefix_match and any_suffix_match', () => {
    expect(call('strings.any_prefix_match', 'foobar', 'foo')).toBe(true);
    expect(call('strings.any_prefix_match', ['x', 'foobar'], set('y', 'foo'))).toBe(true);
    expect(call('strings.any_prefix_match', [], 'a')).toBe(false);
    expect(call('strings.any_suffix_match', 'foobar', ['bar'])).toBe(true);
    expect(failure('strings.any_prefix_match', 1, 'a').message).toBe(
      'strings.any_prefix_match: operand 1 must be one of {string, set, array} but got number',
    );
    expect(failure('strings.any_suffix_match', 'a', [1]).message).toBe(
      'strings.any_suffix_match: operand 2 must be array of strings but got array containing number',
    );
  });
});

describe('sprintf (Go fmt)', () => {
  const f = (format: string, ...args: unknown[]) => call('sprintf', format, args);

  it('formats strings and integers', () => {
    expect(f('User %s from %s', 'alice', 'eng')).toBe('User alice from eng');
    expect(f('%d', 42)).toBe('42');
    expect(f('%5d|%-5d|%05d', 42, 42, 42)).toBe('   42|42   |00042');
    expect(f('%+d % d', 5, 5)).toBe('+5  5');
    expect(f('%x %X %o %b %#x %#o', 255, 255, 64, 15, 255, 8)).toBe('ff FF 100 1111 0xff 010');
    expect(f('%c %q %U', 65, 65, 0x1f600)).toBe("A 'A' U+1F600");
    expect(f('%.3d', 7)).toBe('007');
    expect(f('100%%')).toBe('100%');
  });

  it('prints big integers exactly', () => {
    expect(f('%s', 123456789123456789123n)).toBe('123456789123456789123');
    expect(f('%v', 1208925819614629174706175n)).toBe('1208925819614629174706175');
    expect(f('%d', 9223372036854775808n)).toBe('9223372036854775808');
    expect(f('%x', 2n ** 64n)).toBe('10000000000000000');
    expect(f('%v', 9223372036854775807n)).toBe('9223372036854775807');
  });

  it('formats floats as Go does', () => {
    expect(f('%f', 3.25)).toBe('3.250000');
    expect(f('%.2f', 1.23456)).toBe('1.23');
    expect(f('%v', 1.5)).toBe('1.5');
    expect(f('%v', 1234567.5)).toBe('1.2345675e+06');
    expect(f('%v', 0.00001)).toBe('1e-05');
    expect(f('%e', 1234.5678)).toBe('1.234568e+03');
    expect(f('%g', 0.5)).toBe('0.5');
    expect(f('%.3g', 1234.5678)).toBe('1.23e+03');
    expect(f('%.3g', 12.5)).toBe('12.5');
    expect(f('%8.2f|', 1.23456)).toBe('    1.23|');
  });

  it('renders other values as Rego terms', () => {
    expect(f('%v', { key: 'value' })).toBe('{"key": "value"}');
    expect(f('%v', [1, 'a', null])).toBe('[1, "a", null]');
    expect(f('%v', set())).toBe('set()');
    expect(f('%v', set(2, 1))).toBe('{1, 2}');
    expect(f('%v %v', true, null)).toBe('true null');
    expect(f('%s', { b: [1], a: set('x') })).toBe('{"a": {"x"}, "b": [1]}');
  });

  it('quotes with %q and hex-encodes strings with %x', () => {
    expect(f('%q', 'a"b\n')).toBe('"a\\"b\\n"');
    expect(f('%x', 'hi')).toBe('6869');
    expect(f('% x', 'hi')).toBe('68 69');
    expect(f('%.2s|%5s|%-5s|', 'abcdef', 'ab', 'ab')).toBe('ab|   ab|ab   |');
  });

  it('reports mismatches inline, as Go', () => {
    expect(f('%d', 'x')).toBe('%!d(string=x)');
    expect(f('%s', 5)).toBe('%!s(int=5)');
    expect(f('%d', 1.5)).toBe('%!d(float64=1.5)');
    expect(f('%t', true)).toBe('%!t(string=true)');
    expect(f('%f', 2n ** 70n)).toBe('%!f(big.Int=1180591620717411303424)');
    expect(f('Value: %s %d', 'only_one')).toBe('Value: only_one %!d(MISSING)');
    expect(f('%s', 'a', 1)).toBe('a%!(EXTRA int=1)');
    expect(f('%', 1)).toBe('%!(NOVERB)%!(EXTRA int=1)');
    expect(f('%T %T %T %T', 1, 'a', 1.5, 2n ** 70n)).toBe('int string float64 *big.Int');
  });

  it('wants an array of arguments', () => {
    expect(failure('sprintf', '%s', 'a').message).toBe('sprintf: operand 2 must be array but got string');
  });
});

describe('large inputs', () => {
  it('handle megabyte strings', () => {
    const big = 'é,'.repeat(500_000);
    expect((call('split', big, ',') as unknown[]).length).toBe(500_001);
    expect(call('count', big)).toBe(1_000_000);
    expect(call('indexof', `${big}x`, 'x')).toBe(1_000_000);
    expect(call('substring', big, 999_998, 5)).toBe('é,');
    expect(call('strings.count', big, 'é')).toBe(500_000);
    expect((call('replace', big, ',', ';') as string).length).toBe(1_000_000);
  });

  it('bound sprintf widths', () => {
    expect((call('sprintf', '%999999999d', [1]) as string).length).toBe(1_000_000);
  });
});
