// Azure TDX confidential VMs attest through the vTPM (trustee's az-tdx-vtpm verifier). The chain of
// trust runs: Intel SGX root → PCK → QE → TD quote (DCAP, with offline collateral) → REPORT_DATA
// = SHA-256(HCL runtime claims) → HCLAkPub → TPM quote → nonce (the KBS report data) and PCRs.
import { createHash } from 'node:crypto';
import { hclAkPub, hclUserData, parseHclReport } from '../az-snp-vtpm/hcl.js';
import { VerificationError } from '../errors.js';
import { tdxClaims } from '../tdx/claims.js';
import { trustedSgxRoots } from '../tdx/trust.js';
import { establishTcbOnline, verifyQuoteSignatures } from '../tdx/verify.js';
import {
  checkInitDataPcr,
  checkQuotePcrs,
  INITDATA_PCR,
  parseQuoteMessage,
  pcrClaims,
  verifyQuoteSignature,
} from '../tpm/quote.js';
import { type ExpectedData, reportDataExpected, type Verifier, type VerifierResult } from '../verifier.js';
import { parseAzTdxVtpmEvidence } from './evidence.js';

export class AzTdxVtpmVerifier implements Verifier {
  readonly tee = 'az-tdx-vtpm' as const;

  async evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]> {
    const ev = parseAzTdxVtpmEvidence(evidence);
    const hcl = parseHclReport(ev.hclReport);
    if (hcl.reportType !== 'tdx') {
      throw new VerificationError('REPORT_MALFORMED', 'HCL report holds an SNP report, not a TDX report');
    }
    const reportData = Buffer.from(expected.reportData);

    // The TPM quote: signed by the AK the HCL runtime claims carry, over the nonce and the PCRs.
    verifyQuoteSignature(hclAkPub(hcl.varData), ev.tpmQuote.message, ev.tpmQuote.signature);
    const attest = parseQuoteMessage(ev.tpmQuote.message);
    const nonce = Buffer.from(attest.extraData);
    if (reportDataExpected(expected) && !nonce.equals(reportData)) {
      throw new VerificationError(
        'REPORT_DATA_MISMATCH',
        'TPM quote nonce differs from the expected report data',
      );
    }
    const pcrs = checkQuotePcrs(attest, ev.tpmQuote.pcrs);

    // The TD quote is genuine and vouches for the runtime claims (and so for the AK).
    const options = expected.tdx ?? {};
    const now = expected.now ?? new Date();
    const signed = verifyQuoteSignatures(ev.tdQuote, trustedSgxRoots(options.trustedSgxRoots), now);
    const varDataHash = createHash('sha256').update(hcl.varData).digest();
    if (!varDataHash.equals(signed.quote.body.reportData.subarray(0, 32))) {
      throw new VerificationError(
        'HCL_DATA_MISMATCH',
        'HCL runtime claims digest differs from the TD quote report data',
      );
    }
    if (ev.version >= 2 && reportDataExpected(expected)) {
      const userData = hclUserData(hcl.varData);
      if (
        userData.length < reportData.length ||
        !userData.subarray(0, reportData.length).equals(reportData)
      ) {
        throw new VerificationError(
          'REPORT_DATA_MISMATCH',
          'HCL user-data differs from the expected report data',
        );
      }
    }
    checkInitDataPcr(pcrs, expected.initDataHash);

    const verified = await establishTcbOnline(signed, options, now);
    const pcr8 = pcrs.get(INITDATA_PCR);
    const claims: Record<string, unknown> = {
      ...tdxClaims(verified.quote, verified.pck.platform, undefined),
      tpm: pcrClaims(pcrs),
      ...(pcr8 !== undefined ? { init_data: pcr8.toString('hex') } : {}),
      report_data: nonce.toString('hex'),
      ...verified.collateralClaims,
    };
    return [{ claims, class: 'cpu' }];
  }
}
