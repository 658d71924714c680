import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import {
  EAR_DEFAULT_POLICY_CPU,
  EAR_DEFAULT_POLICY_GPU,
  EAR_DEFAULT_POLICY_PPCIE,
  EAR_DEFAULT_POLICY_SWITCH,
} from './default-policies.gen.js';

const policy = (name: string) => readFileSync(vector(`trustee/policies/${name}`), 'utf8');

// sha256 of trustee's files at 78962cd, recorded so that the vectors and the embedded text cannot drift together.
const SHA256 = {
  cpu: createHash('sha256').update(EAR_DEFAULT_POLICY_CPU).digest('hex'),
  gpu: createHash('sha256').update(EAR_DEFAULT_POLICY_GPU).digest('hex'),
  switch: createHash('sha256').update(EAR_DEFAULT_POLICY_SWITCH).digest('hex'),
  ppcie: createHash('sha256').update(EAR_DEFAULT_POLICY_PPCIE).digest('hex'),
};

describe('embedded trustee default policies', () => {
  it('match the trustee vectors byte for byte', () => {
    expect(EAR_DEFAULT_POLICY_CPU).toBe(policy('ear_default_policy_cpu.rego'));
    expect(EAR_DEFAULT_POLICY_GPU).toBe(policy('ear_default_policy_gpu.rego'));
    expect(EAR_DEFAULT_POLICY_SWITCH).toBe(policy('ear_default_policy_switch.rego'));
    expect(EAR_DEFAULT_POLICY_PPCIE).toBe(policy('ear_default_policy_ppcie.rego'));
  });

  it('have the recorded digests', () => {
    expect(SHA256).toEqual({
      cpu: '1435d1f79d18e4e6d3defac9e246b35ba124b88bef4dc9cd07a07051a09bbb66',
      gpu: 'a6a9ff392be66d75f8f80bd094af4872deba7440efaad1aff141980da81dbe9f',
      switch: '0716f9678b10cbfb9ae4ffe658fecf6b57aa4b6edcef217ff12f7d6a396d1ea6',
      ppcie: '26db1e66d6add2dbc19e98469c3746d78f5b7407c640aff4ee3d9ec0d7103e01',
    });
  });
});
