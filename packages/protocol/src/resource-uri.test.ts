import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InvalidResourceUri } from './errors.js';
import {
  formatKbsUri,
  formatResourcePath,
  formatResourceUri,
  kbsUriRequestPath,
  parseKbsUri,
  parseResourcePath,
  parseResourceUri,
} from './resource-uri.js';

const vector = (path: string) => join(import.meta.dirname, '..', '..', '..', 'test', 'vectors', path);

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
    ['kbs+pkcs11:///repo/type/tag', /names the pkcs11 plugin/],
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

describe('parseKbsUri (kbs+<plugin>:// URIs)', () => {
  it.each([
    ['kbs:///a/b/c', { plugin: 'resource', path: ['a', 'b', 'c'] }, 'resource/a/b/c'],
    ['kbs+resource:///a/b/c', { plugin: 'resource', path: ['a', 'b', 'c'] }, 'resource/a/b/c'],
    ['kbs+sample:///anything', { plugin: 'sample', path: ['anything'] }, 'sample/anything'],
    [
      'kbs+nebula-ca:///credential?name=pod-1&ip=10.9.0.2%2F24',
      { plugin: 'nebula-ca', path: ['credential'], query: 'name=pod-1&ip=10.9.0.2%2F24' },
      'nebula-ca/credential?name=pod-1&ip=10.9.0.2%2F24',
    ],
    [
      'kbs+custom://example.com:8080/repo/type/tag',
      { plugin: 'custom', path: ['repo', 'type', 'tag'], host: 'example.com', port: 8080 },
      'custom/repo/type/tag',
    ],
    ['kbs+pkcs11:///a/b/c/d/e', { plugin: 'pkcs11', path: ['a', 'b', 'c', 'd', 'e'] }, 'pkcs11/a/b/c/d/e'],
  ])('parses %s', (text, expected, requestPath) => {
    const uri = parseKbsUri(text);
    expect(uri).toEqual(expected);
    expect(kbsUriRequestPath(uri)).toBe(requestPath);
    // kbs+resource:// is written back in its short form, as upstream serializes it.
    expect(formatKbsUri(uri)).toBe(text.replace('kbs+resource://', 'kbs://'));
  });

  it.each([
    ['kbs+:///a/b/c', /needs a plugin name/],
    ['kbs+Sample:///a', /does not match/],
    ['kbs+sa_mple:///a', /does not match/],
    ['kbs+sample://', /missing/],
    ['kbs+sample:///', /path segment 1 is empty/],
    ['kbs+sample:///a//b', /path segment 2 is empty/],
    ['kbs+sample:///a/../b', /path segment 2/],
    ['kbs+sample:///a/%2e%2e', /percent-encoding/],
    ['kbs+sample:///.hidden', /does not match/],
    ['kbs+sample:///a#x', /fragments/],
    ['kbs+sample:///a?b c', /invalid query/],
    [`kbs+sample:///${Array(17).fill('a').join('/')}`, /more than 16 path segments/],
    ['kbs:///a/b', /exactly 3 segments/],
    ['kbs+resource:///a/b/c/d', /exactly 3 segments/],
  ])('rejects %j', (text, message) => {
    expect(() => parseKbsUri(text)).toThrow(InvalidResourceUri);
    expect(() => parseKbsUri(text)).toThrow(message);
  });

  it('parseResourceUri takes kbs+resource:// and refuses other plugins', () => {
    expect(parseResourceUri('kbs+resource:///r/t/g')).toEqual({ repository: 'r', type: 't', tag: 'g' });
    expect(() => parseResourceUri('kbs+sample:///r/t/g')).toThrow(/names the sample plugin/);
  });

  it("reads guest-components' own RESOURCE_URI.md examples and mapping", () => {
    const doc = readFileSync(vector('guest-components/docs/RESOURCE_URI.md'), 'utf8');
    const examples = doc.slice(doc.indexOf('## Examples'), doc.indexOf('## Mapping'));
    const uris = [...examples.matchAll(/^\* `(kbs[^`]*)`/gm)].map((m) => m[1] as string);
    expect(uris.length).toBeGreaterThanOrEqual(5);
    for (const uri of uris) {
      if (uri === 'kbs:///repo/nested/type/tag/extra') {
        // The guest passes any number of segments on; trustee's resource plugin serves only
        // repository/type/tag, so the resource plugin's URIs are checked for that here.
        expect(() => parseKbsUri(uri)).toThrow(/exactly 3 segments/);
        continue;
      }
      const parsed = parseKbsUri(uri);
      expect(formatKbsUri(parsed), uri).toBe(uri);
    }
    expect(uris).toContain('kbs+pkcs11:///a/b/c');
    expect(parseKbsUri('kbs+pkcs11:///a/b/c').plugin).toBe('pkcs11');
    // The worked mapping: the URI's path after `/kbs/v0/`.
    const mapping = doc.slice(doc.indexOf('## Mapping'));
    const from = /For example, `(kbs:\/\/[^`]+)` becomes/.exec(mapping)?.[1] as string;
    const to = /```plaintext\n(http:\/\/[^\n]+)\n```\n\nIf no plugin/.exec(mapping)?.[1] as string;
    expect(from).toBe('kbs://example.cckbs.org:8081/alice/decryption-key/1');
    const parsed = parseKbsUri(from);
    expect(`http://${parsed.host}:${parsed.port}/kbs/v0/${kbsUriRequestPath(parsed)}`).toBe(to);
  });
});
