// The vTPM flow shared by Azure's confidential VMs (az-snp-vtpm, az-tdx-vtpm), as guest-components'
// az-cvm-vtpm crate does it: the report data goes to the vTPM's user-data NV index, the paravisor
// answers with a fresh HCL report (which wraps the hardware report binding the AK and that user
// data), and the AK quotes the SHA-256 PCRs with the report data as nonce. Only the hardware part
// of the evidence (VCEK from IMDS, TD quote from the quote service) differs per TEE.
import { pcrSelection, TPM_ALG, TPM_RH, TPMA_NV, type Tpm, type TpmAddress } from '@broker/tpm';
import {
  type AttesterLogger,
  EvidenceCollectionFailed,
  type PlatformContext,
  type PlatformOptions,
} from './attester.js';
import { expectedUserData, hclUserData, readHclReport } from './az-snp-vtpm/hcl.js';
import { BROKER_AZURE_IMDS_URL, DEFAULT_IMDS_URL } from './az-snp-vtpm/imds.js';
import {
  BROKER_TPM,
  bindInitDataOnce,
  describeAddress,
  deviceUnderRoot,
  extendSha256Pcr,
  lowerHex,
  readSha256Pcr,
  tpmAddressFromEnv,
  withTpm,
  wrapTpmError,
} from './tpm/common.js';

/** NV index holding the HCL report, which the paravisor regenerates when the user data changes. */
export const HCL_REPORT_NV_INDEX = 0x01400001;
/** NV index the guest writes its report data (user data) to. */
export const REPORT_DATA_NV_INDEX = 0x01400002;
/** Persistent handle of Azure's vTPM attestation key. */
export const AZURE_AK_HANDLE = 0x81000003;
/** The TPM device upstream opens (tss's default TCTI). */
export const AZURE_TPM_DEVICE = '/dev/tpmrm0';
export const EVIDENCE_VERSION = 2;
/** TPM2B_DATA holds at most 64 bytes of qualifying data. */
export const MAX_REPORT_DATA_SIZE = 64;
/** Upstream sleeps 3 s after writing the user data; we poll for the fresh report for at most that long. */
export const DEFAULT_REPORT_SETTLE_MS = 3000;
const POLL_INTERVAL_MS = 100;

export interface AzureVtpmAttesterOptions extends PlatformOptions {
  /** The vTPM; by default `BROKER_TPM`, else /dev/tpmrm0 (under the platform root). */
  readonly tpm?: TpmAddress;
  /** IMDS base URL; by default `BROKER_AZURE_IMDS_URL`, else http://169.254.169.254. */
  readonly imdsUrl?: string;
  /** How long to wait for the paravisor to regenerate the HCL report; default 3000 ms. */
  readonly reportSettleMs?: number;
}

/** The `tpm_quote` member of evidence version 2: raw RSA signature, TPMS_ATTEST and PCRs in lower-case hex. */
export interface VtpmQuoteJson {
  readonly signature: string;
  readonly message: string;
  readonly pcrs: string[];
}

/** An AK quote over the SHA-256 PCRs, with the PCR values read right after it. */
export interface VtpmQuote {
  readonly quoted: Uint8Array;
  /** The raw RSA signature: upstream sends it without the TPMT_SIGNATURE around it. */
  readonly signature: Uint8Array;
  readonly pcrs: Uint8Array[];
}

export function b64urlPadded(b: Uint8Array): string {
  // serde_with's UrlSafe engine pads: keep the '=' that base64url encoding drops.
  const s = Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64url');
  return s + '='.repeat((4 - (s.length % 4)) % 4);
}

export function vtpmQuoteJson(quote: VtpmQuote): VtpmQuoteJson {
  return {
    signature: lowerHex(quote.signature),
    message: lowerHex(quote.quoted),
    pcrs: quote.pcrs.map(lowerHex),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Writes `data` to the user-data index, (re)defining it when it is missing
 * or has another size, as the az-cvm-vtpm crate does: owner read/write,
 * SHA-256 name.
 */
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

/**
 * The vTPM part of an Azure confidential VM attester; subclasses add the
 * hardware evidence and the evidence layout.
 */
export abstract class AzureVtpmAttester {
  protected readonly options: AzureVtpmAttesterOptions;
  protected readonly logger: AttesterLogger | undefined;

  constructor(options: AzureVtpmAttesterOptions = {}) {
    this.options = options;
    this.logger = options.logger;
  }

  get address(): TpmAddress {
    const env = this.options.env ?? process.env;
    return this.options.tpm ?? tpmAddressFromEnv(env) ?? deviceUnderRoot(this.options, AZURE_TPM_DEVICE);
  }

  get imdsUrl(): string {
    const env = this.options.env ?? process.env;
    const fromEnv = env[BROKER_AZURE_IMDS_URL];
    return this.options.imdsUrl ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : DEFAULT_IMDS_URL);
  }

  /** Refuses report data a quote cannot carry, and resolves the vTPM address; both fail as evidence collection. */
  protected prepare(reportData: Uint8Array): TpmAddress {
    if (reportData.length > MAX_REPORT_DATA_SIZE) {
      throw new EvidenceCollectionFailed(
        `report data of ${reportData.length} bytes is too large for a vTPM quote (at most ${MAX_REPORT_DATA_SIZE})`,
      );
    }
    try {
      return this.address;
    } catch (err) {
      throw new EvidenceCollectionFailed((err as Error).message, { cause: err });
    }
  }

  /**
   * Writes the report data and reads the HCL report until it carries that
   * user data. Upstream instead sleeps 3 s and reads once; polling returns
   * as soon as the paravisor is done, and after the same 3 s gives up and
   * returns what it read, as upstream would (the verifier then refuses a
   * stale report).
   */
  protected async freshHclReport(tpm: Tpm, reportData: Uint8Array, address: TpmAddress): Promise<Uint8Array> {
    const settleMs = this.options.reportSettleMs ?? DEFAULT_REPORT_SETTLE_MS;
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
          this.logger?.warn(
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

  /** Quotes the SHA-256 PCRs with the AK and the report data as nonce; the AK must sign RSASSA. */
  protected async quotePcrs(tpm: Tpm, reportData: Uint8Array, address: TpmAddress): Promise<VtpmQuote> {
    try {
      const quote = await tpm.quote(AZURE_AK_HANDLE, reportData, [pcrSelection(TPM_ALG.SHA256)]);
      if (quote.signature.sigAlg !== TPM_ALG.RSASSA) {
        throw new EvidenceCollectionFailed(
          'Wrong signature: the vTPM AK did not produce an RSASSA signature',
        );
      }
      const pcrs = await tpm.readPcrs(TPM_ALG.SHA256);
      return { quoted: quote.quoted, signature: quote.signature.sig, pcrs };
    } catch (err) {
      throw wrapTpmError(
        `vTPM quote with AK 0x${AZURE_AK_HANDLE.toString(16)} on ${describeAddress(address)} failed`,
        err,
        (m, o) => new EvidenceCollectionFailed(m, o),
      );
    }
  }

  /** Binds the init-data digest (SHA-256, "expected sha256 digest") to PCR8, once (`bindInitDataOnce`). */
  async bindInitData(digest: Uint8Array): Promise<void> {
    await bindInitDataOnce(this.address, digest, this.logger);
  }

  async extendRuntimeMeasurement(eventDigest: Uint8Array, registerIndex: number): Promise<void> {
    await extendSha256Pcr(this.address, registerIndex, eventDigest, this.logger, 'runtime measurement');
  }

  async getRuntimeMeasurement(registerIndex: number): Promise<Uint8Array> {
    return readSha256Pcr(this.address, registerIndex);
  }
}

/**
 * Upstream's `is_snp_cvm` / `is_tdx_cvm`: the HCL report NV index of the
 * vTPM exists, reads with owner authorization, and wraps a hardware report
 * of `type`; `wraps` names that report and `name` the TEE in the reasons.
 */
export async function detectHclReport(
  ctx: PlatformContext,
  type: number,
  wraps: string,
  name: string,
): Promise<{ detected: boolean; reason: string }> {
  let address = tpmAddressFromEnv(ctx.env);
  if (address === undefined) {
    if (!(await ctx.exists(AZURE_TPM_DEVICE))) {
      return { detected: false, reason: `no ${AZURE_TPM_DEVICE} and ${BROKER_TPM} is not set` };
    }
    // ctx resolves paths under the platform root; the module does not see that root, so probe the real device.
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
  let found: number;
  try {
    found = readHclReport(report).reportType;
  } catch (err) {
    return { detected: false, reason: `${where}: ${(err as Error).message}` };
  }
  return found === type
    ? { detected: true, reason: `${where} holds an HCL report wrapping ${wraps}` }
    : { detected: false, reason: `${where} holds an HCL report of type ${found}, not ${name}` };
}
