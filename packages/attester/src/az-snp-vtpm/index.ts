import type { Attester, AttesterModule, PlatformContext } from '../attester.js';
import {
  AzureVtpmAttester,
  type AzureVtpmAttesterOptions,
  b64urlPadded,
  detectHclReport,
  EVIDENCE_VERSION,
  type VtpmQuoteJson,
  vtpmQuoteJson,
} from '../azure-vtpm.js';
import { withTpm } from '../tpm/common.js';
import { HCL_REPORT_TYPE } from './hcl.js';
import { certificatePemToDer, fetchAmdCertificates } from './imds.js';

export {
  AZURE_AK_HANDLE,
  AZURE_TPM_DEVICE,
  DEFAULT_REPORT_SETTLE_MS,
  EVIDENCE_VERSION,
  HCL_REPORT_NV_INDEX,
  MAX_REPORT_DATA_SIZE,
  REPORT_DATA_NV_INDEX,
} from '../azure-vtpm.js';

/**
 * Evidence version 2 of guest-components' `az-snp-vtpm` attester: the raw
 * RSA signature and the TPMS_ATTEST in lower-case hex, the 24 SHA-256 PCRs
 * in hex, and the HCL report and VCEK (DER) in padded URL-safe base64. Key
 * order follows the upstream structs.
 */
export interface AzSnpVtpmEvidence {
  readonly version: 2;
  readonly tpm_quote: VtpmQuoteJson;
  readonly hcl_report: string;
  readonly vcek: string;
}

export type AzSnpVtpmAttesterOptions = AzureVtpmAttesterOptions;

/**
 * Azure confidential VM on SEV-SNP: the vTPM's AK quotes the PCRs with the
 * report data as nonce, and the HCL report (an SNP report whose report_data
 * is the hash of runtime claims that include the AK and the report data)
 * ties the AK to the hardware. The VCEK comes from IMDS.
 */
export class AzSnpVtpmAttester extends AzureVtpmAttester implements Attester {
  readonly tee = 'az-snp-vtpm' as const;

  async getEvidence(reportData: Uint8Array): Promise<AzSnpVtpmEvidence> {
    const address = this.prepare(reportData);
    const { hclReport, quote } = await withTpm(address, async (tpm) => {
      const hclReport = await this.freshHclReport(tpm, reportData, address);
      const quote = await this.quotePcrs(tpm, reportData, address);
      return { hclReport, quote };
    });
    const certs = await fetchAmdCertificates(this.imdsUrl);
    const vcek = certificatePemToDer(certs.vcek);
    return {
      version: EVIDENCE_VERSION,
      tpm_quote: vtpmQuoteJson(quote),
      hcl_report: b64urlPadded(hclReport),
      vcek: b64urlPadded(vcek),
    };
  }
}

/**
 * Upstream's `is_snp_cvm`: the HCL report NV index of the vTPM exists,
 * reads with owner authorization, and wraps an SNP report.
 */
function detect(ctx: PlatformContext): Promise<{ detected: boolean; reason: string }> {
  return detectHclReport(ctx, HCL_REPORT_TYPE.SNP, 'an SNP report', 'SNP');
}

export const azSnpVtpmModule: AttesterModule = {
  tee: 'az-snp-vtpm',
  detect,
  create: (options) => new AzSnpVtpmAttester(options),
};
