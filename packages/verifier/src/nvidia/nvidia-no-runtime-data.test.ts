// trustee's ReportData::NotProvided (a request without runtime data, e.g. the attestation agent's
// coco_as token): trustee's nvidia verifier refuses it ("Nvidia report data not provided") before
// looking at any device, locally and with NRAS. The report nonce a device carries without runtime
// data (all zeros, what regularize_data makes of nothing) must not pass for "not provided", nor when
// runtime data is provided.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verificationFailure } from '../testing/failure.js';
import type { ExpectedData } from '../verifier.js';
import { NvidiaVerifier } from './index.js';
import { type MockNras, startMockNras } from './mock-nras.js';
import { createTestDevice } from './test-device.js';

const text = (name: string) => readFileSync(vector(`trustee/nvidia/${name}`), 'utf8');
const TRUSTEE_EVIDENCE = {
  device_evidence_list: [
    {
      arch: 'HOPPER',
      evidence: text('hopperAttestationReport.txt'),
      certificate: Buffer.from(text('hopper_cert_chain_case1.txt')).toString('base64'),
    },
  ],
};
const TRUSTEE_NONCE = Buffer.from('931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb', 'hex');

const device = createTestDevice();
const trustedRoots = [device.rootPem];
/** What a GPU attested without runtime data carries: the report data regularized from nothing. */
const ZERO_NONCE = Buffer.alloc(32);
/** The KBS's report data: SHA-384 of the runtime data's canonical JSON. */
const REPORT_DATA = createHash('sha384').update('{"nonce":"n","tee-pubkey":{}}').digest();

const verifier = new NvidiaVerifier();
const NOT_PROVIDED = { reportData: new Uint8Array(0), reportDataNotProvided: true } as const;

describe('nvidia without runtime data (ReportData::NotProvided), local mode', () => {
  it('refuses a report requested with the all-zero nonce, as trustee does; provided runtime data still decides', async () => {
    const zero = device.evidence(ZERO_NONCE);
    const e = await verificationFailure(
      verifier.evaluate(zero, { ...NOT_PROVIDED, nvidia: { trustedRoots } }),
    );
    expect(e.code).toBe('REPORT_DATA_MISMATCH');
    expect(e.message).toMatch(/needs runtime data: none was provided/);
    // The same zero-nonce report when runtime data was provided: bound to nothing, refused.
    const provided = await verificationFailure(
      verifier.evaluate(zero, { reportData: REPORT_DATA, nvidia: { trustedRoots } }),
    );
    expect(provided.code).toBe('REPORT_DATA_MISMATCH');
    expect(provided.message).toMatch(/report nonce is not the expected report data/);
    // A report bound to the runtime data passes.
    const bound = device.evidence(REPORT_DATA.subarray(0, 32));
    const [r] = await verifier.evaluate(bound, { reportData: REPORT_DATA, nvidia: { trustedRoots } });
    expect(r!.class).toBe('gpu');
  });

  it('the flag decides: even report data matching the nonce is not compared when marked not provided', async () => {
    const bound = device.evidence(REPORT_DATA.subarray(0, 32));
    const e = await verificationFailure(
      verifier.evaluate(bound, {
        reportData: REPORT_DATA,
        reportDataNotProvided: true,
        nvidia: { trustedRoots },
      }),
    );
    expect(e.message).toMatch(/needs runtime data/);
  });

  it("refuses trustee's Hopper vector without runtime data before checking the device", async () => {
    const e = await verificationFailure(verifier.evaluate(TRUSTEE_EVIDENCE, NOT_PROVIDED));
    expect(e.code).toBe('REPORT_DATA_MISMATCH');
    expect(e.message).toMatch(/needs runtime data/);
    // A device list that is not even a device is refused the same way: nothing is parsed.
    const junk = await verificationFailure(verifier.evaluate({ device_evidence_list: [42] }, NOT_PROVIDED));
    expect(junk.message).toMatch(/needs runtime data/);
    await expect(verifier.evaluate(TRUSTEE_EVIDENCE, { reportData: TRUSTEE_NONCE })).resolves.toHaveLength(1);
  });
});

describe('nvidia without runtime data, remote mode (NRAS)', () => {
  let nras: MockNras;
  beforeAll(async () => {
    nras = await startMockNras();
  });
  afterAll(async () => {
    await nras.close();
  });
  beforeEach(() => {
    nras.requests.length = 0;
  });
  const remote = (expected: Pick<ExpectedData, 'reportData' | 'reportDataNotProvided'>): ExpectedData => ({
    ...expected,
    nvidia: { remote: { verifierUrl: nras.url, jwksUrl: nras.jwksUrl } },
  });

  it('refuses without asking NRAS, even for a report NRAS would find matching the all-zero nonce', async () => {
    const zero = device.evidence(ZERO_NONCE);
    const e = await verificationFailure(verifier.evaluate(zero, remote(NOT_PROVIDED)));
    expect(e.code).toBe('REPORT_DATA_MISMATCH');
    expect(e.message).toMatch(/needs runtime data/);
    expect(nras.requests).toHaveLength(0);
    // With runtime data provided, NRAS is asked with its nonce and says the zero-nonce report is not ours.
    const provided = await verificationFailure(verifier.evaluate(zero, remote({ reportData: REPORT_DATA })));
    expect(provided.message).toMatch(/NRAS: the device report nonce is not ours/);
    expect(nras.requests.map((r) => r.nonce)).toEqual([REPORT_DATA.subarray(0, 32).toString('hex')]);
  });
});
