// Azure TDX confidential VMs attest through the vTPM (trustee's az-tdx-vtpm verifier). The chain of
// trust runs: Intel SGX root → PCK → QE → TD quote (DCAP, with offline collateral) → REPORT_DATA
// = SHA-256(HCL runtime claims) → HCLAkPub → TPM quote → nonce (the KBS report data) and PCRs.
import { parseHclReport } from '../az-snp-vtpm/hcl.js';
import { checkHclBinding, checkHclTpmQuote } from '../az-snp-vtpm/hcl-binding.js';
import { VerificationError } from '../errors.js';
import { tdxClaims } from '../tdx/claims.js';
import { trustedSgxRoots } from '../tdx/trust.js';
import { establishTcbOnline, verifyQuoteSignatures } from '../tdx/verify.js';
import { checkInitDataPcr, INITDATA_PCR, pcrClaims } from '../tpm/quote.js';
import type { ExpectedData, Verifier, VerifierResult } from '../verifier.js';
import { parseAzTdxVtpmEvidence } from './evidence.js';

export class AzTdxVtpmVerifier implements Verifier {
  readonly tee = 'az-tdx-vtpm' as const;

  async evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]> {
    const ev = parseAzTdxVtpmEvidence(evidence);
    const hcl = parseHclReport(ev.hclReport);
    if (hcl.reportType !== 'tdx') {
      throw new VerificationError('REPORT_MALFORMED', 'HCL report holds an SNP report, not a TDX report');
    }
    // The TPM quote: signed by the AK the HCL runtime claims carry, over the nonce and the PCRs.
    const { nonce, pcrs } = checkHclTpmQuote(hcl, ev.tpmQuote, expected);

    // The TD quote is genuine and vouches for the runtime claims (and so for the AK).
    const options = expected.tdx ?? {};
    const now = expected.now ?? new Date();
    const signed = verifyQuoteSignatures(ev.tdQuote, trustedSgxRoots(options.trustedSgxRoots), now);
    checkHclBinding(hcl, signed.quote.body.reportData, 'TD quote report data', ev.version, expected);
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
