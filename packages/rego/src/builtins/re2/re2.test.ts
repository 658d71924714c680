// biome-ignore-all lint/suspicious/noTemplateCurlyInString: Go replacement templates use ${name}
import { describe, expect, it } from 'vitest';
import { MAX_VISITED_BITS, Regex, RegexInputTooLargeError, RegexSyntaxError } from './index.js';

function match(pattern: string, s: string): string | null {
  const m = Regex.compile(pattern).execAt(s, 0, false);
  return m === null ? null : s.slice(m[0], m[1]);
}

function groups(pattern: string, s: string): (string | null)[] | null {
  const re = Regex.compile(pattern);
  const m = re.execAt(s, 0, true);
  if (m === null) return null;
  const out: (string | null)[] = [];
  for (let g = 0; g <= re.numCap; g++) out.push(m[2 * g]! < 0 ? null : s.slice(m[2 * g], m[2 * g + 1]));
  return out;
}

function syntaxError(pattern: string): string {
  try {
    Regex.compile(pattern);
  } catch (e) {
    if (e instanceof RegexSyntaxError) return e.message;
    throw e;
  }
  throw new Error(`${pattern} compiled`);
}

describe('RE2 syntax errors, with Go messages', () => {
  it.each([
    ['\\1', 'invalid escape sequence: `\\1`'],
    ['(a)\\1', 'invalid escape sequence: `\\1`'],
    ['\\8', 'invalid escape sequence: `\\8`'],
    ['\\Z', 'invalid escape sequence: `\\Z`'],
    ['\\C', 'invalid escape sequence: `\\C`'],
    ['[\\b]', 'invalid escape sequence: `\\b`'],
    ['(?=a)', 'invalid or unsupported Perl syntax: `(?=`'],
    ['(?!a)', 'invalid or unsupported Perl syntax: `(?!`'],
    ['(?<=a)b', 'invalid named capture: `(?<=a)b`'],
    ['(?<!a)b', 'invalid named capture: `(?<!a)b`'],
    ['(?i', 'invalid or unsupported Perl syntax: `(?i`'],
    ['(?P=n)', 'invalid or unsupported Perl syntax: `(?P`'],
    ['a**', 'invalid nested repetition operator: `**`'],
    ['a*+', 'invalid nested repetition operator: `*+`'],
    ['a++', 'invalid nested repetition operator: `++`'],
    ['a?+', 'invalid nested repetition operator: `?+`'],
    ['a{2}{3}', 'invalid nested repetition operator: `{2}{3}`'],
    ['*a', 'missing argument to repetition operator: `*`'],
    ['(+)', 'missing argument to repetition operator: `+`'],
    ['a|*', 'missing argument to repetition operator: `*`'],
    ['x{1001}', 'invalid repeat count: `{1001}`'],
    ['x{2,1}', 'invalid repeat count: `{2,1}`'],
    ['(x{500}){3}', 'invalid repeat count: `{3}`'],
    ['(abc', 'missing closing ): `(abc`'],
    ['abc)', 'unexpected ): `abc)`'],
    ['[a', 'missing closing ]: `[a`'],
    ['[z-a]', 'invalid character class range: `z-a`'],
    ['[[:foo:]]', 'invalid character class range: `[:foo:]`'],
    ['\\pX', 'invalid character class range: `\\pX`'],
    ['\\p{Klingon}', 'invalid character class range: `\\p{Klingon}`'],
    ['(?P<>a)', 'invalid named capture: `(?P<>`'],
    ['(?P<a-b>x)', 'invalid named capture: `(?P<a-b>`'],
    ['(?P<n>a)(?P<n>b)', 'invalid named capture: `(?P<n>`'],
    ['a\\', 'trailing backslash at end of expression: ``'],
    ['\\x{110000}', 'invalid escape sequence: `\\x{110000`'],
    ['\\xZZ', 'invalid escape sequence: `\\xZZ`'],
  ])('%s', (pattern, message) => {
    expect(syntaxError(pattern)).toBe(`error parsing regexp: ${message}`);
  });

  it('accepts what RE2 accepts', () => {
    for (const p of [
      'a{,3}',
      'a{',
      '{',
      'x{2}',
      '^*',
      '[]a]',
      '[^]a]',
      '[a-]',
      '(?i)(?m)(?s)(?U)x',
      '(?i:a)(?-i:b)',
      '\\Q*+\\E',
      '(?P<name>x)(?<n2>y)',
      '\\pN\\p{^L}\\P{Greek}',
      '[[:^alpha:]\\d]',
    ]) {
      expect(() => Regex.compile(p), p).not.toThrow();
    }
  });
});

describe('matching', () => {
  it('is leftmost-first', () => {
    expect(match('a|ab', 'ab')).toBe('a');
    expect(match('ab|a', 'ab')).toBe('ab');
    expect(groups('(a|ab)(c|bcd)(d*)', 'abcd')).toEqual(['abcd', 'a', 'bcd', '']);
    expect(match('a+?', 'aaa')).toBe('a');
    expect(match('a{2,3}?', 'aaaa')).toBe('aa');
    expect(match('(?U)a+', 'aaa')).toBe('a');
    expect(match('(?U)a+?', 'aaa')).toBe('aaa');
  });

  it('anchors ^ and $ at the text unless (?m), with no newline exception for $', () => {
    expect(match('a$', 'a\n')).toBeNull();
    expect(match('(?m)a$', 'a\n')).toBe('a');
    expect(match('^b', 'a\nb')).toBeNull();
    expect(match('(?m)^b$', 'a\nb\nc')).toBe('b');
    expect(match('\\Aa', 'ba')).toBeNull();
    expect(match('a\\z', 'a\n')).toBeNull();
  });

  it('treats . as any rune but newline, including \\r', () => {
    expect(match('.+', 'a\r\nb')).toBe('a\r');
    expect(match('(?s).+', 'a\nb')).toBe('a\nb');
    expect(match('^.$', '😀')).toBe('😀');
    expect(match('[^a]', '\n')).toBe('\n');
  });

  it('uses ASCII Perl classes and word boundaries', () => {
    expect(match('\\w+', 'héllo')).toBe('h');
    expect(match('\\d+', '١٢3')).toBe('3');
    expect(match('\\s+', 'a\u00a0\t b')).toBe('\t ');
    expect(match('\\s', '\v')).toBeNull();
    expect(match('\\bfoo\\b', 'a foo b')).toBe('foo');
    expect(match('\\bfoo\\b', 'afoo')).toBeNull();
    expect(match('\\Bo\\B', 'foo')).toBe('o');
  });

  it('supports POSIX and Unicode classes', () => {
    expect(match('[[:alpha:]]+', '12ab3')).toBe('ab');
    expect(match('[[:^digit:]]+', '12ab3')).toBe('ab');
    expect(match('\\pL+', '1ünï2')).toBe('ünï');
    expect(match('\\p{Greek}+', 'aαβ')).toBe('αβ');
    expect(match('\\PL+', 'ab12cd')).toBe('12');
    expect(match('\\p{^L}+', 'ab12cd')).toBe('12');
    expect(match('[\\p{Lu}\\d]+', 'abC1Dx')).toBe('C1D');
    expect(match('\\p{Any}+', 'a\nb')).toBe('a\nb');
  });

  it('folds case with (?i), including special folds', () => {
    expect(match('(?i)hello', 'HeLLo')).toBe('HeLLo');
    expect(match('(?i)k', '\u212a')).toBe('\u212a');
    expect(match('(?i)s', '\u017f')).toBe('\u017f');
    expect(match('(?i)[a-c]+', 'ABCd')).toBe('ABC');
    expect(match('(?i)σ', 'Σ')).toBe('Σ');
    expect(match('(?i)σ', 'ς')).toBe('ς');
    expect(match('(?i:a)b', 'AB')).toBeNull();
    expect(match('(?i:a)b', 'Ab')).toBe('Ab');
    expect(match('(?i)a(?-i)b', 'AB')).toBeNull();
  });

  it('parses escapes and literal text', () => {
    expect(match('\\x41\\x{42}\\103', 'ABC')).toBe('ABC');
    expect(match('\\x{1F600}', 'x😀')).toBe('😀');
    expect(match('\\Qa.b*\\E+', 'a.b**')).toBe('a.b**');
    expect(match('a{,3}', 'a{,3}')).toBe('a{,3}');
    expect(match('\\.\\*', 'a.*')).toBe('.*');
    expect(match('a|', 'b')).toBe('');
  });

  it('reports groups, unset ones as absent, named ones by index', () => {
    expect(groups('(a)|(b)', 'b')).toEqual(['b', null, 'b']);
    expect(groups('(?P<x>a)(b)?', 'a')).toEqual(['a', 'a', null]);
    expect(Regex.compile('(?P<first>a)(?<second>b)(c)').names).toEqual([
      undefined,
      'first',
      'second',
      undefined,
    ]);
  });
});

describe('Find, Split and Replace with Go semantics', () => {
  it('FindAll skips an empty match right after a match', () => {
    const idx = (p: string, s: string, n = -1) =>
      Regex.compile(p)
        .findAll(s, n, false)
        .map((m) => [m[0], m[1]]);
    expect(idx('a*', 'baaac')).toEqual([
      [0, 0],
      [1, 4],
      [5, 5],
    ]);
    expect(idx('a.', 'paranormal')).toEqual([
      [1, 3],
      [3, 5],
      [8, 10],
    ]);
    expect(idx('a.', 'paranormal', 2)).toHaveLength(2);
    expect(idx('', '😀é')).toEqual([
      [0, 0],
      [2, 2],
      [3, 3],
    ]);
  });

  it('Split matches the examples in Go documentation', () => {
    expect(Regex.compile('a').split('banana', -1)).toEqual(['b', 'n', 'n', '']);
    expect(Regex.compile('a').split('apple', 0)).toEqual([]);
    expect(Regex.compile('a').split('grape', 1)).toEqual(['grape']);
    expect(Regex.compile('z+').split('pizza', -1)).toEqual(['pi', 'a']);
    expect(Regex.compile('a*').split('abaabaccadaaae', 5)).toEqual(['', 'b', 'b', 'c', 'cadaaae']);
    expect(Regex.compile('').split('abc', -1)).toEqual(['a', 'b', 'c']);
    expect(Regex.compile(',').split('', -1)).toEqual(['']);
  });

  it('ReplaceAll expands $1, ${1}, $name and $$ as Go', () => {
    const re = Regex.compile('a(x*)b');
    expect(re.replaceAll('-ab-axxb-', 'T')).toBe('-T-T-');
    expect(re.replaceAll('-ab-axxb-', '$1')).toBe('--xx-');
    expect(re.replaceAll('-ab-axxb-', '$1W')).toBe('---');
    expect(re.replaceAll('-ab-axxb-', '${1}W')).toBe('-W-xxW-');
    // A group named "1W" takes $1W; ${1}W still means group 1.
    expect(Regex.compile('a(?P<1W>x*)b').replaceAll('-ab-axxb-', '$1W')).toBe('--xx-');
    expect(Regex.compile('a(?P<1W>x*)b').replaceAll('-ab-axxb-', '${1}W')).toBe('-W-xxW-');
    expect(re.replaceAll('ab', '$$ $ ${x')).toBe('$ $ ${x');
    expect(Regex.compile('a*').replaceAll('baaac', '<$0>')).toBe('<>b<aaa>c<>');
    expect(Regex.compile('(?P<first>\\w+) (?P<last>\\w+)').replaceAll('John Smith', '${last}, $first')).toBe(
      'Smith, John',
    );
  });
});

describe('hostile patterns and inputs', () => {
  const longAs = 'a'.repeat(20000);

  it('matches catastrophic-backtracking patterns in linear time', () => {
    // Each of these takes exponential time in a backtracking engine.
    for (const p of ['^(a+)+$', '^(a|a)*$', '^(a*)*$', '(x+x+)+y', '^(a|aa)+$', '(.*a){12}']) {
      const re = Regex.compile(p);
      expect(re.test(`${longAs}b`), p).toBe(p === '(.*a){12}');
    }
  });

  it('bounds the memory of a search', () => {
    const re = Regex.compile('(a|b|c|d|e|f|g|h)*z');
    const input = 'a'.repeat(Math.ceil(MAX_VISITED_BITS / 20));
    expect(() => re.test(input)).toThrow(RegexInputTooLargeError);
  });

  it('refuses programs that are too large', () => {
    expect(syntaxError('((((((((((a{1000}){1000}')).toMatch(/invalid repeat count|missing closing/);
    expect(() => Regex.compile('[a-z]{1000}'.repeat(150))).toThrow('expression too large');
  });

  it('refuses nesting that is too deep', () => {
    expect(() => Regex.compile(`${'('.repeat(1500)}a${')'.repeat(1500)}`)).toThrow(
      'expression nests too deeply',
    );
  });
});
