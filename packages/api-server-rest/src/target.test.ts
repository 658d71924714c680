import { describe, expect, it } from 'vitest';
import { parseQuery, parseRequestTarget, splitNthSlash } from './target.js';

describe('splitNthSlash (upstream utils.rs cases)', () => {
  const p = '/cdh/resource/default/';
  it.each([
    [0, null],
    [1, ['', '/cdh/resource/default/']],
    [2, ['/cdh', '/resource/default/']],
    [3, ['/cdh/resource', '/default/']],
    [4, ['/cdh/resource/default', '/']],
    [5, null],
  ])('n=%i', (n, want) => {
    expect(splitNthSlash(p, n)).toEqual(want);
  });

  it('handles paths with one slash and empty segments', () => {
    expect(splitNthSlash('/aa', 2)).toBeNull();
    expect(splitNthSlash('/aa/', 2)).toEqual(['/aa', '/']);
    expect(splitNthSlash('//x', 2)).toEqual(['/', '/x']);
    expect(splitNthSlash('', 1)).toBeNull();
  });
});

describe('parseRequestTarget', () => {
  it('splits origin-form targets without decoding', () => {
    expect(parseRequestTarget('/cdh/resource/a/%2e%2e/c?x=1')).toEqual({
      path: '/cdh/resource/a/%2e%2e/c',
      query: 'x=1',
    });
    expect(parseRequestTarget('/info')).toEqual({ path: '/info', query: null });
    expect(parseRequestTarget('/info?')).toEqual({ path: '/info', query: '' });
    expect(parseRequestTarget('/a?b?c')).toEqual({ path: '/a', query: 'b?c' });
  });

  it('drops a fragment', () => {
    expect(parseRequestTarget('/info#x?y')).toEqual({ path: '/info', query: null });
  });

  it('reduces absolute-form targets to path and query', () => {
    expect(parseRequestTarget('http://127.0.0.1:8006/aa/token?token_type=kbs')).toEqual({
      path: '/aa/token',
      query: 'token_type=kbs',
    });
    expect(parseRequestTarget('http://127.0.0.1:8006')).toEqual({ path: '/', query: null });
    expect(parseRequestTarget('http://h?q=1')).toEqual({ path: '/', query: 'q=1' });
  });

  it('keeps other forms as an unroutable path', () => {
    expect(parseRequestTarget('*').path).toBe('*');
    expect(parseRequestTarget('127.0.0.1:8006').path).toBe('127.0.0.1:8006');
    expect(parseRequestTarget('').path).toBe('');
  });
});

describe('parseQuery', () => {
  it('decodes form-urlencoded values; the last repeated name wins', () => {
    const q = parseQuery('token_type=kbs&runtime_data=a+b%20c&token_type=coco_as&flag');
    expect(q.get('token_type')).toBe('coco_as');
    expect(q.get('runtime_data')).toBe('a b c');
    expect(q.get('flag')).toBe('');
  });

  it('keeps malformed escapes literal and replaces invalid UTF-8', () => {
    const q = parseQuery('a=%zz%4&b=%ff%fe&%=%');
    expect(q.get('a')).toBe('%zz%4');
    expect(q.get('b')).toBe('\ufffd\ufffd');
    expect(q.get('%')).toBe('%');
  });

  it('is empty for no query', () => {
    expect(parseQuery(null).size).toBe(0);
    expect(parseQuery('').size).toBe(0);
  });
});
