// biome-ignore-all lint/suspicious/noTemplateCurlyInString: Go replacement templates use ${name}
import { describe, expect, it } from 'vitest';
import { call, callIn, failure, show, testContext } from './testkit.js';

describe('regex.match', () => {
  it('matches kata genpolicy patterns', () => {
    expect(call('regex.match', '^[0-9]+$', '1234')).toBe(true);
    expect(call('regex.match', '^[0-9]+$', '12a4')).toBe(false);
    expect(call('regex.match', '^[0-9]+:[0-9]+$', '10:20')).toBe(true);
    expect(call('regex.match', '^[a-z0-9]{64}$', 'a'.repeat(64))).toBe(true);
    expect(call('regex.match', '^[a-z0-9]{64}$', 'a'.repeat(65))).toBe(false);
    const ipv4 = '((25[0-5]|(2[0-4]|1\\d|[1-9]|)\\d)\\.?\\b){4}';
    const svc = '[A-Z0-9_\\.\\-]+';
    const env = `^${svc}_PORT_[0-9]{1,5}_TCP=tcp://${ipv4}:[0-9]{1,5}$`;
    expect(call('regex.match', env, 'KUBERNETES_PORT_443_TCP=tcp://10.0.0.1:443')).toBe(true);
    expect(call('regex.match', env, 'KUBERNETES_PORT_443_TCP=tcp://10.0.0.256:443')).toBe(false);
    expect(call('regex.match', '^HOSTNAME=[a-zA-Z0-9_\\.\\-]+$', 'HOSTNAME=busybox-cc')).toBe(true);
    expect(call('regex.match', '(^|/)\\.\\.(/|$)', 'a/../b')).toBe(true);
    expect(call('regex.match', 'b', 'abc')).toBe(true);
    expect(call('re_match', '^a', 'abc')).toBe(true);
  });

  it('reports bad patterns as builtin errors with Go messages', () => {
    const e = failure('regex.match', '(a)\\1', 'aa');
    expect(e.code).toBe('eval_builtin_error');
    expect(e.message).toBe('regex.match: error parsing regexp: invalid escape sequence: `\\1`');
    expect(failure('regex.match', '(?=x)', 'x').message).toBe(
      'regex.match: error parsing regexp: invalid or unsupported Perl syntax: `(?=`',
    );
    expect(failure('regex.match', 1, 'x').message).toBe(
      'regex.match: operand 1 must be string but got number',
    );
    expect(failure('regex.match', 'x', null).message).toBe(
      'regex.match: operand 2 must be string but got null',
    );
  });

  it('enforces the pattern length limit', () => {
    const ctx = testContext({ maxRegexLength: 8 });
    expect(callIn(ctx, 'regex.match', 'abcdefgh', 'abcdefgh')).toBe(true);
    expect(() => callIn(ctx, 'regex.match', 'abcdefghi', 'x')).toThrow(
      'regex.match: regular expression longer than 8 characters',
    );
    expect(callIn(ctx, 'regex.is_valid', 'abcdefghi')).toBe(false);
  });

  it('stays linear on pathological patterns', () => {
    expect(call('regex.match', '^(a+)+$', `${'a'.repeat(50000)}!`)).toBe(false);
  });
});

describe('regex.is_valid', () => {
  it('is false rather than an error', () => {
    expect(call('regex.is_valid', '.*')).toBe(true);
    expect(call('regex.is_valid', '(')).toBe(false);
    expect(call('regex.is_valid', '\\1')).toBe(false);
    expect(call('regex.is_valid', 1)).toBe(false);
  });
});

describe('regex.find_all_string_submatch_n', () => {
  it('returns every group, "" for groups that did not take part', () => {
    expect(show(call('regex.find_all_string_submatch_n', 'a(x*)b(y|z)?', '-axxb-ab-', -1))).toBe(
      '[["axxb", "xx", ""], ["ab", "", ""]]',
    );
    expect(show(call('regex.find_all_string_submatch_n', 'a(x*)b', '-ab-axxb-', 1))).toBe('[["ab", ""]]');
    expect(show(call('regex.find_all_string_submatch_n', 'q', 'abc', -1))).toBe('[]');
    expect(show(call('regex.find_all_string_submatch_n', 'a', 'aaa', 0))).toBe('[]');
  });

  it('extracts the bundle id as kata genpolicy does', () => {
    const pattern = '^/run/kata-containers/shared/containers/([a-z0-9]{64})/rootfs$';
    const root = `/run/kata-containers/shared/containers/${'b'.repeat(64)}/rootfs`;
    expect(show(call('regex.find_all_string_submatch_n', pattern, root, 1))).toBe(
      `[["${root}", "${'b'.repeat(64)}"]]`,
    );
  });
});

describe('regex.find_n, regex.split and regex.replace', () => {
  it('find_n', () => {
    expect(show(call('regex.find_n', 'a.', 'paranormal', -1))).toBe('["ar", "an", "al"]');
    expect(show(call('regex.find_n', 'a.', 'paranormal', 2))).toBe('["ar", "an"]');
    expect(failure('regex.find_n', 'a', 'a', 1.5).message).toBe(
      'regex.find_n: operand 3 must be integer number but got floating-point number',
    );
  });

  it('split', () => {
    expect(show(call('regex.split', 'a', 'banana'))).toBe('["b", "n", "n", ""]');
    expect(show(call('regex.split', '\\s*,\\s*', 'a , b,c'))).toBe('["a", "b", "c"]');
    expect(show(call('regex.split', 'x', ''))).toBe('[""]');
  });

  it('replace expands group references', () => {
    expect(call('regex.replace', '-ab-axxb-', 'a(x*)b', '${1}W')).toBe('-W-xxW-');
    expect(call('regex.replace', 'abc', 'b', '$$')).toBe('a$c');
    expect(call('regex.replace', 'baaac', 'a*', '-')).toBe('-b-c-');
  });
});

describe('regex.template_match', () => {
  it('matches literal text with regexes between delimiters', () => {
    expect(call('regex.template_match', 'urn:foo:{.*}', 'urn:foo:bar:baz', '{', '}')).toBe(true);
    expect(call('regex.template_match', 'urn:foo.bar.com:{.*}', 'urn:foo.bar.com:bar:baz', '{', '}')).toBe(
      true,
    );
    expect(call('regex.template_match', 'urn:foo.bar.com:{.*}', 'urn:fooXbar.com:bar', '{', '}')).toBe(false);
    expect(call('regex.template_match', 'urn:foo:<[0-9]{2}>', 'urn:foo:12', '<', '>')).toBe(true);
    expect(call('regex.template_match', 'urn:foo:<[0-9]{2}>', 'urn:foo:123', '<', '>')).toBe(false);
  });

  it('rejects unbalanced templates and long delimiters', () => {
    expect(failure('regex.template_match', 'urn:{.*', 'x', '{', '}').message).toBe(
      'regex.template_match: unbalanced braces in "urn:{.*"',
    );
    expect(failure('regex.template_match', 'x', 'x', '{{', '}').message).toBe(
      'regex.template_match: start delimiter has to be exactly one character long but is 2 long',
    );
  });
});
