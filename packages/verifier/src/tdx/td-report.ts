// TDREPORT_STRUCT (1024 bytes), the TDX module's locally MAC'ed report that the quoting enclave
// turns into a quote (Azure's HCL report carries one):
//
//   0     REPORTMACSTRUCT (256): type[4] (0x81 TDX), reserved[12], CPUSVN[16],
//         TEE_TCB_INFO hash[48], TDINFO hash[48], REPORTDATA[64] at 128, reserved[32], MAC[32]
//   256   TEE_TCB_INFO (239): valid[8], TEE_TCB_SVN[16] at 264, MRSEAM[48], MRSIGNERSEAM[48],
//         ATTRIBUTES[8], ...; reserved[17]
//   512   TDINFO (512): ATTRIBUTES[8], XFAM[8], MRTD[48], MRCONFIGID[48], MROWNER[48],
//         MROWNERCONFIG[48], RTMR[4][48], reserved
//
// The MAC can only be checked by the CPU, so nothing here is trusted: the verifier trusts the
// quote, and the mock TEE builds quotes from these fields.
import { VerificationError } from '../errors.js';
import type { TdReportBodyFields } from './quote.js';

export const TD_REPORT_SIZE = 1024;
export const TD_REPORT_TYPE_TDX = 0x81;

export interface TdReport {
  readonly type: number;
  readonly cpuSvn: Buffer;
  readonly reportData: Buffer;
  readonly teeTcbSvn: Buffer;
  readonly mrSeam: Buffer;
  readonly mrSignerSeam: Buffer;
  readonly seamAttributes: Buffer;
  readonly tdAttributes: Buffer;
  readonly xfam: Buffer;
  readonly mrTd: Buffer;
  readonly mrConfigId: Buffer;
  readonly mrOwner: Buffer;
  readonly mrOwnerConfig: Buffer;
  readonly rtmrs: readonly [Buffer, Buffer, Buffer, Buffer];
}

export function parseTdReport(input: Uint8Array): TdReport {
  if (input.length !== TD_REPORT_SIZE) {
    throw new VerificationError(
      'REPORT_MALFORMED',
      `TD report is ${input.length} bytes, not ${TD_REPORT_SIZE}`,
    );
  }
  const b = Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const f = (o: number, n: number) => b.subarray(o, o + n);
  const info = 512;
  return {
    type: b[0]!,
    cpuSvn: f(16, 16),
    reportData: f(128, 64),
    teeTcbSvn: f(264, 16),
    mrSeam: f(280, 48),
    mrSignerSeam: f(328, 48),
    seamAttributes: f(376, 8),
    tdAttributes: f(info, 8),
    xfam: f(info + 8, 8),
    mrTd: f(info + 16, 48),
    mrConfigId: f(info + 64, 48),
    mrOwner: f(info + 112, 48),
    mrOwnerConfig: f(info + 160, 48),
    rtmrs: [f(info + 208, 48), f(info + 256, 48), f(info + 304, 48), f(info + 352, 48)],
  };
}

/** Encodes a TD report (MAC and hashes zero: only a real TDX module can make them). */
export function encodeTdReport(fields: TdReportBodyFields): Buffer {
  const b = Buffer.alloc(TD_REPORT_SIZE);
  const put = (v: Uint8Array | undefined, o: number, n: number) => {
    if (v === undefined) return;
    if (v.length > n) throw new RangeError(`TD report field at ${o} is longer than ${n} bytes`);
    b.set(v, o);
  };
  b[0] = TD_REPORT_TYPE_TDX;
  put(fields.reportData, 128, 64);
  put(fields.teeTcbSvn, 264, 16);
  put(fields.mrSeam, 280, 48);
  put(fields.mrSignerSeam, 328, 48);
  put(fields.seamAttributes, 376, 8);
  put(fields.tdAttributes, 512, 8);
  put(fields.xfam, 520, 8);
  put(fields.mrTd, 528, 48);
  put(fields.mrConfigId, 576, 48);
  put(fields.mrOwner, 624, 48);
  put(fields.mrOwnerConfig, 672, 48);
  (fields.rtmrs ?? []).forEach((r, i) => {
    put(r, 720 + 48 * i, 48);
  });
  return b;
}
