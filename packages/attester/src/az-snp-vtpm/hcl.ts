/**
 * The little of Azure's HCL report the attester reads: which hardware
 * report it wraps (detection) and the `user-data` runtime claim (to tell a
 * fresh report from a stale one). Layout (little-endian), as the
 * az-cvm-vtpm crate reads it:
 *
 *   0     attestation header, 8 × u32 ("HCLA", version, report size, request type, status, reserved)
 *   32    hardware report, 1184 bytes (SNP report; a TDX report is shorter and zero-padded)
 *   1216  IGVM request data: data size, version, report type, report-data hash type, variable data size
 *   1236  variable data: the runtime claims JSON, whose SHA-256 the SNP report binds
 *
 * The NV index holding it may be longer than the report (zero padding).
 * Verification is the verifier's job; nothing here is trusted.
 */

import { AttesterError, type AttesterErrorCode } from '../attester.js';

export const HCL_HW_REPORT_OFFSET = 32;
export const SNP_REPORT_SIZE = 1184;
export const HCL_REQUEST_DATA_OFFSET = HCL_HW_REPORT_OFFSET + SNP_REPORT_SIZE;
export const HCL_VAR_DATA_OFFSET = HCL_REQUEST_DATA_OFFSET + 20;
/** IGVM report types. */
export const HCL_REPORT_TYPE = Object.freeze({ TDX: 4, SNP: 2 } as const);
/** The runtime claims are a few KiB at most; refuse to parse more. */
export const MAX_VAR_DATA_SIZE = 64 * 1024;

export class HclReportMalformed extends AttesterError {
  override readonly code: AttesterErrorCode = 'HCL_REPORT_MALFORMED';
  override readonly name: string = 'HclReportMalformed';
}

export interface HclReportView {
  readonly reportType: number;
  readonly varData: Uint8Array;
}

/** Reads the report type and variable data, checking sizes as the crate does. */
export function readHclReport(bytes: Uint8Array): HclReportView {
  if (bytes.length < HCL_VAR_DATA_OFFSET) {
    throw new HclReportMalformed(
      `HCL report is ${bytes.length} bytes, shorter than its ${HCL_VAR_DATA_OFFSET}-byte header`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const reportType = view.getUint32(HCL_REQUEST_DATA_OFFSET + 8, true);
  const varSize = view.getUint32(HCL_REQUEST_DATA_OFFSET + 16, true);
  if (varSize > MAX_VAR_DATA_SIZE || HCL_VAR_DATA_OFFSET + varSize > bytes.length) {
    throw new HclReportMalformed(
      `HCL variable data of ${varSize} bytes does not fit the ${bytes.length}-byte report`,
    );
  }
  if (reportType !== HCL_REPORT_TYPE.SNP && reportType !== HCL_REPORT_TYPE.TDX) {
    throw new HclReportMalformed(`HCL report type ${reportType} is neither SNP (2) nor TDX (4)`);
  }
  return { reportType, varData: bytes.subarray(HCL_VAR_DATA_OFFSET, HCL_VAR_DATA_OFFSET + varSize) };
}

/**
 * The `user-data` runtime claim (upper-case hex of the 64-byte user data
 * the guest last wrote), or undefined when the claims hold none.
 */
export function hclUserData(report: HclReportView): string | undefined {
  let claims: unknown;
  try {
    claims = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(report.varData));
  } catch {
    return undefined;
  }
  if (typeof claims !== 'object' || claims === null) return undefined;
  const value = (claims as Record<string, unknown>)['user-data'];
  return typeof value === 'string' ? value : undefined;
}

/** What the paravisor puts in `user-data` for `reportData`: zero-padded to 64 bytes, upper-case hex. */
export function expectedUserData(reportData: Uint8Array): string {
  const padded = new Uint8Array(64);
  padded.set(reportData.subarray(0, 64));
  return Buffer.from(padded).toString('hex').toUpperCase();
}
