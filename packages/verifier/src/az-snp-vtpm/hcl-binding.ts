// What both Azure vTPM verifiers (az-snp-vtpm, az-tdx-vtpm) check between the HCL report, the TPM
// quote and the expected report data; only the hardware report that vouches for the HCL runtime
// claims differs (an SNP report, or a TD quote).
import { createHash } from 'node:crypto';
import { VerificationError } from '../errors.js';
import { checkQuotePcrs, parseQuoteMessage, verifyQuoteSignature } from '../tpm/quote.js';
import { type ExpectedData, reportDataExpected } from '../verifier.js';
import type { TpmQuoteEvidence } from './evidence.js';
import { type HclReport, hclAkPub, hclUserData } from './hcl.js';

/**
 * The TPM quote is signed by the AK the HCL runtime claims carry, its nonce is the expected report
 * data (when one is expected) and its PCR digest matches the PCRs sent. Returns the nonce and PCRs.
 */
export function checkHclTpmQuote(
  hcl: HclReport,
  quote: TpmQuoteEvidence,
  expected: ExpectedData,
): { readonly nonce: Buffer; readonly pcrs: Map<number, Buffer> } {
  verifyQuoteSignature(hclAkPub(hcl.varData), quote.message, quote.signature);
  const attest = parseQuoteMessage(quote.message);
  const nonce = Buffer.from(attest.extraData);
  if (reportDataExpected(expected) && !nonce.equals(Buffer.from(expected.reportData))) {
    throw new VerificationError(
      'REPORT_DATA_MISMATCH',
      'TPM quote nonce differs from the expected report data',
    );
  }
  return { nonce, pcrs: checkQuotePcrs(attest, quote.pcrs) };
}

/**
 * The hardware report's report data begins with SHA-256 of the HCL runtime claims (so it vouches
 * for the AK), and, from evidence version 2 on, the HCL user data (NV 0x01400002) begins with the
 * expected report data. `hardware` names the report in the message (`SNP report data`).
 */
export function checkHclBinding(
  hcl: HclReport,
  hardwareReportData: Uint8Array,
  hardware: string,
  version: number,
  expected: ExpectedData,
): void {
  const varDataHash = createHash('sha256').update(hcl.varData).digest();
  if (!varDataHash.equals(hardwareReportData.subarray(0, 32))) {
    throw new VerificationError(
      'HCL_DATA_MISMATCH',
      `HCL runtime claims digest differs from the ${hardware}`,
    );
  }
  if (version >= 2 && reportDataExpected(expected)) {
    const reportData = Buffer.from(expected.reportData);
    const userData = hclUserData(hcl.varData);
    if (userData.length < reportData.length || !userData.subarray(0, reportData.length).equals(reportData)) {
      throw new VerificationError(
        'REPORT_DATA_MISMATCH',
        'HCL user-data differs from the expected report data',
      );
    }
  }
}
