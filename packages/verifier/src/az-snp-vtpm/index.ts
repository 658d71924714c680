// Azure SEV-SNP confidential VMs attest through the vTPM (trustee's az-snp-vtpm verifier). The
// chain of trust runs: AMD ARK → ASK → VCEK → SNP report (VMPL 0, the paravisor) → report_data =
// SHA-256(HCL runtime claims) → HCLAkPub → TPM quote → nonce (the KBS report data) and PCRs.
import { VerificationError } from '../errors.js';
import { parseVekCertificate } from '../snp/certs.js';
import { type AzSnpReportClaims, azSnpReportClaims } from '../snp/claims.js';
import { parseSnpReport } from '../snp/report.js';
import { checkVmpl, trustedRoots, verifySnpReport } from '../snp/verify.js';
import { checkInitDataPcr, INITDATA_PCR, pcrClaims } from '../tpm/quote.js';
import type { ExpectedData, Verifier, VerifierResult } from '../verifier.js';
import { parseAzSnpVtpmEvidence } from './evidence.js';
import { parseHclReport } from './hcl.js';
import { checkHclBinding, checkHclTpmQuote } from './hcl-binding.js';

/** The paravisor requests the HCL report at VMPL 0. */
export const HCL_VMPL = 0;

/**
 * Claims of an Azure SNP vTPM: the SNP report's fields as strings, the PCRs under `tpm`, and
 * `report_data` / `init_data` as the quote's nonce and PCR8 in hex.
 */
export type AzSnpVtpmClaims = Omit<AzSnpReportClaims, 'report_data' | 'init_data'> & {
  tpm: Record<string, string>;
  /** Hex of PCR8 when the quote covers it; otherwise, as upstream, the report's HOST_DATA in base64. */
  init_data: string;
  /** Hex of the quote's nonce. */
  report_data: string;
};

export class AzSnpVtpmVerifier implements Verifier {
  readonly tee = 'az-snp-vtpm' as const;

  async evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]> {
    const ev = parseAzSnpVtpmEvidence(evidence);
    const hcl = parseHclReport(ev.hclReport);
    if (hcl.reportType !== 'snp') {
      throw new VerificationError('REPORT_MALFORMED', 'HCL report holds a TDX report, not an SNP report');
    }
    // The quote: signed by the AK the HCL report carries, over the nonce and the PCRs sent.
    const { nonce, pcrs } = checkHclTpmQuote(hcl, ev.tpmQuote, expected);

    // The HCL runtime claims (and so the AK) are the ones the SNP report vouches for.
    const snp = parseSnpReport(hcl.hwReport);
    checkHclBinding(hcl, snp.reportData, 'SNP report data', ev.version, expected);

    // The SNP report: signed by a VCEK that chains to AMD (or a configured test root).
    const vcek = parseVekCertificate(ev.vcek);
    verifySnpReport(snp, vcek, trustedRoots(expected), expected.now ?? new Date());
    checkVmpl(snp, HCL_VMPL);

    checkInitDataPcr(pcrs, expected.initDataHash);

    const base = azSnpReportClaims(snp);
    const pcr8 = pcrs.get(INITDATA_PCR);
    const claims: AzSnpVtpmClaims = {
      ...base,
      tpm: pcrClaims(pcrs),
      init_data: pcr8 !== undefined ? pcr8.toString('hex') : base.init_data,
      report_data: nonce.toString('hex'),
    };
    return [{ claims: claims as unknown as Record<string, unknown>, class: 'cpu' }];
  }
}
