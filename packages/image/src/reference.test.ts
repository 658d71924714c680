import { describe, expect, it } from 'vitest';
import {
  dockerImageName,
  familiarString,
  isName,
  isNameComponent,
  parseImageReference,
  parseNamed,
  parseNormalizedNamed,
  parseReference,
  policyIdentity,
  policyNamespaces,
  referenceName,
  referenceString,
  withTag,
} from './reference.js';

const D = `sha256:${'0123456789abcdef'.repeat(4)}`;

describe('parseNormalizedNamed', () => {
  it.each([
    ['busybox', 'docker.io/library/busybox'],
    ['busybox:1.36', 'docker.io/library/busybox:1.36'],
    ['library/busybox', 'docker.io/library/busybox'],
    ['docker.io/busybox', 'docker.io/library/busybox'],
    ['index.docker.io/busybox', 'docker.io/library/busybox'],
    ['index.docker.io/ns/repo:t', 'docker.io/ns/repo:t'],
    ['ns/repo', 'docker.io/ns/repo'],
    ['notlocalhost/repo', 'docker.io/notlocalhost/repo'],
    ['localhost/repo', 'localhost/repo'],
    ['localhost:5000/repo', 'localhost:5000/repo'],
    ['example.com/repo', 'example.com/repo'],
    ['example.com:8443/ns/repo:tag', 'example.com:8443/ns/repo:tag'],
    ['Example.COM/repo', 'Example.COM/repo'],
    [`quay.io/ns/repo@${D}`, `quay.io/ns/repo@${D}`],
    [`quay.io/ns/repo:tag@${D}`, `quay.io/ns/repo:tag@${D}`],
    ['a.b/c__d/e---f/g.h/i_j', 'a.b/c__d/e---f/g.h/i_j'],
    ['127.0.0.1:5000/x/y:Tag_1.0-x', '127.0.0.1:5000/x/y:Tag_1.0-x'],
  ])('%s → %s', (input, expected) => {
    expect(referenceString(parseNormalizedNamed(input))).toBe(expected);
  });

  it.each([
    ['', 'invalid reference format'],
    ['Busybox', 'invalid reference format: repository name must be lowercase'],
    ['example.com/Repo', 'invalid reference format: repository name must be lowercase'],
    [
      'a'.repeat(64).replace(/a/g, 'f'),
      `invalid repository name (${'f'.repeat(64)}), cannot specify 64-byte hexadecimal strings`,
    ],
    ['repo:', 'invalid reference format'],
    ['repo:-bad', 'invalid reference format'],
    [`repo:${'t'.repeat(129)}`, 'invalid reference format'],
    ['re$po', 'invalid reference format'],
    ['a//b', 'invalid reference format'],
    ['a/b/', 'invalid reference format'],
    ['repo__', 'invalid reference format'],
    ['repo___x', 'invalid reference format'],
    ['-repo', 'invalid reference format'],
    ['repo@sha256:abc', 'invalid reference format'],
    [`repo@sha256:${'0'.repeat(63)}`, 'invalid checksum digest length'],
    [`repo@md5:${'0'.repeat(32)}`, 'unsupported digest algorithm'],
    [`repo@sha256:${'A'.repeat(64)}`, 'invalid checksum digest format'],
    [`example.com/${'a'.repeat(250)}`, 'repository name must not be more than 255 characters'],
    ['example.com:port/repo', 'invalid reference format'],
    ['-example.com/repo', 'invalid reference format'],
  ])('%s fails: %s', (input, message) => {
    expect(() => parseNormalizedNamed(input)).toThrow(message);
  });

  it('does not backtrack exponentially on hostile names', () => {
    const hostile = `${'a-'.repeat(20000)}!`;
    expect(() => parseNormalizedNamed(hostile)).toThrow('invalid reference format');
    expect(() => parseNormalizedNamed(`x.com/${'a.'.repeat(20000)}`)).toThrow('invalid reference format');
  });
});

describe('parseReference (no normalisation)', () => {
  it('takes a first component as the domain when it can be one', () => {
    expect(parseReference('foo/bar')).toMatchObject({ domain: 'foo', path: 'bar' });
    expect(parseReference('foo')).toMatchObject({ domain: '', path: 'foo' });
    expect(parseReference('Foo/bar')).toMatchObject({ domain: 'Foo', path: 'bar' });
    expect(() => parseReference('FOO')).toThrow('repository name must be lowercase');
    expect(() => parseReference('')).toThrow('repository name must have at least one component');
  });
  it('name grammar pieces', () => {
    expect(isNameComponent('a.b_c__d---e')).toBe(true);
    expect(isNameComponent('a..b')).toBe(false);
    expect(isNameComponent('a._b')).toBe(false);
    expect(isNameComponent('')).toBe(false);
    expect(isName('host:5000/a/b')).toBe(true);
    expect(isName('host:5000')).toBe(false);
  });
});

describe('the docker transport', () => {
  it('adds :latest and refuses a tag with a digest', () => {
    expect(referenceString(parseImageReference('busybox'))).toBe('docker.io/library/busybox:latest');
    expect(referenceString(parseImageReference(`busybox@${D}`))).toBe(`docker.io/library/busybox@${D}`);
    expect(() => parseImageReference(`busybox:1@${D}`)).toThrow(
      'Docker references with both a tag and digest are currently not supported',
    );
  });

  it('familiar names and image names', () => {
    expect(familiarString(parseImageReference('docker.io/library/busybox'))).toBe('busybox:latest');
    expect(familiarString(parseImageReference('docker.io/ns/repo:t'))).toBe('ns/repo:t');
    expect(dockerImageName(parseImageReference('quay.io/a/b:c'))).toBe('docker://quay.io/a/b:c');
  });

  // The identity is the namespace list's first entry plus the tag or digest; namespaces go down to host[:port], then *.suffixes.
  const cases: Record<string, string[]> = {
    'example.com/ns/repo': ['example.com/ns/repo', 'example.com/ns', 'example.com', '*.com'],
    'example.com/repo': ['example.com/repo', 'example.com', '*.com'],
    'localhost/ns/repo': ['localhost/ns/repo', 'localhost/ns', 'localhost'],
    'localhost/repo': ['localhost/repo', 'localhost'],
    'notlocalhost/repo': ['docker.io/notlocalhost/repo', 'docker.io/notlocalhost', 'docker.io', '*.io'],
    'docker.io/repo': ['docker.io/library/repo', 'docker.io/library', 'docker.io', '*.io'],
    repo: ['docker.io/library/repo', 'docker.io/library', 'docker.io', '*.io'],
    'yet.another.example.com:8443/ns/repo': [
      'yet.another.example.com:8443/ns/repo',
      'yet.another.example.com:8443/ns',
      'yet.another.example.com:8443',
      '*.another.example.com',
      '*.example.com',
      '*.com',
    ],
    '127.0.0.1:5000/a/b': [
      '127.0.0.1:5000/a/b',
      '127.0.0.1:5000/a',
      '127.0.0.1:5000',
      '*.0.0.1',
      '*.0.1',
      '*.1',
    ],
  };
  for (const [input, namespaces] of Object.entries(cases)) {
    for (const suffix of [':tag', `@${D}`]) {
      it(`identity and namespaces of ${input}${suffix}`, () => {
        const r = parseImageReference(`${input}${suffix}`);
        expect(policyIdentity(r)).toBe(`${namespaces[0]}${suffix}`);
        expect(policyNamespaces(r)).toEqual(namespaces);
      });
    }
  }

  it('identity needs exactly one of tag and digest', () => {
    const both = parseNormalizedNamed(`busybox:1@${D}`);
    expect(() => policyIdentity(both)).toThrow('with both a name and a digest');
    expect(() => policyIdentity(parseNormalizedNamed('busybox'))).toThrow('neither a tag nor a digest');
  });
});

describe('parseNamed and withTag', () => {
  it('requires the canonical form', () => {
    expect(referenceName(parseNamed('docker.io/library/busybox'))).toBe('docker.io/library/busybox');
    expect(() => parseNamed('busybox')).toThrow('repository name must be canonical');
  });
  it('validates tags', () => {
    expect(() => withTag(parseNormalizedNamed('x'), 'bad tag')).toThrow('invalid tag format');
  });
});
