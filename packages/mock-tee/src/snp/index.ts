// A simulated bare SEV-SNP guest device: a configfs-tsm report root whose `sev_guest` provider
// answers every inblob with an ATTESTATION_REPORT signed by the mock's test VCEK (ARK → ASK → VCEK
// generated and kept in the state folder), and the host's certificate table as `auxblob`. Beside it:
// the sev-guest sysfs node the attester's detection looks for, and an offline VCEK store laid out
// as trustee's OfflineStore, so a verifier can find the VCEK without the table.
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tcbFilePrefix } from '@broker/verifier';
import { ConfigfsTsmResponder, type TsmProviderCallback, type TsmRequest } from '../configfs-tsm/index.js';
import { MockTeeError } from '../errors.js';
import {
  type HardwareRoots,
  loadOrCreateHardwareRoots,
  ROOT_FILES,
  rootBundlePem,
  type TcbVersion,
} from '../roots.js';
import { buildSnpReport } from '../snp-report.js';
import { type CertTableInput, encodeCertTable } from './cert-table.js';

export { CERT_TABLE_GUIDS, type CertTableInput, encodeCertTable } from './cert-table.js';

/** The provider name of the kernel's SEV guest driver. */
export const SEV_GUEST_PROVIDER = 'sev_guest';
/** GUEST_POLICY of a plain SNP guest: ABI 0.0, SMT allowed, the must-be-one bit 17. */
export const BARE_SNP_GUEST_POLICY = 0x30000n;
/** The kernel's sev_guest provider takes exactly 64 bytes of report data. */
export const SNP_INBLOB_SIZE = 64;

/** Layout of the SNP device's state folder. */
export const SNP_STATE_FILES = Object.freeze({
  roots: 'roots',
  /** The configfs-tsm report root (`BROKER_TSM_REPORT_ROOT`). */
  tsmReport: 'sys/kernel/config/tsm/report',
  /** The sev-guest platform device node (`BROKER_SEV_GUEST_SYSFS`). */
  sevGuest: 'sys/devices/platform/sev-guest',
  /** trustee's OfflineStore folder: `vcek/<hwid>/<tcb>_vcek.der` and `vcek/<hwid>/vcek.der`. */
  kdsStore: 'kds-store',
} as const);

/** What goes in the certificate table: the VCEK only (as most hosts), VCEK, ASK and ARK, or none. */
export type SnpCertTableContent = 'vcek' | 'chain' | 'none';

/** How the device answers; every member can be changed while it runs (`device.config`). */
export interface SnpReportConfig {
  /** 48 bytes: the launch measurement; a fixed test value by default. */
  measurement: Uint8Array;
  /** 32 bytes: HOST_DATA, set by the host at launch (the initdata digest, padded). Zero by default. */
  hostData: Uint8Array;
  policy: bigint;
  certTable: SnpCertTableContent;
}

export interface StartMockSnpDeviceOptions {
  /** Holds the roots, the configfs-tsm tree, the sysfs node and the offline VCEK store. */
  readonly stateDir: string;
  readonly measurement?: Uint8Array;
  /** 32 bytes of HOST_DATA; exclusive with `initDataDigest`. */
  readonly hostData?: Uint8Array;
  /** The initdata digest, zero-padded or truncated to 32 bytes as HOST_DATA (what kata's host sets). */
  readonly initDataDigest?: Uint8Array;
  readonly policy?: bigint;
  readonly certTable?: SnpCertTableContent;
  /** For new roots only: ARK/ASK modulus size (AMD's 4096 by default), TCB and chip ID. */
  readonly rootKeyBits?: number;
  readonly tcb?: TcbVersion;
  readonly chipId?: Uint8Array;
  /**
   * Sign each distinct report once and answer repeats with the same bytes (ECDSA signatures are
   * randomized), so that evidence collected two ways (configfs-tsm, /dev/sev-guest) can be
   * compared byte for byte. Off by default.
   */
  readonly stableReports?: boolean;
  /** Called when a request cannot be answered (the guest then waits for an outblob in vain). */
  readonly onError?: (err: unknown, dir: string) => void;
}

export interface MockSnpDevice {
  readonly stateDir: string;
  /** The configfs-tsm report root the attester writes to. */
  readonly tsmRoot: string;
  /** The sev-guest node that makes the attester detect SNP. */
  readonly sevGuestPath: string;
  /** Environment that points the `snp` attester (and the attestation agent) at this device. */
  readonly env: { readonly BROKER_TSM_REPORT_ROOT: string; readonly BROKER_SEV_GUEST_SYSFS: string };
  readonly roots: HardwareRoots;
  /** ARK and ASK: what a verifier must be configured to trust for this device. */
  readonly rootsBundlePem: string;
  readonly rootsBundlePath: string;
  /** The offline VCEK store (trustee's OfflineStore `path`). */
  readonly vcekStorePath: string;
  readonly config: SnpReportConfig;
  /** Reports issued so far. */
  readonly requests: number;
  /** A report for `reportData` at `vmpl`, as the device would answer (tests). */
  report(reportData: Uint8Array, vmpl?: number): Buffer;
  /** The certificate table the device hands out, as configured. */
  certTable(): Buffer;
  close(): void;
}

/** The launch measurement reported unless configured: a fixed stand-in for a pod-VM image's. */
export const DEFAULT_SNP_LAUNCH_MEASUREMENT: Buffer = createHash('sha384')
  .update('broker mock-tee bare SNP launch measurement')
  .digest();

function exactly(bytes: Uint8Array, len: number, what: string): Buffer {
  if (bytes.length !== len)
    throw new MockTeeError('USAGE', `${what} must be ${len} bytes, got ${bytes.length}`);
  return Buffer.from(bytes);
}

/** Zero-pads or truncates the initdata digest to HOST_DATA's 32 bytes. */
export function hostDataForInitData(digest: Uint8Array): Buffer {
  const out = Buffer.alloc(32);
  out.set(digest.subarray(0, 32));
  return out;
}

/**
 * The `sev_guest` provider callback: refuses what the kernel refuses (inblob other than 64 bytes,
 * VMPL above 3), otherwise signs a report for the inblob at the requested VMPL.
 */
export function snpTsmProvider(
  roots: HardwareRoots,
  config: SnpReportConfig,
  reportId: Uint8Array,
  issue: (reportData: Uint8Array, vmpl: number) => Buffer = (reportData, vmpl) =>
    issueReport(roots, config, reportId, reportData, vmpl),
): TsmProviderCallback {
  return (request: TsmRequest) => {
    if (request.inblob.length !== SNP_INBLOB_SIZE) {
      throw new MockTeeError(
        'USAGE',
        `sev_guest needs ${SNP_INBLOB_SIZE} bytes of inblob, got ${request.inblob.length}`,
      );
    }
    return {
      outblob: issue(request.inblob, request.privlevel ?? 0),
      auxblob: certTableFor(roots, config.certTable),
    };
  };
}

function issueReport(
  roots: HardwareRoots,
  config: SnpReportConfig,
  reportId: Uint8Array,
  reportData: Uint8Array,
  vmpl: number,
): Buffer {
  return buildSnpReport(
    {
      reportData: exactly(reportData, 64, 'report data'),
      measurement: exactly(config.measurement, 48, 'measurement'),
      hostData: exactly(config.hostData, 32, 'host data'),
      chipId: roots.chipId,
      tcb: roots.tcb,
      reportId,
      policy: config.policy,
      vmpl,
      version: 3,
    },
    roots.vcekPrivateKey,
  );
}

/** Issues reports; with `stable`, a request seen before (same data, VMPL and config) gets its earlier report. */
function reportIssuer(
  roots: HardwareRoots,
  config: SnpReportConfig,
  reportId: Uint8Array,
  stable: boolean,
): (reportData: Uint8Array, vmpl: number) => Buffer {
  if (!stable) return (reportData, vmpl) => issueReport(roots, config, reportId, reportData, vmpl);
  const issued = new Map<string, Buffer>();
  return (reportData, vmpl) => {
    const key = [reportData, config.measurement, config.hostData]
      .map((b) => Buffer.from(b).toString('hex'))
      .concat([String(vmpl), config.policy.toString(16)])
      .join(':');
    let report = issued.get(key);
    if (report === undefined) {
      report = issueReport(roots, config, reportId, reportData, vmpl);
      // Bounded: a test compares a handful of reports.
      if (issued.size >= 256) issued.delete(issued.keys().next().value!);
      issued.set(key, report);
    }
    return Buffer.from(report);
  };
}

function pemToDer(pem: string): Buffer {
  const m = /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+)-----END CERTIFICATE-----/.exec(pem);
  if (m === null) throw new MockTeeError('STATE_INVALID', 'stored root is not a PEM certificate');
  return Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64');
}

function certTableFor(roots: HardwareRoots, content: SnpCertTableContent): Buffer {
  const entries: CertTableInput[] =
    content === 'none'
      ? []
      : content === 'vcek'
        ? [{ type: 'VCEK', data: roots.vcekDer }]
        : [
            { type: 'VCEK', data: roots.vcekDer },
            { type: 'ASK', data: pemToDer(roots.askPem) },
            { type: 'ARK', data: pemToDer(roots.arkPem) },
          ];
  return encodeCertTable(entries);
}

/** Starts serving the SNP device under `stateDir` (roots are made on first use and kept). */
export async function startMockSnpDevice(options: StartMockSnpDeviceOptions): Promise<MockSnpDevice> {
  if (options.hostData !== undefined && options.initDataDigest !== undefined) {
    throw new MockTeeError('USAGE', 'give hostData or initDataDigest, not both');
  }
  const { stateDir } = options;
  const rootsDir = join(stateDir, SNP_STATE_FILES.roots);
  const roots = await loadOrCreateHardwareRoots(rootsDir, {
    ...(options.rootKeyBits !== undefined && { rsaBits: options.rootKeyBits }),
    ...(options.tcb !== undefined && { tcb: options.tcb }),
    ...(options.chipId !== undefined && { chipId: options.chipId }),
  });
  const config: SnpReportConfig = {
    measurement: exactly(options.measurement ?? DEFAULT_SNP_LAUNCH_MEASUREMENT, 48, 'measurement'),
    hostData:
      options.initDataDigest !== undefined
        ? hostDataForInitData(options.initDataDigest)
        : exactly(options.hostData ?? Buffer.alloc(32), 32, 'host data'),
    policy: options.policy ?? BARE_SNP_GUEST_POLICY,
    certTable: options.certTable ?? 'vcek',
  };

  const sevGuestPath = join(stateDir, SNP_STATE_FILES.sevGuest);
  await mkdir(sevGuestPath, { recursive: true });
  const vcekStorePath = join(stateDir, SNP_STATE_FILES.kdsStore);
  const chipDir = join(vcekStorePath, 'vcek', roots.chipId.toString('hex'));
  await mkdir(chipDir, { recursive: true });
  await writeFile(join(chipDir, `${tcbFilePrefix(roots.tcb)}_vcek.der`), roots.vcekDer);
  await writeFile(join(chipDir, 'vcek.der'), roots.vcekDer);

  const tsmRoot = join(stateDir, SNP_STATE_FILES.tsmReport);
  // Folders left by an earlier run would be served again; start from an empty root.
  await rm(tsmRoot, { recursive: true, force: true });
  const reportId = randomBytes(32);
  const issue = reportIssuer(roots, config, reportId, options.stableReports === true);
  const responder = await ConfigfsTsmResponder.start({
    root: tsmRoot,
    provider: SEV_GUEST_PROVIDER,
    respond: snpTsmProvider(roots, config, reportId, issue),
    // The sev_guest provider's further read-only attribute; VMPL 0 is the lowest the guest may ask.
    attributes: { privlevel_floor: '0\n' },
    ...(options.onError !== undefined && { onError: options.onError }),
  });
  const bundlePem = rootBundlePem(roots);
  return {
    stateDir,
    tsmRoot,
    sevGuestPath,
    env: { BROKER_TSM_REPORT_ROOT: tsmRoot, BROKER_SEV_GUEST_SYSFS: sevGuestPath },
    roots,
    rootsBundlePem: bundlePem,
    rootsBundlePath: join(rootsDir, ROOT_FILES.bundle),
    vcekStorePath,
    config,
    get requests() {
      return responder.requests;
    },
    report: (reportData, vmpl = 0) => issue(reportData, vmpl),
    certTable: () => certTableFor(roots, config.certTable),
    close: () => responder.close(),
  };
}
