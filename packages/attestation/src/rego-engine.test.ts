import { describe, expect, it } from 'vitest';
import { BROKER_DEFAULT_POLICY_CPU } from './broker-policy.js';
import { EAR_DEFAULT_POLICY_CPU, EAR_DEFAULT_POLICY_GPU } from './default-policies.gen.js';
import { compilePolicy, type ReferenceValueLookup } from './rego-engine.js';

/** A small deterministic generator, so that a failure can be replayed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;

/** Claims of several platforms, each with fields the policies read and fields they do not. */
function claims(r: () => number): Record<string, unknown> {
  const reportData = Math.floor(r() * 1e9).toString(16);
  const runtime = { nonce: reportData, 'tee-pubkey': { kty: 'EC', x: reportData } };
  switch (pick(r, ['sample', 'sample', 'snp', 'tdx', 'tpm', 'none'] as const)) {
    case 'sample':
      return {
        report_data: reportData,
        runtime_data_claims: runtime,
        sample: {
          debug: pick(r, [false, true]),
          launch_digest: pick(r, ['abcde', 'other']),
          platform_version: { major: pick(r, [1, 2]), minor: pick(r, [0, 1, 3]) },
          productId: '0',
          svn: pick(r, ['1', '2']),
        },
      };
    case 'snp':
      return {
        report_data: reportData,
        snp: {
          measurement: pick(r, ['m1', 'm2']),
          policy_debug_allowed: pick(r, [false, true]),
          policy_migrate_ma: false,
          reported_tcb_bootloader: pick(r, [3, 4]),
          reported_tcb_microcode: 200,
          reported_tcb_snp: 20,
          reported_tcb_tee: 0,
        },
      };
    case 'tdx':
      return {
        report_data: reportData,
        tdx: {
          quote: {
            header: { tee_type: '81000000', vendor_id: '939a7233f79c4ca9940a0db3957f0607' },
            body: {
              mr_td: pick(r, ['td1', 'td2']),
              report_data: reportData,
              rtmr_1: 'r1',
              rtmr_2: 'r2',
              xfam: 'x',
            },
          },
          tcb_status: pick(r, ['UpToDate', 'OutOfDate']),
          collateral_expiration_status: '0',
          td_attributes: { debug: false },
        },
      };
    case 'tpm':
      return { report_data: reportData, tpm: { pcr11: pick(r, ['p', 'q']), ak_public: 'ak' } };
    default:
      return {
        report_data: reportData,
        init_data_claims: {
          agent_policy_claims: {
            containers: [
              {
                OCI: {
                  Annotations: { 'io.kubernetes.cri.image-name': pick(r, ['a', 'b']) },
                  Process: { User: { UID: pick(r, [0, 1000]) } },
                },
              },
            ],
          },
        },
      };
  }
}

function referenceValues(r: () => number): Record<string, unknown> {
  return {
    svn: pick(r, [['1'], ['1', '2']]),
    launch_digest: ['abcde'],
    major_version: pick(r, [1, 2]),
    minimum_minor_version: 0,
    snp_launch_measurement: pick(r, [['m1'], ['m2']]),
    snp_bootloader: [3],
    snp_microcode: [200],
    snp_snp_svn: [20],
    snp_tee_svn: [0],
    mr_td: pick(r, [['td1'], ['td2'], undefined]),
    rtmr_1: ['r1'],
    rtmr_2: ['r2'],
    xfam: ['x'],
    tpm_pcr11: ['p'],
    trusted_aks: ['ak'],
  };
}

const lookupIn =
  (values: Record<string, unknown>): ReferenceValueLookup =>
  (name) => ({ found: true, value: values[name] });

describe('compilePolicy: results reused across evaluations', () => {
  it.each([
    ['trustee default_cpu', EAR_DEFAULT_POLICY_CPU],
    ['broker default_cpu', BROKER_DEFAULT_POLICY_CPU],
    ['trustee default_gpu', EAR_DEFAULT_POLICY_GPU],
  ])('gives what a freshly compiled policy gives, input after input (%s)', (_name, text) => {
    const kept = compilePolicy('p.rego', text);
    const r = rng(42);
    let rv = referenceValues(r);
    for (let i = 0; i < 300; i++) {
      if (r() < 0.1) rv = referenceValues(r);
      const input = claims(r);
      const expected = compilePolicy('p.rego', text).evaluate(input, lookupIn(rv));
      expect(kept.evaluate(input, lookupIn(rv))).toEqual(expected);
    }
  });

  it('sees a changed reference value at once', () => {
    const p = compilePolicy('p.rego', EAR_DEFAULT_POLICY_CPU);
    const input = {
      sample: { debug: false, launch_digest: 'd', platform_version: { major: 1, minor: 1 }, svn: '1' },
    };
    const rv = { svn: ['9'], launch_digest: ['d'], major_version: 1, minimum_minor_version: 0 };
    const before = p.evaluate(input, lookupIn(rv));
    expect(before.trustClaims).toMatchObject({ hardware: 97 });
    expect(p.evaluate(input, lookupIn({ ...rv, svn: ['1'] })).trustClaims).toMatchObject({ hardware: 2 });
    expect(p.evaluate(input, lookupIn(rv))).toEqual(before);
  });

  it('never reuses the result of a policy that draws random numbers', () => {
    const p = compilePolicy(
      'p.rego',
      'package policy\nimport rego.v1\ntrust_claims := {"executables": rand.intn("k", 100)}\n',
    );
    const seen = new Set<unknown>();
    for (let i = 0; i < 64; i++) seen.add(JSON.stringify(p.evaluate({ a: 1 }, lookupIn({})).trustClaims));
    expect(seen.size).toBeGreaterThan(1);
  });

  it('does not reuse a result across a `with` that rewrites the input', () => {
    const text =
      'package policy\nimport rego.v1\nv := input.a\ntrust_claims := {"executables": x} if { x := v with input.a as input.b }\n';
    const p = compilePolicy('p.rego', text);
    expect(p.evaluate({ a: 1, b: 2 }, lookupIn({})).trustClaims).toEqual({ executables: 2 });
    expect(p.evaluate({ a: 1, b: 3 }, lookupIn({})).trustClaims).toEqual({ executables: 3 });
  });

  it('does not keep a run that missed a reference value', () => {
    const p = compilePolicy(
      'p.rego',
      'package policy\nimport rego.v1\ntrust_claims := {"executables": 3} if input.x in query_reference_value("x")\n',
    );
    const missing: ReferenceValueLookup = () => ({ found: false });
    expect(p.evaluate({ x: 'a' }, missing).trustClaims).toBeUndefined();
    expect(p.evaluate({ x: 'a' }, lookupIn({ x: ['a'] })).trustClaims).toEqual({ executables: 3 });
  });
});
