import { describe, expect, it } from 'vitest';
import { parseKbsConfig } from '../config.js';

const base = { http_server: { insecure_http: true }, admin: { authorization_mode: 'InsecureAllowAll' } };

function plugins(...entries: unknown[]) {
  return parseKbsConfig({ ...base, plugins: entries });
}

describe('[[plugins]] name = "external"', () => {
  it('reads trustee backends: http:// is plaintext, https:// needs ca_cert_path; tls_mode may spell it out', () => {
    const config = plugins({
      name: 'external',
      backends: [
        { name: 'echo-plugin', endpoint: 'http://127.0.0.1:50051', tls_mode: 'insecure', timeout_ms: 5000 },
        { name: 'secure', endpoint: 'https://localhost:50052/', ca_cert_path: '/etc/kbs/ca.pem' },
      ],
    });
    expect(config.externalPlugin).toEqual({
      backends: [
        {
          name: 'echo-plugin',
          endpoint: 'http://127.0.0.1:50051',
          target: '127.0.0.1:50051',
          timeoutMs: 5000,
        },
        {
          name: 'secure',
          endpoint: 'https://localhost:50052/',
          target: 'localhost:50052',
          caCertPath: '/etc/kbs/ca.pem',
        },
      ],
    });
    expect(config.warnings).toEqual([]);
  });

  it('warns about keys trustee would ignore', () => {
    const config = plugins({
      name: 'external',
      backends: [{ name: 'a', endpoint: 'http://127.0.0.1:1', ca_cert_pth: '/c' }],
    });
    expect(config.warnings).toEqual(['unknown key "ca_cert_pth" in [[plugins]] #1 backends[0] is ignored']);
  });

  it('sits beside the resource plugin', () => {
    const config = plugins(
      { name: 'resource', storage_backend_type: 'kvstorage' },
      { name: 'external', backends: [{ name: 'a', endpoint: 'http://127.0.0.1:1' }] },
    );
    expect(config.resourcePlugin).toEqual({ backend: 'kvstorage' });
    expect(config.externalPlugin?.backends).toHaveLength(1);
  });

  it.each([
    [{ name: 'external', backends: [] }, /External plugin configured with no backends/],
    [{ name: 'external' }, /External plugin configured with no backends/],
    [
      {
        name: 'external',
        backends: [
          { name: 'a', endpoint: 'http://127.0.0.1:1' },
          { name: 'a', endpoint: 'http://127.0.0.1:2' },
        ],
      },
      /Duplicate backend name 'a'/,
    ],
    [
      { name: 'external', backends: [{ name: 'a', endpoint: 'https://127.0.0.1:1' }] },
      /`https:\/\/` endpoint requires `ca_cert_path`/,
    ],
    [
      { name: 'external', backends: [{ name: 'a', endpoint: 'grpc://127.0.0.1:1' }] },
      /endpoint must start with `http:\/\/` or `https:\/\/`/,
    ],
    [
      { name: 'external', backends: [{ name: 'a', endpoint: 'http://127.0.0.1:1/path' }] },
      /name only host:port/,
    ],
    [
      { name: 'external', backends: [{ name: 'a', endpoint: 'http://user@127.0.0.1:1' }] },
      /name only host:port/,
    ],
    [
      { name: 'external', backends: [{ name: 'a', endpoint: 'http://127.0.0.1:1', tls_mode: 'tls' }] },
      /TLS mode requires https:\/\//,
    ],
    [
      {
        name: 'external',
        backends: [{ name: 'a', endpoint: 'https://127.0.0.1:1', tls_mode: 'insecure', ca_cert_path: '/c' }],
      },
      /insecure mode requires http:\/\//,
    ],
    [
      { name: 'external', backends: [{ name: 'a/b', endpoint: 'http://127.0.0.1:1' }] },
      /one URL path segment/,
    ],
    [
      { name: 'external', backends: [{ name: '..', endpoint: 'http://127.0.0.1:1' }] },
      /one URL path segment/,
    ],
    [{ name: 'external', backends: [{ name: '', endpoint: 'http://127.0.0.1:1' }] }, /one URL path segment/],
    [{ name: 'external', backends: [{ endpoint: 'http://127.0.0.1:1' }] }, /name is required/],
    [
      { name: 'external', backends: [{ name: 'a', endpoint: 'http://127.0.0.1:1', timeout_ms: 0 }] },
      /timeout_ms/,
    ],
    [{ name: 'external', backends: 'x' }, /backends: expected an array of tables/],
    [{ name: 'external', backends: ['x'] }, /must be a table/],
  ])('refuses %j', (entry, message) => {
    expect(() => plugins(entry)).toThrow(message);
  });

  it('refuses a second external entry and names the supported plugins for others', () => {
    const e = { name: 'external', backends: [{ name: 'a', endpoint: 'http://127.0.0.1:1' }] };
    expect(() => plugins(e, e)).toThrow(/the external plugin is configured twice/);
    expect(() => plugins({ name: 'pkcs11' })).toThrow(/supported: resource, external, sample, nebula-ca/);
    const sample = { name: 'sample', item: 'x' };
    expect(() => plugins(sample, sample)).toThrow(/the sample plugin is configured twice/);
  });
});
