// The KBS executable with a confidential GPU beside the CPU, and with an Arm CCA realm: evidence
// from a simulated Hopper (its own device root, trusted through nvidia_verifier.trusted_root_paths)
// travels in `additional_evidence` from an RCAR client, is verified into the token's gpu0
// submodule with the default_gpu policy, and a resource is released only when cpu0 and gpu0 are
// both affirming: with the sample TEE, and with the SNP mock guest (its real snp attester and
// trustee's default_cpu). A realm token from a simulated CCA platform is verified with the stores trustee's
// CCA_CONFIG_FILE names.
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Attester, getAttester } from '@broker/attester';
import { KbsClient } from '@broker/kbs-client';
import { type MockSnpDevice, startMockSnpDevice } from '@broker/mock-tee';
import { createTestCcaPlatform, createTestDevice } from '@broker/verifier/testing';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KbsHandle, mustSucceed, prepareKbs, SAMPLE_REFERENCE_VALUES } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-gpu-cca-e2e-'));
const secret = randomBytes(32);
const gpu = createTestDevice({ driverVersion: '550.90.07' });
const cca = createTestCcaPlatform();
let kbs: KbsHandle;
let snp: MockSnpDevice;

const BOTH_AFFIRMING = `package policy
import rego.v1
default allow := false
allow if {
  input.submods.cpu0["ear.status"] == "affirming"
  input.submods.gpu0["ear.status"] == "affirming"
}
`;

// A GPU appraisal for local claims: the device is a verified Hopper, its driver is one the
// operator allows (reference value allowed_driver_versions).
const GPU_POLICY = `package policy
import rego.v1
default hardware := 97
default executables := 33
default configuration := 36
hardware := 2 if input.nvidia.arch == "Hopper"
executables := 2 if count(input.nvidia.measurements) > 0
configuration := 2 if input.nvidia.config.driver_version in query_reference_value("allowed_driver_versions")
trust_claims := {"hardware": hardware, "executables": executables, "configuration": configuration}
`;

const gpuAttester: Attester = {
  tee: 'nvidia',
  // The AA's nvidia attester puts the first 32 bytes of the report data in the SPDM nonce.
  getEvidence: async (reportData) => gpu.evidence(reportData.subarray(0, 32)),
};
const ccaAttester: Attester = {
  tee: 'cca',
  getEvidence: async (reportData) => ({ token: [...cca.token(reportData)] }),
};

beforeAll(async () => {
  mkdirSync(join(dir, 'kbs'), { recursive: true });
  kbs = await prepareKbs(join(dir, 'kbs'));
  snp = await startMockSnpDevice({ stateDir: join(dir, 'snp'), rootKeyBits: 2048 });
  writeFileSync(join(dir, 'gpu-root.pem'), gpu.rootPem);
  writeFileSync(join(dir, 'tastore.json'), cca.taStoreJson);
  writeFileSync(join(dir, 'rvstore.json'), cca.rvStoreJson);
  writeFileSync(
    join(dir, 'cca-config.json'),
    JSON.stringify({
      'cca-verifier': {
        type: 'local',
        'ta-store': join(dir, 'tastore.json'),
        'rv-store': join(dir, 'rvstore.json'),
      },
    }),
  );
  appendFileSync(
    kbs.configPath,
    `
[attestation_service.verifier_config.nvidia_verifier]
type = "Local"
trusted_root_paths = ["${join(dir, 'gpu-root.pem')}"]

[attestation_service.verifier_config.snp_verifier]
trusted_ark_paths = ["${snp.rootsBundlePath}"]
`,
  );
  const before = process.env.CCA_CONFIG_FILE;
  process.env.CCA_CONFIG_FILE = join(dir, 'cca-config.json');
  try {
    await kbs.start();
  } finally {
    if (before === undefined) delete process.env.CCA_CONFIG_FILE;
    else process.env.CCA_CONFIG_FILE = before;
  }
  writeFileSync(join(dir, 'secret.bin'), secret);
  await mustSucceed(
    kbs.admin('set-resource', '--path', 'default/gpu/key', '--resource-file', join(dir, 'secret.bin')),
  );
  for (const rv of SAMPLE_REFERENCE_VALUES) await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
  writeFileSync(join(dir, 'both.rego'), BOTH_AFFIRMING);
  await mustSucceed(kbs.admin('set-resource-policy', '--policy-file', join(dir, 'both.rego')));
  writeFileSync(join(dir, 'gpu.rego'), GPU_POLICY);
  await mustSucceed(
    kbs.admin('set-attestation-policy', '--id', 'default_gpu', '--policy-file', join(dir, 'gpu.rego')),
  );
}, 120_000);

afterAll(async () => {
  await kbs?.stop();
  snp?.close();
  rmSync(dir, { recursive: true, force: true });
});

function guest(attester: Attester, additional: Attester[] = []): KbsClient {
  return new KbsClient({ url: kbs.url, certPem: kbs.tls.certPem, attester, additionalAttesters: additional });
}

type Ear = { submods: Record<string, Record<string, unknown>> };

describe('CPU + GPU through the KBS executable', () => {
  it('denies the resource while gpu0 is not affirming (the driver is not an allowed reference value)', async () => {
    const client = guest(getAttester('sample'), [gpuAttester]);
    try {
      const { token } = await client.attest();
      const ear = decodeJwt(token) as unknown as Ear;
      expect(Object.keys(ear.submods).sort()).toEqual(['cpu0', 'gpu0']);
      expect(ear.submods.cpu0!['ear.status']).toBe('affirming');
      expect(ear.submods.gpu0!['ear.status']).not.toBe('affirming');
      await expect(client.getResource('default/gpu/key')).rejects.toThrow(/PolicyDeny|denied|401|403/);
    } finally {
      client.close();
    }
  }, 60_000);

  it('releases it once both are affirming', async () => {
    await mustSucceed(kbs.admin('set-sample-reference-value', 'allowed_driver_versions', '550.90.07'));
    const client = guest(getAttester('sample'), [gpuAttester]);
    try {
      const { token } = await client.attest();
      expect((decodeJwt(token) as unknown as Ear).submods.gpu0!['ear.status']).toBe('affirming');
      expect(await client.getResource('default/gpu/key')).toEqual(secret);
    } finally {
      client.close();
    }
  }, 60_000);

  it('refuses a CPU without its GPU under the same policy, and a GPU bound to another nonce outright', async () => {
    const cpuOnly = guest(getAttester('sample'));
    try {
      await expect(cpuOnly.getResource('default/gpu/key')).rejects.toThrow();
    } finally {
      cpuOnly.close();
    }
    const replayed: Attester = { tee: 'nvidia', getEvidence: async () => gpu.evidence(Buffer.alloc(32, 7)) };
    const client = guest(getAttester('sample'), [replayed]);
    try {
      await expect(client.attest()).rejects.toThrow(/NVIDIA report nonce|nvidia evidence rejected|401/);
    } finally {
      client.close();
    }
  }, 60_000);
});

describe('the SNP mock guest with a GPU', () => {
  it("releases the resource when trustee's default_cpu affirms the SNP report and the operator's default_gpu the GPU", async () => {
    const tcb = snp.roots.tcb;
    const rvs: string[][] = [
      ['snp_launch_measurement', Buffer.from(snp.config.measurement).toString('hex')],
      ['snp_bootloader', String(tcb.bootloader), '--as-integer'],
      ['snp_microcode', String(tcb.microcode), '--as-integer'],
      ['snp_snp_svn', String(tcb.snp), '--as-integer'],
      ['snp_tee_svn', String(tcb.tee), '--as-integer'],
    ];
    for (const rv of rvs) await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
    const client = guest(getAttester('snp', { env: snp.env }), [gpuAttester]);
    try {
      const { token } = await client.attest();
      const ear = decodeJwt(token) as unknown as Ear;
      expect(ear.submods.cpu0!['ear.status']).toBe('affirming');
      expect(ear.submods.gpu0!['ear.status']).toBe('affirming');
      expect(await client.getResource('default/gpu/key')).toEqual(secret);
    } finally {
      client.close();
    }
  }, 60_000);
});

describe('an Arm CCA realm through the KBS executable', () => {
  it('verifies the realm token with the CCA_CONFIG_FILE stores into cpu0', async () => {
    const client = guest(ccaAttester);
    try {
      const { token } = await client.attest();
      const ear = decodeJwt(token) as unknown as Ear;
      const evidence = ear.submods.cpu0!['ear.veraison.annotated-evidence'] as Record<
        string,
        Record<string, unknown>
      >;
      expect(evidence.cca!.platform).toEqual({
        'cca-platform-instance-id': cca.stores.trustAnchors[0]!.instanceId.toString('base64'),
        'cca-platform-implementation-id': cca.stores.trustAnchors[0]!.implementationId.toString('base64'),
      });
    } finally {
      client.close();
    }
  }, 60_000);
});
