import { describe, expect, it } from 'vitest';
import { parseRegistryConfiguration } from '../config.js';
import { pullAttempts, tidyRegistryConfig } from './registries.js';

// The shape of image-rs' own registry handler tests.
const CONFIG = tidyRegistryConfig(
  parseRegistryConfiguration(`
unqualified-search-registries = ["docker.io", "example1.com"]

[[registry]]
prefix = "example.com/banned"
blocked = true

[[registry]]
prefix = "example.com/foo"
insecure = false
blocked = false
location = "internal-registry-for-example.com/bar"

[[registry.mirror]]
location = "example-mirror-0.local/mirror-for-foo"

[[registry.mirror]]
location = "example-mirror-1.local/mirrors/foo"
insecure = true

[[registry]]
location = "docker.io"

[[registry.mirror]]
location = "123456.mirror.aliyuncs.com"

[[registry]]
prefix = "*.wild.example"
location = "wild-mirror.local"
insecure = true
`),
);

const ref = (domain: string, path: string, suffix = ':tag') => ({ domain, path, suffix });

describe('pull attempts (image-rs RegistryHandler)', () => {
  it('no registry configuration: the reference as it is, over https', () => {
    expect(pullAttempts(ref('quay.io', 'a/b'), null)).toEqual([
      { reference: 'quay.io/a/b:tag', insecure: false },
    ]);
  });

  it('blocked prefixes refuse the image', () => {
    expect(() => pullAttempts(ref('example.com', 'banned/image'), CONFIG)).toThrow(
      'Image example.com/banned/image:tag is blocked by registry rule.',
    );
  });

  it('mirrors first, in order, then the remapped location', () => {
    expect(pullAttempts(ref('example.com', 'foo/image'), CONFIG)).toEqual([
      { reference: 'example-mirror-0.local/mirror-for-foo/image:tag', insecure: false },
      { reference: 'example-mirror-1.local/mirrors/foo/image:tag', insecure: true },
      { reference: 'internal-registry-for-example.com/bar/image:tag', insecure: false },
    ]);
  });

  it('a prefix matches at a component boundary only, and at the start', () => {
    expect(pullAttempts(ref('example.com', 'foobar/image'), CONFIG)).toEqual([
      { reference: 'example.com/foobar/image:tag', insecure: false },
    ]);
    expect(pullAttempts(ref('evil.example', 'example.com/foo/image'), CONFIG)).toEqual([
      { reference: 'evil.example/example.com/foo/image:tag', insecure: false },
    ]);
  });

  it('docker.io references go over the unqualified-search registries', () => {
    expect(pullAttempts(ref('docker.io', 'library/busybox', '@sha256:abc'), CONFIG)).toEqual([
      { reference: '123456.mirror.aliyuncs.com/library/busybox@sha256:abc', insecure: false },
      { reference: 'docker.io/library/busybox@sha256:abc', insecure: false },
      { reference: 'example1.com/busybox@sha256:abc', insecure: false },
    ]);
  });

  it('wildcard prefixes match host suffixes', () => {
    expect(pullAttempts(ref('a.wild.example', 'x'), CONFIG)).toEqual([
      { reference: 'wild-mirror.local/x:tag', insecure: true },
    ]);
    expect(pullAttempts(ref('wild.example', 'x'), CONFIG)).toEqual([
      { reference: 'wild.example/x:tag', insecure: false },
    ]);
  });

  it('invalid configurations are refused', () => {
    expect(() => tidyRegistryConfig(parseRegistryConfiguration('[[registry]]\ninsecure = true\n'))).toThrow(
      'both location and prefix are empty',
    );
    expect(() => tidyRegistryConfig(parseRegistryConfiguration('[[registry]]\nprefix = "*.x.io"\n'))).toThrow(
      'location is unset and prefix is with wildcard',
    );
    expect(() => parseRegistryConfiguration('[[registry]\n')).toThrow('invalid registry configuration');
  });
});
