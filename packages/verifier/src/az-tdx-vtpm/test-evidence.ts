// Test-only: az-tdx-vtpm evidence made end to end on test DCAP hardware, the way Azure's paravisor
// and quote service make it, so that each check can be driven to pass or fail on purpose. The
// mock TEE reuses the HCL framing.
import { createHash, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { HCL_REQUEST_DATA_OFFSET, HCL_VAR_DATA_OFFSET } from '../az-snp-vtpm/hcl.js';
import { signTestTpmQuote } from '../az-snp-vtpm/test-evidence.js';
import type { TdReportBodyFields } from '../tdx/quote.js';
import { encodeTdReport, parseTdReport, TD_REPORT_SIZE } from '../tdx/td-report.js';
import { signTestQuote, type TestQuotingEnclave } from '../tdx/test-pki.js';

export const HCL_REPORT_SIZE = 2600;

/** Frames a TD report and runtime claims as an HCL report (report type 4, SHA-256). */
export function buildTdxHclReport(tdReport: Uint8Array, runtimeClaims: Uint8Array): Buffer {
  if (tdReport.length !== TD_REPORT_SIZE) throw new RangeError(`TD report must be ${TD_REPORT_SIZE} bytes`);
  if (HCL_VAR_DATA_OFFSET + runtimeClaims.length > HCL_REPORT_SIZE)
    throw new RangeError('runtime claims do not fit');
  const hcl = Buffer.alloc(HCL_REPORT_SIZE);
  hcl.writeUInt32LE(0x414c4348, 0); // "HCLA"
  hcl.writeUInt32LE(1, 4);
  hcl.writeUInt32LE(HCL_VAR_DATA_OFFSET + runtimeClaims.length, 8);
  hcl.writeUInt32LE(2, 12);
  // The hardware report slot is sized for SNP; a TD report fills its first 1024 bytes.
  hcl.set(tdReport, 32);
  hcl.writeUInt32LE(20 + runtimeClaims.length, HCL_REQUEST_DATA_OFFSET);
  hcl.writeUInt32LE(1, HCL_REQUEST_DATA_OFFSET + 4);
  hcl.writeUInt32LE(4, HCL_REQUEST_DATA_OFFSET + 8); // TDX
  hcl.writeUInt32LE(1, HCL_REQUEST_DATA_OFFSET + 12); // SHA-256
  hcl.writeUInt32LE(runtimeClaims.length, HCL_REQUEST_DATA_OFFSET + 16);
  hcl.set(runtimeClaims, HCL_VAR_DATA_OFFSET);
  return hcl;
}

/** The quote a quote service makes from a TD report: its fields in a v4 quote body. */
export function quoteFromTdReport(qe: TestQuotingEnclave, tdReport: Uint8Array): Buffer {
  const { type: _t, cpuSvn: _c, ...fields } = parseTdReport(tdReport);
  return signTestQuote(qe, fields);
}

export interface AzTdxTestEvidenceOptions {
  readonly nonce: Uint8Array;
  readonly userData?: Uint8Array;
  readonly pcrs?: ReadonlyMap<number, Uint8Array>;
  /** Overrides the TD report's REPORT_DATA (normally SHA-256 of the runtime claims). */
  readonly tdReportData?: Uint8Array;
  readonly td?: Partial<TdReportBodyFields>;
  readonly version?: 1 | 2;
  readonly quoteKey?: KeyObject;
}

export function makeAzTdxTestEvidence(
  qe: TestQuotingEnclave,
  o: AzTdxTestEvidenceOptions,
): Record<string, unknown> {
  const ak = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = ak.publicKey.export({ format: 'jwk' });
  const userData = Buffer.alloc(64);
  userData.set(o.userData ?? o.nonce.subarray(0, 64));
  const varData = Buffer.from(
    JSON.stringify({
      keys: [{ kid: 'HCLAkPub', key_ops: ['sign'], kty: 'RSA', e: jwk.e, n: jwk.n }],
      'vm-configuration': { 'console-enabled': true, 'secure-boot': true, 'tpm-enabled': true },
      'user-data': userData.toString('hex').toUpperCase(),
    }),
  );
  const reportData = Buffer.alloc(64);
  reportData.set(o.tdReportData ?? createHash('sha256').update(varData).digest());
  const tdReport = encodeTdReport({
    tdAttributes: Buffer.from('0000001000000000', 'hex'),
    ...o.td,
    reportData,
  });
  const hcl = buildTdxHclReport(tdReport, varData);
  const tdQuote = quoteFromTdReport(qe, tdReport);

  const { message, signature, pcrMap, indices } = signTestTpmQuote(o.nonce, ak.privateKey, o);
  return {
    version: o.version ?? 2,
    tpm_quote: {
      signature: signature.toString('hex'),
      message: message.toString('hex'),
      pcrs: indices.map((i) => Buffer.from(pcrMap.get(i)!).toString('hex')),
    },
    hcl_report: hcl.toString('base64url'),
    td_quote: tdQuote.toString('base64url'),
  };
}
