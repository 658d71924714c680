// trustee's attestation (EAR) and KBS resource policies, with the inputs the KBS gives them.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { Engine } from './engine.js';
import { jsonText } from './format.js';
import { fromJSON, type Value } from './value.js';

const POLICIES = vector('trustee/policies');

function earEngine(file: string, refs: Record<string, unknown>): Engine {
  const e = new Engine();
  // The attestation service's host extension: the reference values registered under a name, or null.
  e.registerBuiltin('query_reference_value', 1, ([name]) =>
    typeof name === 'string' && name in refs ? fromJSON(refs[name]) : null,
  );
  e.addPolicy(file, readFileSync(join(POLICIES, file), 'utf8'));
  return e;
}

function claims(e: Engine): Record<string, unknown> {
  return JSON.parse(jsonText(e.evalRule('data.policy.trust_claims') as Value)) as Record<string, unknown>;
}

describe('trustee policies load', () => {
  const files = readdirSync(POLICIES, { recursive: true, encoding: 'utf8' }).filter((f) =>
    f.endsWith('.rego'),
  );
  for (const f of files.sort()) {
    it(f, () => {
      const e = new Engine();
      e.registerBuiltin('query_reference_value', 1, () => null);
      expect(e.addPolicy(f, readFileSync(join(POLICIES, f), 'utf8'))).toMatch(/^data\./);
      expect(() => e.prepare()).not.toThrow();
    });
  }
});

describe('EAR default CPU policy', () => {
  const sample = {
    sample: { svn: '1', launch_digest: 'abcde', debug: false, platform_version: { major: 1, minor: 2 } },
  };

  it('appraises a sample TEE against its reference values', () => {
    const e = earEngine('ear_default_policy_cpu.rego', {
      launch_digest: ['abcde'],
      svn: ['1'],
      major_version: 1,
      minimum_minor_version: 1,
    });
    e.setInput(sample);
    expect(claims(e)).toEqual({
      executables: 3,
      hardware: 2,
      configuration: 2,
      'file-system': 0,
      'instance-identity': 0,
      'runtime-opaque': 0,
      'storage-opaque': 0,
      'sourced-data': 0,
    });
    expect(jsonText(e.evalRule('data.policy.extensions') as Value)).toBe(
      '[{"key":-18,"name":"ear.trustee.identifiers","value":{"validated":{}}}]',
    );
  });

  it('falls back to the defaults when reference values are unset', () => {
    const e = earEngine('ear_default_policy_cpu.rego', {});
    e.setInput(sample);
    const c = claims(e);
    expect(c.executables).toBe(33);
    expect(c.hardware).toBe(97);
    expect(c.configuration).toBe(2);
  });

  it('uses else chains for SNP configuration', () => {
    const snp = {
      snp: {
        measurement: 'm',
        reported_tcb_bootloader: 3,
        reported_tcb_microcode: 209,
        reported_tcb_snp: 20,
        reported_tcb_tee: 0,
        policy_debug_allowed: false,
        policy_migrate_ma: false,
        platform_smt_enabled: true,
        platform_tsme_enabled: false,
        policy_abi_major: 0,
        policy_abi_minor: 31,
        policy_single_socket: false,
        policy_smt_allowed: true,
      },
    };
    const refs = {
      snp_launch_measurement: ['m'],
      snp_bootloader: [3],
      snp_microcode: [209],
      snp_snp_svn: [20],
      snp_tee_svn: [0],
      snp_smt_enabled: true,
      snp_tsme_enabled: false,
      snp_guest_abi_major: 0,
      snp_guest_abi_minor: 31,
      snp_single_socket: false,
      snp_smt_allowed: true,
    };
    const ok = earEngine('ear_default_policy_cpu.rego', refs);
    ok.setInput(snp);
    expect(claims(ok)).toMatchObject({ executables: 3, hardware: 2, configuration: 2 });
    const partial = earEngine('ear_default_policy_cpu.rego', { ...refs, snp_smt_enabled: false });
    partial.setInput(snp);
    expect(claims(partial)).toMatchObject({ configuration: 3 });
  });

  it('reports container identifiers from init-data claims', () => {
    const e = earEngine('ear_default_policy_cpu.rego', {});
    e.setInput({
      tpm: { pcr11: 'x' },
      init_data_claims: {
        agent_policy_claims: {
          containers: [
            {
              OCI: {
                Annotations: { 'io.kubernetes.cri.image-name': 'pause' },
                Process: { User: { UID: 65535 } },
              },
            },
          ],
        },
      },
    });
    expect(jsonText(e.evalRule('data.policy.validated_identifiers') as Value)).toBe(
      '{"container_images":["pause"],"container_uids":[65535]}',
    );
    expect(claims(e)).toMatchObject({ hardware: 2, configuration: 0, executables: 33 });
  });
});

describe('KBS resource policies', () => {
  // The KBS runs the policy with input = token claims and data = the request path.
  const data = { plugin: 'resource', 'resource-path': ['myrepo', 'License', 'key'], query: {} };
  const teeClaims = {
    submods: {
      cpu0: { 'ear.status': 'affirming', 'ear.veraison.annotated-evidence': { tdx: { quote: {} } } },
    },
  };
  const sampleClaims = {
    submods: {
      cpu0: {
        'ear.status': 'affirming',
        'ear.veraison.annotated-evidence': { sample: { productId: '', svn: '' } },
      },
    },
  };

  function allow(file: string, input: unknown, d: unknown = data): Value | undefined {
    const e = new Engine();
    e.addPolicy(file, readFileSync(join(POLICIES, 'resource', file), 'utf8'));
    e.addData(d);
    e.setInput(input);
    return e.evalRule('data.policy.allow');
  }

  it('default.rego allows real TEEs on the resource plugin only', () => {
    expect(allow('default.rego', teeClaims)).toBe(true);
    expect(allow('default.rego', sampleClaims)).toBe(false);
    expect(allow('default.rego', teeClaims, { plugin: 'sample', 'resource-path': ['a'], query: {} })).toBe(
      false,
    );
  });

  it('allow_all.rego and deny_all.rego', () => {
    expect(allow('allow_all.rego', sampleClaims)).toBe(true);
    expect(allow('deny_all.rego', teeClaims)).toBe(false);
  });

  it('affirming.rego requires every submodule to be affirming', () => {
    expect(allow('affirming.rego', teeClaims)).toBe(true);
    const mixed = { submods: { cpu0: { 'ear.status': 'affirming' }, gpu0: { 'ear.status': 'warning' } } };
    expect(allow('affirming.rego', mixed)).toBe(false);
    expect(allow('affirming.rego', { submods: {} })).toBe(false);
  });
});
