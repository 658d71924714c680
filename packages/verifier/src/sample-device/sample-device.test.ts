// trustee's sample_device verifier: the guest-components `sampledevice` attester's evidence
// ({"svn": "2", "report_data": std-base64}) gives the claims {svn, report_data} of class gpu.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { getVerifier, supportedTees } from '../registry.js';
import { SampleDeviceVerifier } from './index.js';

const digest = createHash('sha384').update('runtime data').digest();
const b64 = digest.toString('base64');
const verifier = new SampleDeviceVerifier();

async function failure(evidence: unknown, reportData: Uint8Array = digest): Promise<VerificationError> {
  const e = await verifier.evaluate(evidence, { reportData }).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(VerificationError);
  return e as VerificationError;
}

describe('sampledevice verifier', () => {
  it("is registered under the attester's name", () => {
    expect(getVerifier('sampledevice')).toBeInstanceOf(SampleDeviceVerifier);
    expect(supportedTees()).toContain('sampledevice');
  });

  it("gives trustee's claims, class gpu", async () => {
    expect(await verifier.evaluate({ svn: '2', report_data: b64 }, { reportData: digest })).toEqual([
      { class: 'gpu', claims: { svn: '2', report_data: b64 } },
    ]);
  });

  it('does not bind initdata (trustee ignores it for the device)', async () => {
    const [r] = await verifier.evaluate(
      { svn: '2', report_data: b64 },
      { reportData: digest, initDataHash: Buffer.alloc(32, 1) },
    );
    expect(r!.claims).toEqual({ svn: '2', report_data: b64 });
  });

  it('refuses report data other than the expected', async () => {
    const other = createHash('sha384').update('other').digest('base64');
    expect((await failure({ svn: '2', report_data: other })).code).toBe('REPORT_DATA_MISMATCH');
    // A missing report_data is "" (as trustee reads it), which no digest equals.
    expect((await failure({ svn: '2' })).code).toBe('REPORT_DATA_MISMATCH');
  });

  it('skips the report data check when no runtime data was given', async () => {
    const [r] = await verifier.evaluate(
      { svn: '2' },
      { reportData: Buffer.alloc(0), reportDataNotProvided: true },
    );
    expect(r!.claims).toEqual({ svn: '2', report_data: '' });
  });

  it.each([
    ['not an object', 'sampledevice'],
    ['an array', [1]],
    ['no svn', { report_data: b64 }],
    ['svn not a string', { svn: 2, report_data: b64 }],
    ['svn too long', { svn: 'x'.repeat(257), report_data: b64 }],
    ['report_data not base64', { svn: '2', report_data: '!!!' }],
    ['report_data too long', { svn: '2', report_data: 'A'.repeat(1028) }],
  ])('refuses evidence that is %s with a VerificationError', async (_name, evidence) => {
    await failure(evidence);
  });
});
