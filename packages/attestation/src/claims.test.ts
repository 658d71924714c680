import { describe, expect, it } from 'vitest';
import { transformClaims } from './claims.js';
import { AttestationFailed } from './errors.js';

const runtime = { 'additional-evidence': '{"x":1}', nonce: 'n', 'tee-pubkey': { kty: 'EC' } };

describe('claims transformation (trustee transform_claims)', () => {
  it('lifts report_data and init_data, adds runtime and initdata claims, keeps the rest under the TEE', () => {
    const out = transformClaims({
      tee: 'sample',
      claims: { svn: '1', report_data: 'cmQ=', init_data: 'aWQ=', debug: false },
      runtimeDataClaims: runtime,
      initDataClaims: { 'aa.toml': { a: 1 } },
      verbose: true,
    });
    expect(out).toEqual({
      init_data: 'aWQ=',
      init_data_claims: { 'aa.toml': { a: 1 } },
      report_data: 'cmQ=',
      runtime_data_claims: runtime,
      sample: { debug: false, svn: '1' },
    });
    // serde_json objects serialize sorted.
    expect(Object.keys(out)).toEqual([
      'init_data',
      'init_data_claims',
      'report_data',
      'runtime_data_claims',
      'sample',
    ]);
    expect(Object.keys(out.runtime_data_claims as object)).toEqual([
      'additional-evidence',
      'nonce',
      'tee-pubkey',
    ]);
  });

  it('has no init_data members when the verifier reports no init_data', () => {
    const out = transformClaims({
      tee: 'sample',
      claims: { svn: '1', report_data: 'cmQ=' },
      runtimeDataClaims: runtime,
      initDataClaims: { a: 1 },
      verbose: true,
    });
    expect(Object.keys(out)).toEqual(['report_data', 'runtime_data_claims', 'sample']);
  });

  it('drops additional-evidence from runtime claims when the token is not verbose', () => {
    const out = transformClaims({
      tee: 'sample',
      claims: { report_data: '' },
      runtimeDataClaims: runtime,
      initDataClaims: null,
      verbose: false,
    });
    expect(out.runtime_data_claims).toEqual({ nonce: 'n', 'tee-pubkey': { kty: 'EC' } });
    expect(runtime['additional-evidence']).toBe('{"x":1}');
  });

  it('keeps a __proto__ claim as data', () => {
    const claims = JSON.parse('{"__proto__":{"polluted":true},"report_data":""}') as Record<string, unknown>;
    const out = transformClaims({
      tee: 'sample',
      claims,
      runtimeDataClaims: {},
      initDataClaims: null,
      verbose: true,
    });
    const sample = out.sample as Record<string, unknown>;
    expect(Object.hasOwn(sample, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(sample)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it.each([
    [{ report_data: 5 }, 'report_data'],
    [{ init_data: null }, 'init_data'],
  ])('refuses non-string %j', (claims, text) => {
    expect(() =>
      transformClaims({ tee: 'sample', claims, runtimeDataClaims: {}, initDataClaims: null, verbose: true }),
    ).toThrow(AttestationFailed);
    expect(() =>
      transformClaims({ tee: 'sample', claims, runtimeDataClaims: {}, initDataClaims: null, verbose: true }),
    ).toThrow(text);
  });

  it('refuses claims nested beyond the limit instead of overflowing the stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200; i++) deep = [deep];
    expect(() =>
      transformClaims({
        tee: 'sample',
        claims: { deep },
        runtimeDataClaims: {},
        initDataClaims: null,
        verbose: true,
      }),
    ).toThrow('nested too deeply');
  });
});
