// The sample TEE: no hardware and no signature, used by CI and demos. Follows
// trustee's sample verifier: the evidence echoes the report data, and the
// claims are fixed apart from `svn` and `report_data`.
import { VerificationError } from '../errors.js';
import { base64StdMember, evidenceObject, stringMember } from '../evidence.js';
import { type ExpectedData, reportDataExpected, type Verifier, type VerifierResult } from '../verifier.js';

/** The guest sends "1"; anything longer than this is not a version number. */
export const SAMPLE_MAX_SVN_LENGTH = 256;
/** Report data is at most a SHA-512 digest (88 base64 characters); leave room, but not much. */
export const SAMPLE_MAX_REPORT_DATA_LENGTH = 1024;

/** Claims of the sample TEE, as trustee names them. */
export interface SampleClaims {
  svn: string;
  /** The report data exactly as the evidence carried it (standard base64). */
  report_data: string;
  launch_digest: 'abcde';
  platform_version: { major: 1; minor: 4 };
  debug: false;
  /** Standard base64 of the initdata digest, when initdata was sent. Not checked: the sample TEE cannot bind it. */
  init_data?: string;
}

export class SampleVerifier implements Verifier {
  readonly tee = 'sample' as const;

  async evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]> {
    const obj = evidenceObject(evidence, 'sample');
    const svn = stringMember(obj, 'svn', SAMPLE_MAX_SVN_LENGTH);
    const reportData = stringMember(obj, 'report_data', SAMPLE_MAX_REPORT_DATA_LENGTH, '');

    const bound = base64StdMember('report_data', reportData);
    if (reportDataExpected(expected) && !bound.equals(expected.reportData)) {
      throw new VerificationError(
        'REPORT_DATA_MISMATCH',
        'sample evidence report_data differs from the expected report data',
      );
    }

    const claims: SampleClaims = {
      svn,
      report_data: reportData,
      launch_digest: 'abcde',
      platform_version: { major: 1, minor: 4 },
      debug: false,
    };
    if (expected.initDataHash !== undefined) {
      claims.init_data = Buffer.from(
        expected.initDataHash.buffer,
        expected.initDataHash.byteOffset,
        expected.initDataHash.byteLength,
      ).toString('base64');
    }
    return [{ claims: claims as unknown as Record<string, unknown>, class: 'cpu' }];
  }
}
