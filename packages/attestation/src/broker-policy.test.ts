import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { BROKER_DEFAULT_POLICY_CPU, REFERENCE_VALUES_EXTENSION } from './broker-policy.js';
import { EAR_DEFAULT_POLICY_CPU } from './default-policies.gen.js';
import { extensionsFromPolicy, statusOf, trustVectorFromPolicy } from './ear.js';
import { compilePolicy } from './rego-engine.js';

const broker = compilePolicy('default_cpu.rego', BROKER_DEFAULT_POLICY_CPU);
const trustee = compilePolicy('trustee_default_cpu.rego', EAR_DEFAULT_POLICY_CPU);

type Rvs = Record<string, unknown>;

function appraise(policy: typeof broker, input: unknown, rvs: Rvs) {
  const asked: string[] = [];
  const r = policy.evaluate(input, (name) => {
    asked.push(name);
    return Object.hasOwn(rvs, name) ? { found: true, value: rvs[name] } : { found: false };
  });
  const vector = trustVectorFromPolicy(r.trustClaims, 'p');
  const extensions = Object.fromEntries(extensionsFromPolicy(r.extensions, 'p'));
  return { vector, status: statusOf(vector), extensions, asked };
}

const hex = (s: string) => createHash('sha256').update(s).digest('hex');
const pcrs = (over: Record<string, string> = {}) => {
  const out: Record<string, string> = {};
  for (let i = 0; i < 24; i++) out[`pcr${String(i).padStart(2, '0')}`] = '00'.repeat(32);
  for (const n of ['03', '08', '09', '11', '12']) out[`pcr${n}`] = hex(`pcr${n}`);
  return { ...out, ...over };
};
/** What the reference-values tool writes: one-element lists of lowercase hex. */
const referenceValues = (prefix: string, p = pcrs()): Rvs =>
  Object.fromEntries(['03', '08', '09', '11', '12'].map((n) => [`${prefix}_pcr${n}`, [p[`pcr${n}`]]]));

const azSnp = (p = pcrs()) => ({
  'az-snp-vtpm': { measurement: 'bWVhcw==', reported_tcb_snp: '8', tpm: p },
  report_data: 'ab',
  init_data: p.pcr08,
  runtime_data_claims: { nonce: 'n' },
});

describe('broker default_cpu: vTPM evidence', () => {
  it('is affirming when PCR 03, 08, 09, 11 and 12 all match, and reports the comparison', () => {
    const r = appraise(broker, azSnp(), referenceValues('snp'));
    expect(r.vector).toMatchObject({ executables: 3, hardware: 2, configuration: 2 });
    expect(r.status).toBe('affirming');
    expect(r.extensions[REFERENCE_VALUES_EXTENSION]).toEqual({
      tee: 'az-snp-vtpm',
      compared: ['snp_pcr03', 'snp_pcr08', 'snp_pcr09', 'snp_pcr11', 'snp_pcr12'],
      mismatched: {},
      missing: [],
    });
    expect(r.extensions['ear.trustee.identifiers']).toEqual({ validated: {} });
  });

  it('is not affirming when the initdata (PCR 08) differs, naming snp_pcr08 and its evidence value', () => {
    const p = pcrs({ pcr08: hex('other initdata') });
    const r = appraise(broker, azSnp(p), referenceValues('snp'));
    expect(r.vector).toMatchObject({ executables: 3, hardware: 2, configuration: 36 });
    expect(r.status).toBe('warning');
    expect(r.extensions[REFERENCE_VALUES_EXTENSION]).toMatchObject({
      mismatched: { snp_pcr08: hex('other initdata') },
      missing: [],
    });
  });

  it.each(['03', '09', '11', '12'])('is not affirming when boot PCR %s differs', (n) => {
    const p = pcrs({ [`pcr${n}`]: hex('another image') });
    const r = appraise(broker, azSnp(p), referenceValues('snp'));
    expect(r.vector).toMatchObject({ executables: 33, configuration: 2 });
    expect(r.status).toBe('warning');
    expect(r.extensions[REFERENCE_VALUES_EXTENSION]).toMatchObject({
      mismatched: { [`snp_pcr${n}`]: hex('another image') },
    });
  });

  it('fails closed without reference values, listing the missing names', () => {
    const r = appraise(broker, azSnp(), {});
    expect(r.status).toBe('warning');
    expect(r.vector).toMatchObject({ executables: 33, configuration: 36 });
    expect(r.extensions[REFERENCE_VALUES_EXTENSION]).toMatchObject({
      mismatched: {},
      missing: ['snp_pcr03', 'snp_pcr08', 'snp_pcr09', 'snp_pcr11', 'snp_pcr12'],
    });
    // Empty lists (brokerctl's placeholder ConfigMap) count as not registered too.
    const empty = Object.fromEntries(Object.keys(referenceValues('snp')).map((k) => [k, []]));
    expect(appraise(broker, azSnp(), empty).extensions[REFERENCE_VALUES_EXTENSION]).toMatchObject({
      missing: ['snp_pcr03', 'snp_pcr08', 'snp_pcr09', 'snp_pcr11', 'snp_pcr12'],
    });
  });

  it('reports a PCR the quote does not cover as mismatched with a null value', () => {
    const p: Record<string, string> = pcrs();
    delete p.pcr12;
    const r = appraise(broker, azSnp(p), referenceValues('snp', pcrs()));
    expect(r.vector.executables).toBe(33);
    expect(r.extensions[REFERENCE_VALUES_EXTENSION]).toMatchObject({ mismatched: { snp_pcr12: null } });
  });

  it('accepts any value of a list, a single string, and either case; ignores non-strings', () => {
    const rv = referenceValues('snp');
    const p = pcrs();
    rv.snp_pcr03 = [hex('old firmware'), p.pcr03!.toUpperCase()];
    rv.snp_pcr09 = p.pcr09;
    rv.snp_pcr11 = [42, null, { a: 1 }, p.pcr11];
    expect(appraise(broker, azSnp(), rv).status).toBe('affirming');
    rv.snp_pcr12 = 12;
    const r = appraise(broker, azSnp(), rv);
    expect(r.status).toBe('warning');
    expect(r.extensions[REFERENCE_VALUES_EXTENSION]).toMatchObject({ missing: ['snp_pcr12'] });
  });

  it("uses only the platform's own prefix: snp values do not pass tdx or tpm evidence", () => {
    const tdx = { 'az-tdx-vtpm': { tcb_status: 'UpToDate', tpm: pcrs() }, report_data: 'ab' };
    expect(appraise(broker, tdx, referenceValues('snp')).status).toBe('warning');
    const r = appraise(broker, tdx, referenceValues('tdx'));
    expect(r.status).toBe('affirming');
    expect(r.extensions[REFERENCE_VALUES_EXTENSION]).toMatchObject({ tee: 'az-tdx-vtpm' });
  });

  it('rates az-tdx-vtpm hardware genuine only with an up-to-date TCB', () => {
    const tdx = (tcb_status: string) => ({ 'az-tdx-vtpm': { tcb_status, tpm: pcrs() } });
    expect(appraise(broker, tdx('UpToDate'), referenceValues('tdx')).vector.hardware).toBe(2);
    const r = appraise(broker, tdx('OutOfDate'), referenceValues('tdx'));
    expect(r.vector.hardware).toBe(97);
    expect(r.status).toBe('contraindicated');
  });

  it('appraises plain tpm evidence by tpm_pcrNN, with the AK among trusted_aks', () => {
    const tpm = { tpm: { ...pcrs(), ak_public: 'AK-1', init_data: 'x', report_data: 'y' } };
    const rv = referenceValues('tpm');
    expect(appraise(broker, tpm, rv).vector).toMatchObject({
      executables: 3,
      configuration: 2,
      hardware: 97,
    });
    const trusted = appraise(broker, tpm, { ...rv, trusted_aks: ['AK-0', 'AK-1'] });
    expect(trusted.status).toBe('affirming');
    expect(trusted.extensions[REFERENCE_VALUES_EXTENSION]).toMatchObject({ tee: 'tpm', mismatched: {} });
    expect(appraise(broker, tpm, { ...rv, trusted_aks: 'AK-1' }).vector.hardware).toBe(97);
  });

  it('does not report reference values for other TEEs', () => {
    const r = appraise(broker, { sample: { svn: '1' } }, {});
    expect(r.extensions[REFERENCE_VALUES_EXTENSION]).toBeUndefined();
  });
});

// The other TEEs must be appraised exactly as trustee's default policy appraises them.
describe("broker default_cpu: trustee's verdicts for the other TEEs", () => {
  const sample = (o: Record<string, unknown> = {}) => ({
    sample: {
      svn: '1',
      launch_digest: 'abcde',
      platform_version: { major: 1, minor: 4 },
      debug: false,
      report_data: 'x',
      ...o,
    },
    report_data: 'x',
    runtime_data_claims: {},
  });
  const sampleRvs: Rvs = { launch_digest: ['abcde'], svn: ['1'], major_version: 1, minimum_minor_version: 4 };
  const snp = (o: Record<string, unknown> = {}) => ({
    snp: {
      measurement: 'aa',
      reported_tcb_bootloader: 3,
      reported_tcb_microcode: 115,
      reported_tcb_snp: 8,
      reported_tcb_tee: 0,
      policy_debug_allowed: false,
      policy_migrate_ma: false,
      platform_smt_enabled: true,
      platform_tsme_enabled: false,
      policy_abi_major: 0,
      policy_abi_minor: 0,
      policy_single_socket: false,
      policy_smt_allowed: true,
      ...o,
    },
  });
  const snpRvs: Rvs = {
    snp_launch_measurement: ['aa'],
    snp_bootloader: [3],
    snp_microcode: [115],
    snp_snp_svn: [8],
    snp_tee_svn: [0],
    snp_smt_enabled: true,
    snp_tsme_enabled: false,
    snp_guest_abi_major: 0,
    snp_guest_abi_minor: 0,
    snp_single_socket: false,
    snp_smt_allowed: true,
  };
  const events = [
    {
      type_name: 'EV_EFI_BOOT_SERVICES_APPLICATION',
      details: { device_paths: ['File(kernel)'] },
      digests: [{ digest: 'k' }],
    },
    {
      type_name: 'EV_EVENT_TAG',
      details: { string: 'LOADED_IMAGE::LoadOptions' },
      digests: [{ digest: 'p' }],
    },
  ];
  const tdx = (o: Record<string, unknown> = {}, logs: unknown = events) => ({
    tdx: {
      quote: {
        header: { tee_type: '81000000', vendor_id: '939a7233f79c4ca9940a0db3957f0607' },
        body: { rtmr_1: 'r1', rtmr_2: 'r2', mr_td: 'td', xfam: 'xf' },
      },
      tcb_status: 'UpToDate',
      collateral_expiration_status: '0',
      td_attributes: { debug: false },
      uefi_event_logs: logs,
      ...o,
    },
  });
  const tdxRvs: Rvs = {
    rtmr_1: ['r1'],
    rtmr_2: ['r2'],
    mr_td: ['td'],
    xfam: ['xf'],
    tdvfkernel: 'k',
    tdvfkernelparams: 'p',
  };
  const agentPolicy = {
    init_data_claims: {
      agent_policy_claims: {
        containers: [
          {
            OCI: {
              Annotations: { 'io.kubernetes.cri.image-name': 'pause' },
              Process: { User: { UID: 65535 } },
            },
          },
          { OCI: { Annotations: { 'io.kubernetes.cri.image-name': 'app' }, Process: { User: { UID: 0 } } } },
        ],
      },
    },
  };

  const cases: [string, unknown, Rvs][] = [
    ['sample, all reference values', sample(), sampleRvs],
    ['sample, none', sample(), {}],
    ['sample, wrong digest', sample({ launch_digest: 'zzz' }), sampleRvs],
    ['sample, old minor version', sample({ platform_version: { major: 1, minor: 3 } }), sampleRvs],
    ['sample, debug', sample({ debug: true }), sampleRvs],
    ['sample with agent policy identifiers', { ...sample(), ...agentPolicy }, sampleRvs],
    ['snp, all', snp(), snpRvs],
    ['snp, none', snp(), {}],
    ['snp, other measurement', snp({ measurement: 'bb' }), snpRvs],
    ['snp, other microcode', snp({ reported_tcb_microcode: 100 }), snpRvs],
    ['snp, SMT differs (configuration 3)', snp({ platform_smt_enabled: false }), snpRvs],
    ['snp, debug allowed', snp({ policy_debug_allowed: true }), snpRvs],
    ['snp, migration agent', snp({ policy_migrate_ma: true }), {}],
    ['tdx, all', tdx(), tdxRvs],
    ['tdx, none', tdx(), {}],
    ['tdx, GRUB boot (no events)', tdx({}, []), tdxRvs],
    ['tdx, other kernel', tdx(), { ...tdxRvs, tdvfkernel: 'k2' }],
    ['tdx, other rtmr_2', tdx(), { ...tdxRvs, rtmr_2: ['zz'] }],
    ['tdx, out of date', tdx({ tcb_status: 'OutOfDate' }), tdxRvs],
    ['tdx, expired collateral', tdx({ collateral_expiration_status: '1' }), tdxRvs],
    ['tdx, debug', tdx({ td_attributes: { debug: true } }), tdxRvs],
    ['se', { se: { any: 'thing' } }, {}],
    ['an unknown TEE', { csv: { x: 1 } }, {}],
  ];

  it.each(cases)('%s', (_name, input, rvs) => {
    const ours = appraise(broker, input, rvs);
    const theirs = appraise(trustee, input, rvs);
    expect(ours.vector).toEqual(theirs.vector);
    expect(ours.extensions).toEqual(theirs.extensions);
  });

  it('the sample flows are affirming, as under trustee', () => {
    expect(appraise(broker, sample(), sampleRvs).status).toBe('affirming');
  });
});
