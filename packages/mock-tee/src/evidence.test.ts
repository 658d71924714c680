// The whole Azure path on the mock: the guest's az-snp-vtpm attester (unchanged, only the TPM and
// IMDS addresses configured) through the paravisor interposer, and the KBS's az-snp-vtpm verifier.
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AzSnpVtpmAttester, BROKER_AZURE_IMDS_URL, BROKER_TPM, detectTee } from '@broker/attester';
import { requirePrograms, type SwtpmInstance, startSwtpm } from '@broker/tpm/testing';
import { getVerifier, VerificationError } from '@broker/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MockTee, startMockTee } from './device.js';
import { expectedPcrValues } from './manifest.js';
import { sampleManifest } from './sample-manifest.js';

const sha = (alg: string, s: string) => createHash(alg).update(s).digest();

describe('az-snp-vtpm evidence from the mock TEE', () => {
  let swtpm: SwtpmInstance;
  let stateDir: string;
  let emptyRoot: string;
  let device: MockTee;
  let env: Record<string, string>;

  beforeAll(async () => {
    await requirePrograms('swtpm');
    swtpm = await startSwtpm();
    stateDir = await mkdtemp(join(tmpdir(), 'mock-tee-evidence-'));
    emptyRoot = await mkdtemp(join(tmpdir(), 'mock-tee-root-'));
    device = await startMockTee({ stateDir, swtpm, rootKeyBits: 2048 });
    env = { [BROKER_TPM]: device.tpm, [BROKER_AZURE_IMDS_URL]: device.imdsUrl };
  }, 120_000);

  afterAll(async () => {
    await device?.close();
    await swtpm?.stop();
    for (const d of [stateDir, emptyRoot]) if (d) await rm(d, { recursive: true, force: true });
  });

  const attester = () => new AzSnpVtpmAttester({ env, root: emptyRoot });
  const verifier = getVerifier('az-snp-vtpm');

  it('is detected as az-snp-vtpm', async () => {
    expect(await detectTee({ env, root: emptyRoot })).toBe('az-snp-vtpm');
  });

  it('verifies with the test ARK configured, with the booted PCRs among the claims', async () => {
    const reportData = sha('sha512', 'kbs nonce and tee public key');
    const evidence = await attester().getEvidence(reportData);
    const [result] = await verifier.evaluate(JSON.parse(JSON.stringify(evidence)), {
      reportData,
      trustedArks: [device.rootsBundlePem],
    });
    const claims = result!.claims as {
      tpm: Record<string, string>;
      report_data: string;
      measurement: string;
    };
    const expected = expectedPcrValues(sampleManifest());
    for (const pcr of [3, 9, 11, 12]) {
      expect(claims.tpm[`pcr${String(pcr).padStart(2, '0')}`]).toBe(expected.get(pcr));
    }
    expect(claims.tpm.pcr08).toBe('0'.repeat(64));
    expect(claims.report_data).toBe(reportData.toString('hex'));
  });

  it('is refused without the test ARK: only AMD roots are built in', async () => {
    const reportData = sha('sha512', 'another nonce');
    const evidence = await attester().getEvidence(reportData);
    await expect(verifier.evaluate(evidence, { reportData })).rejects.toMatchObject({
      code: 'CERT_CHAIN_INVALID',
    });
  });

  it('is refused when replayed into another session', async () => {
    const evidence = await attester().getEvidence(sha('sha512', 'session A'));
    await expect(
      verifier.evaluate(evidence, {
        reportData: sha('sha512', 'session B'),
        trustedArks: [device.rootsBundlePem],
      }),
    ).rejects.toMatchObject({ code: 'REPORT_DATA_MISMATCH' });
  });

  it('binds initdata through PCR8: sha256(32 zero bytes ‖ digest)', async () => {
    const initData = sha('sha256', 'version = "0.1.0"\nalgorithm = "sha256"\n[data]\n');
    await attester().bindInitData(initData);
    const reportData = sha('sha512', 'with initdata');
    const evidence = await attester().getEvidence(reportData);
    const [result] = await verifier.evaluate(evidence, {
      reportData,
      initDataHash: initData,
      trustedArks: [device.rootsBundlePem],
    });
    const pcr8 = createHash('sha256').update(Buffer.alloc(32)).update(initData).digest('hex');
    expect((result!.claims as { init_data: string }).init_data).toBe(pcr8);
    await expect(
      verifier.evaluate(evidence, {
        reportData,
        initDataHash: sha('sha256', 'other initdata'),
        trustedArks: [device.rootsBundlePem],
      }),
    ).rejects.toBeInstanceOf(VerificationError);
  });

  it('shows a changed image in the PCR claims after a reboot', async () => {
    const other = {
      ...sampleManifest(),
      imageTag: 'mock-podvm:tampered',
      pcrs: new Map([...sampleManifest().pcrs, [11, [sha('sha256', 'tampered uki')]]]),
    };
    await device.reboot({ manifest: other });
    try {
      const reportData = sha('sha512', 'after reboot');
      const [result] = await verifier.evaluate(await attester().getEvidence(reportData), {
        reportData,
        trustedArks: [device.rootsBundlePem],
      });
      const tpm = (result!.claims as { tpm: Record<string, string> }).tpm;
      expect(tpm.pcr11).toBe(expectedPcrValues(other).get(11));
      expect(tpm.pcr11).not.toBe(expectedPcrValues(sampleManifest()).get(11));
      expect(tpm.pcr03).toBe(expectedPcrValues(sampleManifest()).get(3));
    } finally {
      await device.reboot({ manifest: sampleManifest() });
    }
  });
});
