/**
 * Bare SEV-SNP guests (guest-components' `snp` attester). The report comes
 * from configfs-tsm (provider `sev_guest`) when the kernel has it: the 64-byte
 * report data goes to `inblob` at VMPL 0, `outblob` is the raw 1184-byte
 * report, and `auxblob` the host's certificate table, when the host supplied
 * one. Kernels without configfs-tsm answer the same request through
 * /dev/sev-guest's SNP_GET_EXT_REPORT ioctl, which the `broker-snp-report`
 * shim issues (upstream's path through the sev crate). The evidence is the
 * same JSON either way: `{"attestation_report": <sev crate serde>,
 * "cert_chain": [CertTableEntry] | null}`, `null` when the host has no
 * certificates.
 */
import { access } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import {
  type Attester,
  AttesterError,
  type AttesterModule,
  type Detection,
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
import { parseCertTable, type SevCertTableEntryJson } from './cert-table.js';
import { rawHostData, rawReportData, type SevAttestationReportJson, sevReportJson } from './report-json.js';

/** The sev-guest platform device: upstream's sign of an SEV-SNP guest. */
export const SEV_GUEST_SYSFS = '/sys/devices/platform/sev-guest';
/**
 * Environment variable naming the sev-guest device path instead (used as
 * is, not under the platform root), so a mock device can be detected.
 */
export const BROKER_SEV_GUEST_SYSFS = 'BROKER_SEV_GUEST_SYSFS';
/** The configfs-tsm provider of SEV guests. */
export const SNP_TSM_PROVIDER = 'sev_guest';
/** REPORT_DATA is 64 bytes; shorter report data is zero-padded. */
export const SNP_REPORT_DATA_SIZE = 64;
/** HOST_DATA is 32 bytes; the initdata digest is padded or truncated to it. */
export const SNP_HOST_DATA_SIZE = 32;
/** Upstream requests reports at VMPL 0. */
export const SNP_REQUEST_VMPL = 0;
/** The device node the ioctl shim opens. */
export const SEV_GUEST_DEVICE = '/dev/sev-guest';

/** Where a report came from: the kernel's configfs-tsm, or the ioctl shim on /dev/sev-guest. */
export type SnpReportSource = 'configfs-tsm' | 'ioctl';

/** The evidence of guest-components' snp attester. */
export interface SnpEvidence {
  readonly attestation_report: SevAttestationReportJson;
  readonly cert_chain: SevCertTableEntryJson[] | null;
}

export interface SnpAttesterOptions extends PlatformOptions {
  /** The configfs-tsm report root; by default `BROKER_TSM_REPORT_ROOT`, else /sys/kernel/config/tsm/report under the root. */
  readonly tsmRoot?: string;
  /** Bound on waiting for a mock device's attributes (configfs-tsm client option). */
  readonly attributeWaitMs?: number;
  /** Folder of the ioctl shim; default `BROKER_ATTESTER_SHIM_DIR`, else beside the executable. */
  readonly shimDir?: string;
}

function envValue(env: Readonly<Record<string, string | undefined>>, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v;
}

/** Zero-pads or truncates to `size` bytes, as upstream's `pad` does. */
export function padOrTruncate(data: Uint8Array, size: number): Buffer {
  const out = Buffer.alloc(size);
  out.set(data.subarray(0, size));
  return out;
}

export class SnpAttester implements Attester {
  readonly tee = 'snp' as const;
  readonly #options: SnpAttesterOptions;

  constructor(options: SnpAttesterOptions = {}) {
    this.#options = options;
  }

  /** The configfs-tsm report root this attester uses. */
  get tsmRoot(): string {
    const env = this.#options.env ?? process.env;
    return (
      this.#options.tsmRoot ??
      envValue(env, BROKER_TSM_REPORT_ROOT) ??
      join(this.#options.root ?? '/', DEFAULT_TSM_REPORT_ROOT)
    );
  }

  /**
   * configfs-tsm when its root has the `sev_guest` provider, else the ioctl
   * shim (upstream falls back the same way when no TSM report folder can be
   * made). Settled once per attester and logged in one line.
   */
  source(): Promise<SnpReportSource> {
    this.#source ??= (async () => {
      const root = this.tsmRoot;
      const provider = await probeTsmProvider({
        root,
        ...(this.#options.attributeWaitMs !== undefined && {
          attributeWaitMs: this.#options.attributeWaitMs,
        }),
      });
      if (provider === SNP_TSM_PROVIDER) {
        this.#options.logger?.info(`SNP Attester: evidence from configfs-tsm at ${root}`);
        return 'configfs-tsm';
      }
      this.#options.logger?.info(
        `SNP Attester: evidence from ${SEV_GUEST_DEVICE} (SNP_GET_EXT_REPORT) through ${shimPath(IOCTL_SHIMS.snp, this.#shimLocation())}; ` +
          `configfs-tsm at ${root} ${provider === undefined ? 'is absent' : `has provider ${provider}`}`,
      );
      return 'ioctl';
    })();
    return this.#source;
  }

  #source: Promise<SnpReportSource> | undefined;

  #shimLocation() {
    return {
      ...(this.#options.shimDir !== undefined && { shimDir: this.#options.shimDir }),
      env: this.#options.env ?? process.env,
    };
  }

  async #report(reportData: Buffer, withCerts: boolean): Promise<{ raw: Uint8Array; auxblob?: Uint8Array }> {
    const r =
      (await this.source()) === 'configfs-tsm'
        ? await this.#tsmReport(reportData)
        : await this.#ioctlReport(reportData, withCerts);
    // A report for other data (a stale or foreign report) must never leave the guest as ours.
    if (r.raw.length >= 0x90 && !rawReportData(r.raw).equals(reportData)) {
      throw new EvidenceCollectionFailed('the SNP report does not carry the requested report data');
    }
    return r;
  }

  async #tsmReport(reportData: Buffer): Promise<{ raw: Uint8Array; auxblob?: Uint8Array }> {
    const r = await requestTsmReport({
      root: this.tsmRoot,
      provider: SNP_TSM_PROVIDER,
      inblob: reportData,
      privlevel: SNP_REQUEST_VMPL,
      auxblob: true,
      ...(this.#options.attributeWaitMs !== undefined
        ? { attributeWaitMs: this.#options.attributeWaitMs }
        : {}),
    });
    return r.auxblob !== undefined ? { raw: r.outblob, auxblob: r.auxblob } : { raw: r.outblob };
  }

  /** SNP_GET_EXT_REPORT (with the table) or SNP_GET_REPORT through the shim; an empty table is none. */
  async #ioctlReport(
    reportData: Buffer,
    withCerts: boolean,
  ): Promise<{ raw: Uint8Array; auxblob?: Uint8Array }> {
    const answer = await runShim(
      IOCTL_SHIMS.snp,
      shimRequest(withCerts ? 1 : 0, SNP_REQUEST_VMPL, reportData),
      'BSNP',
      this.#shimLocation(),
    );
    return answer.part2.length > 0 ? { raw: answer.part1, auxblob: answer.part2 } : { raw: answer.part1 };
  }

  async getEvidence(reportData: Uint8Array): Promise<SnpEvidence> {
    if (reportData.length > SNP_REPORT_DATA_SIZE) {
      throw new EvidenceCollectionFailed(
        `SNP Attester: Report data must be no more than ${SNP_REPORT_DATA_SIZE} bytes`,
      );
    }
    const { raw, auxblob } = await this.#report(padOrTruncate(reportData, SNP_REPORT_DATA_SIZE), true);
    return {
      attestation_report: sevReportJson(raw),
      cert_chain: auxblob === undefined ? null : parseCertTable(auxblob),
    };
  }

  /**
   * HOSTDATA, set by the host at launch, must be the initdata digest padded
   * or truncated to 32 bytes; otherwise the agent must not start.
   */
  async bindInitData(digest: Uint8Array): Promise<void> {
    // Upstream's get_snp_host_data: a plain report (SNP_GET_REPORT on the ioctl path).
    const { raw } = await this.#report(Buffer.alloc(SNP_REPORT_DATA_SIZE), false);
    // Parsed in full first: a report the verifier would refuse cannot vouch for HOSTDATA either.
    sevReportJson(raw);
    if (!rawHostData(raw).equals(padOrTruncate(digest, SNP_HOST_DATA_SIZE))) {
      throw new AttesterError('HOSTDATA does not match.');
    }
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

async function detect(ctx: PlatformContext): Promise<Detection> {
  const override = envValue(ctx.env, BROKER_SEV_GUEST_SYSFS);
  if (override !== undefined) {
    if (!isAbsolute(override)) {
      return { detected: false, reason: `${BROKER_SEV_GUEST_SYSFS} must be an absolute path` };
    }
    return (await exists(override))
      ? { detected: true, reason: `${override} exists (${BROKER_SEV_GUEST_SYSFS})` }
      : { detected: false, reason: `${override} does not exist (${BROKER_SEV_GUEST_SYSFS})` };
  }
  return (await ctx.exists(SEV_GUEST_SYSFS))
    ? { detected: true, reason: `${SEV_GUEST_SYSFS} exists` }
    : { detected: false, reason: `${SEV_GUEST_SYSFS} does not exist` };
}

export const snpModule: AttesterModule = Object.freeze({
  tee: 'snp' as const,
  detect,
  create: (options: PlatformOptions) => new SnpAttester(options),
});
