import { describe, expect, it } from 'vitest';
import { InvalidResourceUri } from './errors.js';
import {
  formatResourcePath,
  formatResourceUri,
  parseResourcePath,
  parseResourceUri,
} from './resource-uri.js';

describe('parseResourceUri', () => {
  it.each([
    ['kbs:///alice/cosign-key/213', { repository: 'alice', type: 'cosign-key', tag: '213' }],
    ['kbs:///default/key/1', { repository: 'default', type: 'key', tag: '1' }],
    [
      'kbs://example.com:8080/repo/type/tag',
      { host: 'example.com', port: 8080, repository: 'repo', type: 'type', tag: 'tag' },
    ],
    [
      'kbs://10.0.0.1/my_repo/a.b/c-d.e',
      { host: '10.0.0.1', repository: 'my_repo', type: 'a.b', tag: 'c-d.e' },
    ],
    ['kbs://[::1]:8443/r/t/g', { host: '[::1]', port: 8443, repository: 'r', type: 't', tag: 'g' }],
    [
      'kbs:///repo/type/tag?param1=value1&param2=value2',
      { repository: 'repo', type: 'type', tag: 'tag', query: 'param1=value1&param2=value2' },
    ],
  ])('parses %s', (text, expected) => {
    const uri = parseResourceUri(text);
    expect(uri).toEqual(expected);
    expect(formatResourceUri(uri)).toBe(text);
  });

  it.each([
    ['http:///repo/type/tag', /scheme must be kbs/],
    ['kbs+pkcs11:///repo/type/tag', /only the kbs scheme/],
    ['kbs:/repo/type/tag', /scheme must be kbs/],
    ['KBS:///repo/type/tag', /scheme/],
    ['kbs://', /missing/],
    ['kbs:///repo/type', /exactly 3 segments/],
    ['kbs:///repo/type/tag/extra', /exactly 3 segments/],
    ['kbs:///repo/type/tag/', /exactly 3 segments/],
    ['kbs:////repo/type/tag', /exactly 3 segments/],
    ['kbs:///repo//tag', /type is empty/],
    ['kbs:///../type/tag', /repository/],
    ['kbs:///repo/./tag', /type/],
    ['kbs:///repo/type/..', /tag/],
    ['kbs:///repo/%2e%2e/tag', /percent-encoding/],
    ['kbs:///repo/a%2fb/tag', /percent-encoding/],
    ['kbs:///.hidden/type/tag', /does not match/],
    ['kbs:///re po/type/tag', /does not match/],
    ['kbs:///repo/type/tag#frag', /fragments/],
    ['kbs://user@host/repo/type/tag', /user information/],
    ['kbs://host:0/repo/type/tag', /invalid port/],
    ['kbs://host:65536/repo/type/tag', /invalid port/],
    ['kbs://host:/repo/type/tag', /invalid port/],
    ['kbs://host:8080x/repo/type/tag', /invalid port/],
    ['kbs://ho_st/repo/type/tag', /invalid host/],
    ['kbs://-host/repo/type/tag', /invalid host/],
    ['kbs:///repo/type/tag?a b', /invalid query/],
    ['kbs:///repo/type/tag?%zz', /invalid query/],
    ['kbs:///repo/type/ta\u00e9g', /does not match/],
    ['kbs:///repo/type/tag\n', /does not match/],
    [`kbs:///${'a'.repeat(256)}/type/tag`, /longer than 255/],
    [`kbs:///repo/type/${'a'.repeat(5000)}`, /too long/],
  ])('rejects %j', (text, message) => {
    expect(() => parseResourceUri(text)).toThrow(InvalidResourceUri);
    expect(() => parseResourceUri(text)).toThrow(message);
  });

  it('rejects a non-string', () => {
    expect(() => parseResourceUri(42 as unknown as string)).toThrow(InvalidResourceUri);
  });
});

describe('parseResourcePath', () => {
  it('splits repo/type/tag', () => {
    expect(parseResourcePath('default/key/1')).toEqual({ repository: 'default', type: 'key', tag: '1' });
    expect(parseResourcePath('a..b/_x/-y')).toEqual({ repository: 'a..b', type: '_x', tag: '-y' });
  });
  it.each([
    '',
    'a/b',
    'a/b/c/d',
    '/a/b/c',
    'a/b/c/',
    'a//c',
    '../b/c',
    'a/../c',
    'a/b/..',
    'a/b/.',
    '%2e%2e/b/c',
    'a/%2e%2e/c',
    'a/b%2fc/d',
    'a/b/c%00',
    'a/b/c?x=1',
    'a\\b/c/d',
    'a/b/c\u0000',
  ])('rejects %j', (path) => {
    expect(() => parseResourcePath(path)).toThrow(InvalidResourceUri);
  });
  it('names the problem', () => {
    expect(() => parseResourcePath('a/%2e%2e/c')).toThrow(/type contains percent-encoding/);
    expect(() => parseResourcePath('a/b/c/d')).toThrow(/got 4/);
  });
  it('formats and validates', () => {
    expect(formatResourcePath({ repository: 'r', type: 't', tag: 'g' })).toBe('r/t/g');
    expect(() => formatResourcePath({ repository: 'r', type: '..', tag: 'g' })).toThrow(InvalidResourceUri);
    expect(() => formatResourceUri({ port: 80, repository: 'r', type: 't', tag: 'g' })).toThrow(
      /needs a host/,
    );
    expect(() => formatResourceUri({ host: 'h/x', repository: 'r', type: 't', tag: 'g' })).toThrow(
      InvalidResourceUri,
    );
  });
});
