// The sample *device*: guest-components' `sampledevice` attester, an additional device like a GPU
// that needs no hardware (switched on in the guest by ENABLE_SAMPLE_DEVICE). Follows trustee's
// sample_device verifier: the evidence echoes the report data, the claims are `svn` and
// `report_data`, the class is `gpu`, and initdata is not bound.
import { VerificationError } from '../errors.js';
import { base64StdMember, evidenceObject, stringMember } from '../evidence.js';
import { SAMPLE_MAX_REPORT_DATA_LENGTH, SAMPLE_MAX_SVN_LENGTH } from '../sample/index.js';
import { type ExpectedData, reportDataExpected, type Verifier, type VerifierResult } from '../verifier.js';

/** Claims of the sample device, as trustee names them. */
export interface SampleDeviceClaims {
  /** The attester sends "2". */
  svn: string;
  /** The report data exactly as the evidence carried it (standard base64). */
  report_data: string;
}

export class SampleDeviceVerifier implements Verifier {
  readonly tee = 'sampledevice' as const;

  async evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]> {
    const obj = evidenceObject(evidence, 'sampledevice');
    const svn = stringMember(obj, 'svn', SAMPLE_MAX_SVN_LENGTH);
    // trustee reads a missing report_data as "".
    const reportData = stringMember(obj, 'report_data', SAMPLE_MAX_REPORT_DATA_LENGTH, '');
    const bound = base64StdMember('report_data', reportData);
    if (reportDataExpected(expected) && !bound.equals(expected.reportData)) {
      throw new VerificationError(
        'REPORT_DATA_MISMATCH',
        'sampledevice evidence report_data differs from the expected report data',
      );
    }
    const claims: SampleDeviceClaims = { svn, report_data: reportData };
    return [{ claims: claims as unknown as Record<string, unknown>, class: 'gpu' }];
  }
}
