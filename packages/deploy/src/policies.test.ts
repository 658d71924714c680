import { Engine, fromJSON, toJSON, type Value } from '@broker/rego';
import { describe, expect, it } from 'vitest';
import { ATTESTATION_POLICY, referenceValueNames, referenceValuesJson, resourcePolicy } from './policies.js';

function payloadOf(json: string): Record<string, unknown> {
  const [message] = JSON.parse(json) as { payload: string }[];
  return JSON.parse(Buffer.from(message?.payload ?? '', 'base64').toString('utf8'));
}

// The attestation service compiles policies like this (Rego v1, strict builtin errors) and registers
// query_reference_value; null stands for an unknown reference value, as in trustee.
function evaluateTrustClaims(input: unknown, rvs: Record<string, unknown>): Record<string, number> {
  const engine = new Engine({ regoVersion: 'v1', strictBuiltinErrors: true, gatherPrints: false });
  engine.registerBuiltin('query_reference_value', 1, (args: readonly Value[]): Value => {
    const name = args[0] as string;
    return Object.hasOwn(rvs, name) ? fromJSON(rvs[name]) : null;
  });
  engine.addPolicy('default_cpu.rego', ATTESTATION_POLICY);
  engine.setInput(fromJSON(input));
  const v = engine.evalRule('data.policy.trust_claims');
  if (v === undefined) throw new Error('trust_claims undefined');
  return toJSON(v) as Record<string, number>;
}

const hex = (c: string) => c.repeat(64);
const PCRS = { pcr03: hex('3'), pcr08: hex('8'), pcr09: hex('9'), pcr11: hex('b'), pcr12: hex('c') };

function vtpmClaims(tee: 'az-snp-vtpm' | 'az-tdx-vtpm', pcrs: Record<string, string> = PCRS) {
  // Other PCRs and platform fields are present in real claims and must not matter.
  return {
    [tee]: {
      tpm: { ...pcrs, pcr00: hex('0'), pcr07: hex('7') },
      measurement: 'bQ==',
      // The KBS's policy vouches for a TDX guest's hardware only with an up-to-date TCB.
      ...(tee === 'az-tdx-vtpm' && { tcb_status: 'UpToDate' }),
    },
    init_data: PCRS.pcr08,
  };
}

function rvsFor(prefix: 'snp' | 'tdx', pcrs: Record<string, string> = PCRS): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of Object.entries(pcrs)) out[`${prefix}_${k}`] = [hex('f'), v];
  return out;
}

describe('attestation policy', () => {
  it('affirms az-snp-vtpm evidence when PCR 03, 08, 09, 11 and 12 all match', () => {
    expect(evaluateTrustClaims(vtpmClaims('az-snp-vtpm'), rvsFor('snp'))).toEqual({
      executables: 3,
      hardware: 2,
      configuration: 2,
      'file-system': 0,
      'instance-identity': 0,
      'runtime-opaque': 0,
      'storage-opaque': 0,
      'sourced-data': 0,
    });
  });

  it('affirms az-tdx-vtpm evidence against the tdx_ names', () => {
    const c = evaluateTrustClaims(vtpmClaims('az-tdx-vtpm'), rvsFor('tdx'));
    expect([c.executables, c.hardware, c.configuration]).toEqual([3, 2, 2]);
    // snp_ values do not vouch for a TDX guest.
    const wrong = evaluateTrustClaims(vtpmClaims('az-tdx-vtpm'), rvsFor('snp'));
    expect([wrong.executables, wrong.configuration]).toEqual([33, 36]);
  });

  for (const pcr of ['pcr03', 'pcr09', 'pcr11', 'pcr12']) {
    it(`does not affirm the executables when ${pcr} differs`, () => {
      const c = evaluateTrustClaims(vtpmClaims('az-snp-vtpm', { ...PCRS, [pcr]: hex('e') }), rvsFor('snp'));
      expect(c.executables).toBe(33);
      expect(c.configuration).toBe(2);
    });
  }

  it('does not affirm the configuration when PCR08 (initdata) differs', () => {
    const c = evaluateTrustClaims(vtpmClaims('az-snp-vtpm', { ...PCRS, pcr08: hex('e') }), rvsFor('snp'));
    expect([c.executables, c.configuration]).toEqual([3, 36]);
  });

  it('fails closed with the placeholder reference values (empty lists) and with none at all', () => {
    const placeholders = payloadOf(referenceValuesJson());
    for (const rvs of [placeholders, {}]) {
      const c = evaluateTrustClaims(vtpmClaims('az-snp-vtpm'), rvs);
      expect([c.executables, c.configuration]).toEqual([33, 36]);
    }
  });

  it('a single-string reference value matches only that value', () => {
    const rvs: Record<string, unknown> = rvsFor('snp');
    rvs.snp_pcr11 = PCRS.pcr11;
    expect(evaluateTrustClaims(vtpmClaims('az-snp-vtpm'), rvs).executables).toBe(3);
    rvs.snp_pcr11 = hex('e');
    expect(evaluateTrustClaims(vtpmClaims('az-snp-vtpm'), rvs).executables).toBe(33);
  });

  it('leaves other TEEs at the contraindicated defaults', () => {
    const c = evaluateTrustClaims({ sample: { svn: '1' } }, rvsFor('snp'));
    expect([c.executables, c.hardware, c.configuration]).toEqual([33, 97, 36]);
  });
});

function resourceAllowed(profile: 'Restricted' | 'Permissive', input: unknown, plugin = 'resource'): boolean {
  const engine = new Engine({ regoVersion: 'v1', strictBuiltinErrors: true, gatherPrints: false });
  engine.addPolicy('resource-policy.rego', resourcePolicy(profile));
  engine.addData(fromJSON({ plugin, 'resource-path': ['default', 'key', '1'] }));
  engine.setInput(fromJSON(input));
  const v = engine.evalRule('data.policy.allow');
  return v !== undefined && toJSON(v) === true;
}

function token(status: string, evidence: Record<string, unknown>) {
  return { submods: { cpu0: { 'ear.status': status, 'ear.veraison.annotated-evidence': evidence } } };
}

describe('resource policies', () => {
  const vtpm = { 'az-snp-vtpm': { tpm: {} } };
  it('Restricted releases only to an affirming appraisal of a real TEE', () => {
    expect(resourceAllowed('Restricted', token('affirming', vtpm))).toBe(true);
    expect(resourceAllowed('Restricted', token('warning', vtpm))).toBe(false);
    expect(resourceAllowed('Restricted', token('contraindicated', vtpm))).toBe(false);
    expect(resourceAllowed('Restricted', token('affirming', { sample: {} }))).toBe(false);
    expect(resourceAllowed('Restricted', token('affirming', vtpm), 'other')).toBe(false);
    expect(resourceAllowed('Restricted', {})).toBe(false);
  });

  it('Permissive releases to any real TEE', () => {
    expect(resourceAllowed('Permissive', token('warning', vtpm))).toBe(true);
    expect(resourceAllowed('Permissive', token('affirming', { sample: {} }))).toBe(false);
    expect(resourceAllowed('Permissive', {})).toBe(false);
  });
});

describe('reference values file', () => {
  it('is one RVPS sample message naming every PCR reference value, placeholders empty', () => {
    const json = referenceValuesJson({ snp_pcr08: ['ab'.repeat(32)] });
    const messages = JSON.parse(json) as Record<string, unknown>[];
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatchObject({ version: '0.1.0', type: 'sample' });
    const payload = payloadOf(json);
    expect(Object.keys(payload)).toEqual([...referenceValueNames()].sort());
    expect(referenceValueNames()).toHaveLength(10);
    expect(payload.snp_pcr08).toEqual(['ab'.repeat(32)]);
    expect(payload.tdx_pcr11).toEqual([]);
  });
});
