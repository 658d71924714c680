import type { Attester, AttesterModule } from '../attester.js';

/**
 * Evidence of guest-components' sample attester: no hardware, just the
 * report data echoed back in standard base64 (unpadded in length: the bytes
 * exactly as given). trustee's sample verifier decodes `report_data` and
 * compares it with the expected digest byte for byte.
 */
export interface SampleEvidence {
  readonly svn: string;
  readonly report_data: string;
}

/** The software-only TEE used for CI and the local demo. */
export class SampleAttester implements Attester {
  readonly tee = 'sample' as const;

  async getEvidence(reportData: Uint8Array): Promise<SampleEvidence> {
    return sampleEvidence('1', reportData);
  }
}

export function sampleEvidence(svn: string, reportData: Uint8Array): SampleEvidence {
  // Key order follows the upstream struct (svn, then report_data).
  return {
    svn,
    report_data: Buffer.from(reportData.buffer, reportData.byteOffset, reportData.byteLength).toString(
      'base64',
    ),
  };
}

export const sampleModule: AttesterModule = {
  tee: 'sample',
  // Upstream: the sample platform is always present; it is only chosen when nothing else is.
  async detect() {
    return { detected: true, reason: 'the sample attester is always available' };
  },
  create: () => new SampleAttester(),
};
