// guest-components' `az-tdx-vtpm` attester (Azure TDX confidential VMs): the report data goes to
// the vTPM's user-data NV index, the paravisor answers with an HCL report wrapping a TD report
// whose REPORT_DATA binds the runtime claims (with the vTPM AK and the user data), Azure's quote
// service turns that TD report into a TD quote, and the AK quotes the PCRs with the report data as
// nonce. Evidence version 2:
//   {"version":2,"tpm_quote":{"signature":hex,"message":hex,"pcrs":[24 × hex]},
//    "hcl_report":base64url,"td_quote":base64url}
// Init-data and runtime measurements go to the vTPM's SHA-256 PCRs, as for az-snp-vtpm.
import {
  type Attester,
  type AttesterModule,
  EvidenceCollectionFailed,
  type PlatformContext,
} from '../attester.js';
import { HCL_REPORT_TYPE, readHclReport } from '../az-snp-vtpm/hcl.js';
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
import { fetchTdQuote, TD_REPORT_SIZE } from './quote-service.js';

export {
  AZURE_AK_HANDLE,
  AZURE_TPM_DEVICE,
  DEFAULT_REPORT_SETTLE_MS,
  EVIDENCE_VERSION,
  HCL_REPORT_NV_INDEX,
  MAX_REPORT_DATA_SIZE,
  REPORT_DATA_NV_INDEX,
} from '../azure-vtpm.js';
export {
  DEFAULT_TD_QUOTE_TIMEOUT_MS,
  fetchTdQuote,
  MAX_TD_QUOTE_RESPONSE_SIZE,
  TD_QUOTE_PATH,
} from './quote-service.js';

const HCL_HW_REPORT_OFFSET = 32;

export interface AzTdxVtpmEvidence {
  readonly version: 2;
  readonly tpm_quote: VtpmQuoteJson;
  readonly hcl_report: string;
  readonly td_quote: string;
}

/** `imdsUrl` is the base URL of the TD quote service. */
export type AzTdxVtpmAttesterOptions = AzureVtpmAttesterOptions;

/** The TD report inside an HCL report of type TDX. */
export function tdReportOf(hclReport: Uint8Array): Uint8Array {
  let type: number;
  try {
    type = readHclReport(hclReport).reportType;
  } catch (err) {
    throw new EvidenceCollectionFailed(`HCL report is malformed: ${(err as Error).message}`, { cause: err });
  }
  if (type !== HCL_REPORT_TYPE.TDX) {
    throw new EvidenceCollectionFailed(`HCL report type ${type} is not TDX (4)`);
  }
  return hclReport.subarray(HCL_HW_REPORT_OFFSET, HCL_HW_REPORT_OFFSET + TD_REPORT_SIZE);
}

export class AzTdxVtpmAttester extends AzureVtpmAttester implements Attester {
  readonly tee = 'az-tdx-vtpm' as const;

  async getEvidence(reportData: Uint8Array): Promise<AzTdxVtpmEvidence> {
    const address = this.prepare(reportData);
    const hclReport = await withTpm(address, (tpm) => this.freshHclReport(tpm, reportData, address));
    const tdQuote = await fetchTdQuote(this.imdsUrl, tdReportOf(hclReport));
    const quote = await withTpm(address, (tpm) => this.quotePcrs(tpm, reportData, address));
    return {
      version: EVIDENCE_VERSION,
      tpm_quote: vtpmQuoteJson(quote),
      hcl_report: b64urlPadded(hclReport),
      td_quote: b64urlPadded(tdQuote),
    };
  }
}

/** Upstream's `is_tdx_cvm`: the vTPM holds an HCL report that wraps a TD report. */
function detect(ctx: PlatformContext): Promise<{ detected: boolean; reason: string }> {
  return detectHclReport(ctx, HCL_REPORT_TYPE.TDX, 'a TD report', 'TDX');
}

export const azTdxVtpmModule: AttesterModule = {
  tee: 'az-tdx-vtpm',
  detect,
  create: (options) => new AzTdxVtpmAttester(options),
};
