import { isAbsolute } from 'node:path';
import { pcrSelection, spkiFromTpmt, TPM_ALG, type TpmAddress } from '@broker/tpm';
import {
  type Attester,
  AttesterError,
  type AttesterLogger,
  type AttesterModule,
  EvidenceCollectionFailed,
  type PlatformContext,
  type PlatformOptions,
} from '../attester.js';
import { platformContext } from '../platform.js';
import {
  BROKER_TPM,
  bindInitDataOnce,
  checkExtendArguments,
  describeAddress,
  deviceUnderRoot,
  extendSha256Pcr,
  INIT_DATA_PCR,
  lowerHex,
  readSha256Pcr,
  tpmAddressFromEnv,
  withTpm,
  wrapTpmError,
} from './common.js';

/** Environment variable naming the TPM device, as upstream. */
export const AA_TPM_DEVICE = 'AA_TPM_DEVICE';
/** Environment variable holding the AK's persistent handle in hex (`0x81010002`), as upstream. */
export const AA_TPM_AK_HANDLE = 'AA_TPM_AK_HANDLE';
export const DEFAULT_TPM_AK_HANDLE = 0x81010002;
/** Devices upstream probes, in order, when `AA_TPM_DEVICE` is unset. */
export const TPM_DEVICE_CANDIDATES: readonly string[] = Object.freeze([
  '/dev/tpm0',
  '/dev/tpm1',
  '/dev/tpm2',
]);
/** The TPM attester binds 32 bytes of report data: longer input is truncated, shorter zero-padded. */
export const TPM_REPORT_DATA_SIZE = 32;

/**
 * Evidence of guest-components' `tpm` attester: the quote message
 * (TPMS_ATTEST) and its TPMT_SIGNATURE in standard base64, the 24 SHA-256
 * PCRs in lower-case hex, and the AK as a DER SubjectPublicKeyInfo in
 * standard base64. Key order follows the upstream structs.
 */
export interface TpmEvidence {
  readonly tpm_quote: { readonly signature: string; readonly message: string; readonly pcrs: string[] };
  readonly ak_public: string;
}

/**
 * Parses `AA_TPM_AK_HANDLE` as upstream does: leading `0x` prefixes are
 * stripped (all of them, like Rust's `trim_start_matches`), the rest is a
 * hex u32. Undefined when it is not one.
 */
export function parseAkHandle(value: string): number | undefined {
  let v = value;
  while (v.startsWith('0x')) v = v.slice(2);
  v = v.startsWith('+') ? v.slice(1) : v;
  if (!/^[0-9a-fA-F]+$/.test(v)) return undefined;
  const n = BigInt(`0x${v}`);
  return n <= 0xffffffffn ? Number(n) : undefined;
}

/** Report data resized to 32 bytes: truncated when longer, zero-padded when shorter (upstream `resize`). */
export function resizeReportData(reportData: Uint8Array): Uint8Array {
  const out = new Uint8Array(TPM_REPORT_DATA_SIZE);
  out.set(reportData.subarray(0, TPM_REPORT_DATA_SIZE));
  return out;
}

interface Resolved {
  readonly address: TpmAddress;
  readonly akHandle: number;
}

type Found<T> =
  | { readonly ok: true; readonly value: T; readonly reason: string }
  | { readonly ok: false; readonly reason: string };

/** `AA_TPM_AK_HANDLE` or the default handle, as upstream's `get_ak_handle`. */
function resolveAkHandle(env: PlatformContext['env']): Found<number> {
  const text = env[AA_TPM_AK_HANDLE];
  if (text === undefined)
    return { ok: true, value: DEFAULT_TPM_AK_HANDLE, reason: 'default AK handle 0x81010002' };
  const handle = parseAkHandle(text);
  return handle === undefined
    ? { ok: false, reason: `invalid AK handle ${JSON.stringify(text)} in ${AA_TPM_AK_HANDLE}` }
    : { ok: true, value: handle, reason: `AK handle 0x${handle.toString(16)} from ${AA_TPM_AK_HANDLE}` };
}

/**
 * The TPM as upstream's `detect_tpm_device` finds it, after our
 * `BROKER_TPM`: `AA_TPM_DEVICE` (which must exist), else the first of
 * /dev/tpm0..2.
 */
async function resolveAddress(ctx: PlatformContext, options: PlatformOptions): Promise<Found<TpmAddress>> {
  const fromEnv = tpmAddressFromEnv(ctx.env);
  if (fromEnv !== undefined)
    return { ok: true, value: fromEnv, reason: `${BROKER_TPM}=${describeAddress(fromEnv)}` };
  const device = ctx.env[AA_TPM_DEVICE];
  if (device !== undefined) {
    return isAbsolute(device) && (await ctx.exists(device))
      ? { ok: true, value: deviceUnderRoot(options, device), reason: `${AA_TPM_DEVICE}=${device}` }
      : {
          ok: false,
          reason: `${AA_TPM_DEVICE} is set to ${JSON.stringify(device)}, but the device does not exist`,
        };
  }
  for (const candidate of TPM_DEVICE_CANDIDATES) {
    if (await ctx.exists(candidate))
      return { ok: true, value: deviceUnderRoot(options, candidate), reason: candidate };
  }
  return {
    ok: false,
    reason: `no TPM device (/dev/tpm0..2), and neither ${AA_TPM_DEVICE} nor ${BROKER_TPM} is set`,
  };
}

export interface TpmAttesterOptions extends PlatformOptions {
  /** The TPM to use; by default found as upstream does (see `resolve`). */
  readonly tpm?: TpmAddress;
  /** Persistent handle of the AK; by default `AA_TPM_AK_HANDLE` or 0x81010002. */
  readonly akHandle?: number;
}

/**
 * A plain (v)TPM, not bound to any TEE: the AK at a persistent handle
 * quotes the SHA-256 PCRs with the report data as qualifying data. The
 * verifier trusts the AK only through its policy (`trusted_aks`).
 */
export class TpmAttester implements Attester {
  readonly tee = 'tpm' as const;
  readonly #options: TpmAttesterOptions;
  readonly #logger: AttesterLogger | undefined;
  #resolved: Promise<Resolved> | undefined;

  constructor(options: TpmAttesterOptions = {}) {
    this.#options = options;
    this.#logger = options.logger;
  }

  #target(): Promise<Resolved> {
    if (this.#resolved === undefined) {
      const pending = this.#resolve();
      this.#resolved = pending;
      // A failed lookup is retried next time (the device may appear later).
      pending.catch(() => {
        if (this.#resolved === pending) this.#resolved = undefined;
      });
    }
    return this.#resolved;
  }

  async #resolve(): Promise<Resolved> {
    const o = this.#options;
    const ctx = platformContext(o);
    let address = o.tpm;
    if (address === undefined) {
      const found = await resolveAddress(ctx, o);
      if (!found.ok) throw new AttesterError(`No TPM device found: ${found.reason}`);
      address = found.value;
    }
    let akHandle = o.akHandle;
    if (akHandle === undefined) {
      const found = resolveAkHandle(ctx.env);
      if (!found.ok) throw new AttesterError(`Failed to get AK handle: ${found.reason}`);
      akHandle = found.value;
    }
    this.#logger?.info(
      `[TPM Attester] using ${describeAddress(address)} and AK handle 0x${akHandle.toString(16)}`,
    );
    return { address, akHandle };
  }

  async getEvidence(reportData: Uint8Array): Promise<TpmEvidence> {
    const nonce = resizeReportData(reportData);
    let target: Resolved;
    try {
      target = await this.#target();
    } catch (err) {
      throw new EvidenceCollectionFailed((err as Error).message, { cause: err });
    }
    const { address, akHandle } = target;
    try {
      return await withTpm(address, async (tpm) => {
        const ak = await tpm.readPublic(akHandle);
        if (ak.public.type !== TPM_ALG.RSA) {
          throw new EvidenceCollectionFailed(`AK at 0x${akHandle.toString(16)} is not an RSA key`);
        }
        const quote = await tpm.quote(akHandle, nonce, [pcrSelection(TPM_ALG.SHA256)], {
          scheme: { scheme: TPM_ALG.RSASSA, hashAlg: TPM_ALG.SHA256 },
        });
        if (quote.signature.sigAlg !== TPM_ALG.RSASSA) throw new EvidenceCollectionFailed('Wrong Signature');
        const pcrs = await tpm.readPcrs(TPM_ALG.SHA256);
        return {
          tpm_quote: {
            signature: Buffer.from(quote.signatureBytes).toString('base64'),
            message: Buffer.from(quote.quoted).toString('base64'),
            pcrs: pcrs.map(lowerHex),
          },
          ak_public: Buffer.from(spkiFromTpmt(ak.public)).toString('base64'),
        };
      });
    } catch (err) {
      throw wrapTpmError(
        `TPM quote with AK 0x${akHandle.toString(16)} on ${describeAddress(address)} failed`,
        err,
        (m, o) => new EvidenceCollectionFailed(m, o),
      );
    }
  }

  /** Binds the init-data digest (SHA-256) to PCR8, once (`bindInitDataOnce`). */
  async bindInitData(digest: Uint8Array): Promise<void> {
    checkExtendArguments(digest, INIT_DATA_PCR, 'init-data binding');
    const { address } = await this.#target();
    await bindInitDataOnce(address, digest, this.#logger);
  }

  async extendRuntimeMeasurement(eventDigest: Uint8Array, registerIndex: number): Promise<void> {
    const { address } = await this.#target();
    await extendSha256Pcr(address, registerIndex, eventDigest, this.#logger, 'runtime measurement');
  }

  async getRuntimeMeasurement(registerIndex: number): Promise<Uint8Array> {
    const { address } = await this.#target();
    return readSha256Pcr(address, registerIndex);
  }
}

export const tpmModule: AttesterModule = {
  tee: 'tpm',
  async detect(ctx) {
    const address = await resolveAddress(ctx, {});
    if (!address.ok) return { detected: false, reason: address.reason };
    const ak = resolveAkHandle(ctx.env);
    return { detected: ak.ok, reason: `${address.reason}, ${ak.reason}` };
  },
  create: (options) => new TpmAttester(options),
};
