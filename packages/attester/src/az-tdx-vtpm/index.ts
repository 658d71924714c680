// guest-components' `az-tdx-vtpm` attester (Azure TDX confidential VMs): the report data goes to
// the vTPM's user-data NV index, the paravisor answers with an HCL report wrapping a TD report
// whose REPORT_DATA binds the runtime claims (with the vTPM AK and the user data), Azure's quote
// service turns that TD report into a TD quote, and the AK quotes the PCRs with the report data as
// nonce. Evidence version 2:
//   {"version":2,"tpm_quote":{"signature":hex,"message":hex,"pcrs":[24 × hex]},
//    "hcl_report":base64url,"td_quote":base64url}
// Init-data and runtime measurements go to the vTPM's SHA-256 PCRs, as for az-snp-vtpm.
import { pcrSelection, TPM_ALG, TPM_RH, TPMA_NV, type Tpm, type TpmAddress } from '@broker/tpm';
import {
  type Attester,
  type AttesterLogger,
  type AttesterModule,
  EvidenceCollectionFailed,
  type PlatformContext,
  type PlatformOptions,
} from '../attester.js';
import { expectedUserData, HCL_REPORT_TYPE, hclUserData, readHclReport } from '../az-snp-vtpm/hcl.js';
import { BROKER_AZURE_IMDS_URL, DEFAULT_IMDS_URL } from '../az-snp-vtpm/imds.js';
import {
  BROKER_TPM,
  describeAddress,
  deviceUnderRoot,
  extendSha256Pcr,
  INIT_DATA_PCR,
  lowerHex,
  readSha256Pcr,
  tpmAddressFromEnv,
  withTpm,
  wrapTpmError,
} from '../tpm/common.js';
import { fetchTdQuote, TD_REPORT_SIZE } from './quote-service.js';

export {
  DEFAULT_TD_QUOTE_TIMEOUT_MS,
  fetchTdQuote,
  MAX_TD_QUOTE_RESPONSE_SIZE,
  TD_QUOTE_PATH,
} from './quote-service.js';

export const HCL_REPORT_NV_INDEX = 0x01400001;
export const REPORT_DATA_NV_INDEX = 0x01400002;
export const AZURE_AK_HANDLE = 0x81000003;
export const AZURE_TPM_DEVICE = '/dev/tpmrm0';
export const EVIDENCE_VERSION = 2;
export const MAX_REPORT_DATA_SIZE = 64;
export const DEFAULT_REPORT_SETTLE_MS = 3000;
const POLL_INTERVAL_MS = 100;
const HCL_HW_REPORT_OFFSET = 32;

export interface AzTdxVtpmEvidence {
  readonly version: 2;
  readonly tpm_quote: { readonly signature: string; readonly message: string; readonly pcrs: string[] };
  readonly hcl_report: string;
  readonly td_quote: string;
}

export interface AzTdxVtpmAttesterOptions extends PlatformOptions {
  /** The vTPM; by default `BROKER_TPM`, else /dev/tpmrm0 (under the platform root). */
  readonly tpm?: TpmAddress;
  /** IMDS base URL for the TD quote service; by default `BROKER_AZURE_IMDS_URL`, else 169.254.169.254. */
  readonly imdsUrl?: string;
  /** How long to wait for the paravisor to regenerate the HCL report; default 3000 ms. */
  readonly reportSettleMs?: number;
}

function b64urlPadded(b: Uint8Array): string {
  // serde_with's UrlSafe engine pads.
  const s = Buffer.from(b).toString('base64url');
  return s + '='.repeat((4 - (s.length % 4)) % 4);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Writes the user data, (re)defining the index when missing or of another size, as az-cvm-vtpm does. */
async function writeReportData(tpm: Tpm, data: Uint8Array): Promise<void> {
  const existing = await tpm.nvReadPublicIfDefined(REPORT_DATA_NV_INDEX);
  if (existing !== undefined && existing.nvPublic.dataSize !== data.length) {
    await tpm.nvUndefineSpace(TPM_RH.OWNER, REPORT_DATA_NV_INDEX);
  }
  if (existing === undefined || existing.nvPublic.dataSize !== data.length) {
    await tpm.nvDefineSpace(TPM_RH.OWNER, {
      nvIndex: REPORT_DATA_NV_INDEX,
      nameAlg: TPM_ALG.SHA256,
      attributes: TPMA_NV.OWNERWRITE | TPMA_NV.OWNERREAD,
      authPolicy: new Uint8Array(),
      dataSize: data.length,
    });
  }
  await tpm.nvWrite(TPM_RH.OWNER, REPORT_DATA_NV_INDEX, data, 0);
}

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

export class AzTdxVtpmAttester implements Attester {
  readonly tee = 'az-tdx-vtpm' as const;
  readonly #options: AzTdxVtpmAttesterOptions;
  readonly #logger: AttesterLogger | undefined;

  constructor(options: AzTdxVtpmAttesterOptions = {}) {
    this.#options = options;
    this.#logger = options.logger;
  }

  get address(): TpmAddress {
    const env = this.#options.env ?? process.env;
    return this.#options.tpm ?? tpmAddressFromEnv(env) ?? deviceUnderRoot(this.#options, AZURE_TPM_DEVICE);
  }

  get imdsUrl(): string {
    const env = this.#options.env ?? process.env;
    const fromEnv = env[BROKER_AZURE_IMDS_URL];
    return this.#options.imdsUrl ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : DEFAULT_IMDS_URL);
  }

  async getEvidence(reportData: Uint8Array): Promise<AzTdxVtpmEvidence> {
    if (reportData.length > MAX_REPORT_DATA_SIZE) {
      throw new EvidenceCollectionFailed(
        `report data of ${reportData.length} bytes is too large for a vTPM quote (at most ${MAX_REPORT_DATA_SIZE})`,
      );
    }
    let address: TpmAddress;
    try {
      address = this.address;
    } catch (err) {
      throw new EvidenceCollectionFailed((err as Error).message, { cause: err });
    }
    const hclReport = await withTpm(address, (tpm) => this.#freshReport(tpm, reportData, address));
    const tdQuote = await fetchTdQuote(this.imdsUrl, tdReportOf(hclReport));
    const { quote, pcrs } = await withTpm(address, async (tpm) => {
      try {
        const q = await tpm.quote(AZURE_AK_HANDLE, reportData, [pcrSelection(TPM_ALG.SHA256)]);
        if (q.signature.sigAlg !== TPM_ALG.RSASSA) {
          throw new EvidenceCollectionFailed(
            'Wrong signature: the vTPM AK did not produce an RSASSA signature',
          );
        }
        return {
          quote: { quoted: q.quoted, signature: q.signature.sig },
          pcrs: await tpm.readPcrs(TPM_ALG.SHA256),
        };
      } catch (err) {
        throw wrapTpmError(
          `vTPM quote with AK 0x${AZURE_AK_HANDLE.toString(16)} on ${describeAddress(address)} failed`,
          err,
          (m, o) => new EvidenceCollectionFailed(m, o),
        );
      }
    });
    return {
      version: EVIDENCE_VERSION,
      tpm_quote: {
        signature: lowerHex(quote.signature),
        message: lowerHex(quote.quoted),
        pcrs: pcrs.map(lowerHex),
      },
      hcl_report: b64urlPadded(hclReport),
      td_quote: b64urlPadded(tdQuote),
    };
  }

  /** Writes the report data, then reads the HCL report until it carries it (or the settle time ends). */
  async #freshReport(tpm: Tpm, reportData: Uint8Array, address: TpmAddress): Promise<Uint8Array> {
    const settleMs = this.#options.reportSettleMs ?? DEFAULT_REPORT_SETTLE_MS;
    const want = expectedUserData(reportData);
    try {
      await writeReportData(tpm, reportData);
      const deadline = Date.now() + settleMs;
      for (;;) {
        const report = await tpm.nvReadAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX);
        let userData: string | undefined;
        try {
          userData = hclUserData(readHclReport(report));
        } catch {
          userData = undefined;
        }
        if (userData?.toUpperCase() === want) return report;
        if (Date.now() >= deadline) {
          this.#logger?.warn(
            `HCL report at NV 0x${HCL_REPORT_NV_INDEX.toString(16)} still lacks the new user data after ${settleMs} ms; using it as is`,
          );
          return report;
        }
        await sleep(Math.min(POLL_INTERVAL_MS, Math.max(0, deadline - Date.now())));
      }
    } catch (err) {
      throw wrapTpmError(
        `getting the HCL report through NV 0x${REPORT_DATA_NV_INDEX.toString(16)}/0x${HCL_REPORT_NV_INDEX.toString(16)} on ${describeAddress(address)} failed`,
        err,
        (m, o) => new EvidenceCollectionFailed(m, o),
      );
    }
  }

  /** Extends PCR8 with the init-data digest, which must be SHA-256. */
  async bindInitData(digest: Uint8Array): Promise<void> {
    await extendSha256Pcr(this.address, INIT_DATA_PCR, digest, this.#logger, 'init-data binding');
  }

  async extendRuntimeMeasurement(eventDigest: Uint8Array, registerIndex: number): Promise<void> {
    await extendSha256Pcr(this.address, registerIndex, eventDigest, this.#logger, 'runtime measurement');
  }

  async getRuntimeMeasurement(registerIndex: number): Promise<Uint8Array> {
    return readSha256Pcr(this.address, registerIndex);
  }
}

/** Upstream's `is_tdx_cvm`: the vTPM holds an HCL report that wraps a TD report. */
async function detect(ctx: PlatformContext): Promise<{ detected: boolean; reason: string }> {
  let address = tpmAddressFromEnv(ctx.env);
  if (address === undefined) {
    if (!(await ctx.exists(AZURE_TPM_DEVICE))) {
      return { detected: false, reason: `no ${AZURE_TPM_DEVICE} and ${BROKER_TPM} is not set` };
    }
    address = { kind: 'device', path: AZURE_TPM_DEVICE };
  }
  const where = describeAddress(address);
  const report = await withTpm(address, async (tpm) => {
    if ((await tpm.nvReadPublicIfDefined(HCL_REPORT_NV_INDEX)) === undefined) return undefined;
    return tpm.nvReadAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX);
  });
  if (report === undefined) {
    return {
      detected: false,
      reason: `${where} has no HCL report at NV 0x${HCL_REPORT_NV_INDEX.toString(16)}`,
    };
  }
  let type: number;
  try {
    type = readHclReport(report).reportType;
  } catch (err) {
    return { detected: false, reason: `${where}: ${(err as Error).message}` };
  }
  return type === HCL_REPORT_TYPE.TDX
    ? { detected: true, reason: `${where} holds an HCL report wrapping a TD report` }
    : { detected: false, reason: `${where} holds an HCL report of type ${type}, not TDX` };
}

export const azTdxVtpmModule: AttesterModule = {
  tee: 'az-tdx-vtpm',
  detect,
  create: (options) => new AzTdxVtpmAttester(options),
};
