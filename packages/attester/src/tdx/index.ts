// guest-components' `tdx` attester: the quote comes from configfs-tsm (the `tdx_guest` provider)
// over the report data zero-padded to 64 bytes, or, on kernels without configfs-tsm, from the
// `broker-tdx-report` ioctl shim (TDX_CMD_GET_REPORT0, then the QGS as Intel's tdx-attest asks
// it, upstream's ioctl fallback); the evidence is
// `{"cc_eventlog": std-base64 | null, "quote": std-base64}`. Init-data is bound by MRCONFIGID,
// which must equal the digest zero-padded (or cut) to 48 bytes, or the agent stops: "Init data
// does not match!". MRCONFIGID and the RTMRs are read from the tdx_guest measurements folder
// (kernels from 6.16), or else from a configfs-tsm quote's TD report body (the same registers),
// or, without configfs-tsm, from the TD report of TDX_CMD_GET_REPORT0 as upstream reads them. Runtime measurements
// extend RTMRs through that folder only, as upstream without libtdx.
import { existsSync } from 'node:fs';
import { access, readFile, writeFile } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import {
  type Attester,
  AttesterError,
  type AttesterLogger,
  type AttesterModule,
  EvidenceCollectionFailed,
  type PlatformContext,
  type PlatformOptions,
} from '../attester.js';
import {
  BROKER_TSM_REPORT_ROOT,
  DEFAULT_TSM_REPORT_ROOT,
  probeTsmProvider,
  requestTsmReport,
} from '../configfs-tsm.js';
import { IOCTL_SHIMS, runShim, shimPath, shimRequest } from '../ioctl-shim.js';
import { readCcEventLog } from './eventlog.js';

export { EVENTLOG_END, EVENTLOG_HEADER, readCcEventLog, trimCcel } from './eventlog.js';

export const TDX_REPORT_DATA_SIZE = 64;
/** RTMRs and MRCONFIGID are SHA-384 sized. */
export const TDX_REGISTER_SIZE = 48;
export const TDX_MEASUREMENTS_PATH = '/sys/devices/virtual/misc/tdx_guest/measurements';
export const TDX_GUEST_DEVICE = '/dev/tdx_guest';
/**
 * Our addition: the quote generation service the ioctl shim asks, `vsock:CID:PORT` or
 * `tcp:IP:PORT`; by default the shim reads `port` from /etc/tdx-attest.conf (vsock to the host), and
 * without one uses the legacy GetQuote ioctl.
 */
export const BROKER_TDX_QGS = 'BROKER_TDX_QGS';

/** Where quotes come from: the kernel's configfs-tsm, or the ioctl shim on /dev/tdx_guest. */
export type TdxQuoteSource = 'configfs-tsm' | 'ioctl';
export const CCEL_PATH = '/sys/firmware/acpi/tables/data/CCEL';
export const DEFAULT_AAEL_PATH = '/run/attestation-agent/eventlog';
/** Environment overrides of those paths (the mock TEE serves them in a temporary folder). */
export const BROKER_TDX_CCEL = 'BROKER_TDX_CCEL';
export const BROKER_TDX_MEASUREMENTS = 'BROKER_TDX_MEASUREMENTS';
export const BROKER_TDX_GUEST_DEVICE = 'BROKER_TDX_GUEST_DEVICE';
/** Upstream's variable for the AAEL file. */
export const AAEL_PATH = 'AAEL_PATH';
/** How long an RTMR write may take to show (a kernel shows it at once; the mock a moment later). */
export const RTMR_SETTLE_MS = 5000;

export interface TdxEvidence {
  readonly cc_eventlog: string | null;
  readonly quote: string;
}

export interface TdxAttesterOptions extends PlatformOptions {
  /** configfs-tsm report root; default `BROKER_TSM_REPORT_ROOT`, else the kernel's. */
  readonly tsmReportRoot?: string;
  readonly ccelPath?: string;
  readonly aaelPath?: string;
  readonly measurementsPath?: string;
  /** Bound on waiting for configfs-tsm attributes (see configfs-tsm.ts). */
  readonly attributeWaitMs?: number;
  /** Folder of the ioctl shim; default `BROKER_ATTESTER_SHIM_DIR`, else beside the executable. */
  readonly shimDir?: string;
}

type Env = Readonly<Record<string, string | undefined>>;

function envPath(env: Env, name: string): string | undefined {
  const v = env[name];
  return v !== undefined && v.trim() !== '' ? v : undefined;
}

/** A kernel path under the platform root (tests point the root at a temporary tree). */
function underRoot(options: PlatformOptions, path: string): string {
  return join(options.root ?? '/', path);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Upstream's PCR → CC measurement register mapping for TDX; RTMR = CCMR - 1. */
export function rtmrOfPcr(pcr: number): number {
  if (!Number.isInteger(pcr) || pcr < 0) throw new AttesterError(`invalid register index ${pcr}`);
  if (pcr === 1 || pcr === 7) return 0;
  if (pcr >= 2 && pcr <= 6) return 1;
  if (pcr >= 8 && pcr <= 15) return 2;
  return 3;
}

/** Zero-pads or cuts to `len` bytes (upstream's `pad` and `resize`). */
export function fit(data: Uint8Array, len: number): Buffer {
  const out = Buffer.alloc(len);
  out.set(data.subarray(0, len));
  return out;
}

/** The TD report body of a v4/v5 quote: where the registers sit, read without verification. */
function quoteBody(quote: Uint8Array): Buffer {
  const b = Buffer.from(quote);
  if (b.length < 48) throw new EvidenceCollectionFailed('TDX quote is shorter than its header');
  const version = b.readUInt16LE(0);
  const start = version === 4 ? 48 : version === 5 ? 54 : -1;
  if (start < 0 || b.length < start + 584) {
    throw new EvidenceCollectionFailed(`TDX quote version ${version} has no readable TD report body`);
  }
  return b.subarray(start, start + 584);
}

export class TdxAttester implements Attester {
  readonly tee = 'tdx' as const;
  readonly #options: TdxAttesterOptions;
  readonly #logger: AttesterLogger | undefined;
  readonly #env: Env;
  /**
   * Present only when the measurements folder exists at start (upstream's
   * `supports_runtime_measurement`), so the agent answers NOT_SUPPORTED otherwise.
   */
  readonly extendRuntimeMeasurement?: (eventDigest: Uint8Array, registerIndex: number) => Promise<void>;

  constructor(options: TdxAttesterOptions = {}) {
    this.#options = options;
    this.#logger = options.logger;
    this.#env = options.env ?? process.env;
    // Settled once, as upstream's constructor does.
    if (existsSync(this.measurementsPath)) {
      this.extendRuntimeMeasurement = (digest, index) => this.#extend(digest, index);
    } else {
      this.#logger?.debug('sysfs for TDX measurements is absent (kernel >= 6.16 has it)');
    }
  }

  get tsmReportRoot(): string {
    return (
      this.#options.tsmReportRoot ??
      envPath(this.#env, BROKER_TSM_REPORT_ROOT) ??
      underRoot(this.#options, DEFAULT_TSM_REPORT_ROOT)
    );
  }
  get ccelPath(): string {
    return (
      this.#options.ccelPath ?? envPath(this.#env, BROKER_TDX_CCEL) ?? underRoot(this.#options, CCEL_PATH)
    );
  }
  get aaelPath(): string {
    return this.#options.aaelPath ?? envPath(this.#env, AAEL_PATH) ?? DEFAULT_AAEL_PATH;
  }
  get measurementsPath(): string {
    return (
      this.#options.measurementsPath ??
      envPath(this.#env, BROKER_TDX_MEASUREMENTS) ??
      underRoot(this.#options, TDX_MEASUREMENTS_PATH)
    );
  }

  /**
   * configfs-tsm when its root has the `tdx_guest` provider, else the ioctl
   * shim (upstream's order). Settled once per attester and logged in one line.
   */
  source(): Promise<TdxQuoteSource> {
    this.#source ??= (async () => {
      const root = this.tsmReportRoot;
      const provider = await probeTsmProvider({
        root,
        ...(this.#options.attributeWaitMs !== undefined && {
          attributeWaitMs: this.#options.attributeWaitMs,
        }),
      });
      if (provider === 'tdx_guest') {
        this.#logger?.info(`TDX Attester: quotes from configfs-tsm at ${root}`);
        return 'configfs-tsm';
      }
      const qgs = envPath(this.#env, BROKER_TDX_QGS);
      this.#logger?.info(
        `TDX Attester: quotes from ${TDX_GUEST_DEVICE} (TDX_CMD_GET_REPORT0, then ${qgs !== undefined ? `the QGS at ${qgs}` : 'the QGS of /etc/tdx-attest.conf or GetQuote'}) through ${shimPath(IOCTL_SHIMS.tdx, this.#shimLocation())}; ` +
          `configfs-tsm at ${root} ${provider === undefined ? 'is absent' : `has provider ${provider}`}`,
      );
      return 'ioctl';
    })();
    return this.#source;
  }

  #source: Promise<TdxQuoteSource> | undefined;

  #shimLocation() {
    return { ...(this.#options.shimDir !== undefined && { shimDir: this.#options.shimDir }), env: this.#env };
  }

  /** The shim: operation 1 answers the TD report, 2 the quote. */
  async #shim(op: 1 | 2, reportData: Uint8Array): Promise<Buffer> {
    const qgs = envPath(this.#env, BROKER_TDX_QGS);
    const answer = await runShim(
      IOCTL_SHIMS.tdx,
      shimRequest(op, 0, fit(reportData, TDX_REPORT_DATA_SIZE)),
      'BTDX',
      {
        ...this.#shimLocation(),
        ...(op === 2 && qgs !== undefined && { args: ['--qgs', qgs] }),
      },
    );
    return answer.part1;
  }

  async #quote(reportData: Uint8Array): Promise<Uint8Array> {
    if ((await this.source()) === 'ioctl') {
      try {
        return await this.#shim(2, reportData);
      } catch (err) {
        throw new EvidenceCollectionFailed(
          `TDX Attester: quote generation using ioctl() fallback failed: ${(err as Error).message}`,
          { cause: err },
        );
      }
    }
    try {
      const report = await requestTsmReport({
        root: this.tsmReportRoot,
        provider: 'tdx_guest',
        inblob: fit(reportData, TDX_REPORT_DATA_SIZE),
        ...(this.#options.attributeWaitMs !== undefined
          ? { attributeWaitMs: this.#options.attributeWaitMs }
          : {}),
      });
      return report.outblob;
    } catch (err) {
      throw new EvidenceCollectionFailed(
        `TDX Attester: failed to get a quote through configfs-tsm: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
  }

  /**
   * MRCONFIGID and RTMR0..3 without the measurements folder: a configfs-tsm
   * quote's TD report body, or the TD report of TDX_CMD_GET_REPORT0.
   */
  async #registers(): Promise<{ mrConfigId: Buffer; rtmrs: Buffer[] }> {
    const zero = new Uint8Array(TDX_REPORT_DATA_SIZE);
    if ((await this.source()) === 'ioctl') {
      const report = await this.#shim(1, zero);
      if (report.length !== 1024)
        throw new EvidenceCollectionFailed(`TD report is ${report.length} bytes, not 1024`);
      return {
        mrConfigId: Buffer.from(report.subarray(576, 624)),
        rtmrs: [0, 1, 2, 3].map((i) => Buffer.from(report.subarray(720 + 48 * i, 768 + 48 * i))),
      };
    }
    const body = quoteBody(await this.#quote(zero));
    return {
      mrConfigId: Buffer.from(body.subarray(184, 232)),
      rtmrs: [0, 1, 2, 3].map((i) => Buffer.from(body.subarray(328 + 48 * i, 376 + 48 * i))),
    };
  }

  async getEvidence(reportData: Uint8Array): Promise<TdxEvidence> {
    if (reportData.length > TDX_REPORT_DATA_SIZE) {
      throw new EvidenceCollectionFailed(
        `TDX Attester: Report data must be no more than ${TDX_REPORT_DATA_SIZE} bytes`,
      );
    }
    const quote = Buffer.from(await this.#quote(reportData)).toString('base64');
    let ccEventLog: string | null;
    try {
      ccEventLog = await readCcEventLog(this.ccelPath, this.aaelPath);
    } catch (err) {
      throw new EvidenceCollectionFailed(
        `TDX Attester: reading the event log failed: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    return { cc_eventlog: ccEventLog, quote };
  }

  async #measurementsAvailable(): Promise<boolean> {
    return access(this.measurementsPath).then(
      () => true,
      () => false,
    );
  }

  /** MRCONFIGID: from the measurements folder, or from a quote's or the ioctl's TD report. */
  async mrConfigId(): Promise<Buffer> {
    if (await this.#measurementsAvailable()) {
      return readFile(join(this.measurementsPath, 'mrconfigid'));
    }
    return (await this.#registers()).mrConfigId;
  }

  /** Fails closed unless MRCONFIGID is the init-data digest (zero-padded or cut to 48 bytes). */
  async bindInitData(digest: Uint8Array): Promise<void> {
    let mrConfigId: Buffer;
    try {
      mrConfigId = await this.mrConfigId();
    } catch (err) {
      throw new AttesterError(`Failed to read MRCONFIGID: ${(err as Error).message}`, { cause: err });
    }
    if (!fit(digest, TDX_REGISTER_SIZE).equals(mrConfigId))
      throw new AttesterError('Init data does not match!');
  }

  /** RTMR behind PCR `registerIndex`, from the measurements folder or a quote. */
  async getRuntimeMeasurement(registerIndex: number): Promise<Uint8Array> {
    const rtmr = rtmrOfPcr(registerIndex);
    if (await this.#measurementsAvailable()) {
      return readFile(join(this.measurementsPath, `rtmr${rtmr}:sha384`));
    }
    return (await this.#registers()).rtmrs[rtmr]!;
  }

  async #extend(eventDigest: Uint8Array, registerIndex: number): Promise<void> {
    const rtmr = rtmrOfPcr(registerIndex);
    const data = fit(eventDigest, TDX_REGISTER_SIZE);
    const path = join(this.measurementsPath, `rtmr${rtmr}:sha384`);
    this.#logger?.debug(`TDX Attester: extend RTMR${rtmr}: ${data.toString('hex')}`);
    try {
      await writeFile(path, data);
    } catch (err) {
      throw new AttesterError(`Failed to write RTMR${rtmr} via sysfs: ${(err as Error).message}`, {
        cause: err,
      });
    }
    // A read shows the register, never the data written (unless the extend is still pending).
    const deadline = Date.now() + RTMR_SETTLE_MS;
    while ((await readFile(path)).equals(data)) {
      if (Date.now() >= deadline) throw new AttesterError(`RTMR${rtmr} did not change after the extend`);
      await sleep(5);
    }
  }
}

/**
 * Upstream's detection: configfs-tsm has the `tdx_guest` provider, or `/dev/tdx_guest` exists.
 */
async function detect(ctx: PlatformContext): Promise<{ detected: boolean; reason: string }> {
  const root = envPath(ctx.env, BROKER_TSM_REPORT_ROOT) ?? DEFAULT_TSM_REPORT_ROOT;
  const provider = await probeTsmProvider({ root });
  if (provider === 'tdx_guest')
    return { detected: true, reason: `configfs-tsm at ${root} has the tdx_guest provider` };
  const device = envPath(ctx.env, BROKER_TDX_GUEST_DEVICE);
  if (device !== undefined && isAbsolute(device)) {
    const found = await access(device).then(
      () => true,
      () => false,
    );
    if (found) return { detected: true, reason: `${device} exists` };
  } else if (await ctx.exists(TDX_GUEST_DEVICE)) {
    return { detected: true, reason: `${TDX_GUEST_DEVICE} exists` };
  }
  return {
    detected: false,
    reason:
      provider === undefined
        ? `no configfs-tsm at ${root} and no tdx_guest device`
        : `configfs-tsm provider is ${provider}`,
  };
}

export const tdxModule: AttesterModule = {
  tee: 'tdx',
  detect,
  create: (options) => new TdxAttester(options),
};
