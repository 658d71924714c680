// Every attester error shares AttesterError and carries a `code`, so callers branch on it (or on the
// class), never on `name`.
import { describe, expect, it } from 'vitest';
import { AttesterError, AttesterNotSupported, EvidenceCollectionFailed } from './attester.js';
import { HclReportMalformed, readHclReport } from './az-snp-vtpm/hcl.js';
import { TsmReportError } from './configfs-tsm.js';
import { IoctlShimError } from './ioctl-shim.js';
import { NvidiaToolMissing } from './nvidia/tools.js';

describe('attester errors', () => {
  it('share AttesterError and name what failed in code', () => {
    const cases: [AttesterError, string][] = [
      [new AttesterNotSupported('x'), 'NOT_SUPPORTED'],
      [new EvidenceCollectionFailed('why'), 'EVIDENCE_COLLECTION_FAILED'],
      [new HclReportMalformed('why'), 'HCL_REPORT_MALFORMED'],
      [new NvidiaToolMissing('why'), 'NVIDIA_TOOL_MISSING'],
      [new TsmReportError('inblob-length', 'why'), 'inblob-length'],
      [new AttesterError('why'), 'ATTESTER_FAILED'],
    ];
    for (const [e, code] of cases) {
      expect(e).toBeInstanceOf(AttesterError);
      expect(e.code).toBe(code);
    }
    expect(IoctlShimError.prototype).toBeInstanceOf(AttesterError);
  });

  it('reports a truncated HCL report with its code', () => {
    expect(() => readHclReport(new Uint8Array(8))).toThrow(
      expect.objectContaining({ code: 'HCL_REPORT_MALFORMED' }),
    );
  });
});
