// A simulated TDX guest: a configfs-tsm report root whose `tdx_guest` provider answers every
// inblob with a v4 DCAP quote from the mock's test quoting enclave (test SGX root → PCK CA → PCK
// → QE → attestation key), over a TD whose MRTD, MRCONFIGID and RTMRs the device holds. Beside it,
// in the same folder tree the guest's paths are redirected to:
//  - the ACPI CCEL table (the boot event log, replaying to RTMR0..2),
//  - the tdx_guest measurements folder (`mrconfigid`, `rtmr<n>:sha384`; writing 48 bytes to an
//    RTMR file extends it, as kernels from 6.16 do),
//  - a `/dev/tdx_guest` node for detection,
//  - the collateral a verifier needs (TCB info, QE identity, their signer, the test root).
import { createHash } from 'node:crypto';
import { type FSWatcher, watch } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type EventRecord,
  encodeCcEventLog,
  encodeTdReport,
  parseTdReport,
  rtmrsOf,
  TD_REPORT_SIZE,
  type TdReportBodyFields,
} from '@broker/verifier';
import { signTestQuote } from '@broker/verifier/testing';
import { ConfigfsTsmResponder, type TsmProviderCallback } from '../configfs-tsm/index.js';
import { MockTeeError } from '../errors.js';
import {
  loadOrCreateTdxHardware,
  MOCK_TEE_TCB_SVN,
  signMockCollateral,
  type TdxCollateralFiles,
  type TdxHardware,
} from './hardware.js';

export {
  createTdxHardware,
  loadOrCreateTdxHardware,
  MOCK_TDX_PLATFORM,
  MOCK_TEE_TCB_SVN,
  signMockCollateral,
  TDX_HARDWARE_FILES,
  type TdxCollateralFiles,
  type TdxHardware,
} from './hardware.js';
export { TD_QUOTE_PATH, TdQuoteServer, type TdQuoteServerOptions } from './imds.js';
export {
  answerQgsMessage,
  encodeQgsQuoteResponse,
  QGS_MSG,
  type QgsHook,
  QgsServer,
  type QgsServerOptions,
} from './qgs.js';

/** The provider name of the kernel's TDX guest driver. */
export const TDX_GUEST_PROVIDER = 'tdx_guest';
/** The kernel's tdx_guest provider takes exactly 64 bytes of report data. */
export const TDX_INBLOB_SIZE = 64;

/** Layout of the TDX device's state folder (paths mirror the guest's). */
export const TDX_STATE_FILES = Object.freeze({
  hardware: 'tdx-hardware',
  /** `BROKER_TSM_REPORT_ROOT`. */
  tsmReport: 'sys/kernel/config/tsm/report',
  /** `BROKER_TDX_CCEL`. */
  ccel: 'sys/firmware/acpi/tables/data/CCEL',
  /** `BROKER_TDX_MEASUREMENTS`. */
  measurements: 'sys/devices/virtual/misc/tdx_guest/measurements',
  /** `BROKER_TDX_GUEST_DEVICE`. */
  device: 'dev/tdx_guest',
  tcbInfo: 'collateral/tcb-info.json',
  qeIdentity: 'collateral/qe-identity.json',
  tcbSigning: 'collateral/tcb-signing.pem',
  pckCrl: 'collateral/pck-crl.der',
  rootCaCrl: 'collateral/root-ca-crl.der',
  sgxRoot: 'collateral/sgx-root.pem',
} as const);

/** The TD as the device reports it; members may change while it runs (`device.td`). */
export interface MockTdState {
  mrTd: Buffer;
  /** 48 bytes: the host sets it at launch (the initdata digest, zero-padded). */
  mrConfigId: Buffer;
  /** RTMR0..3. */
  rtmrs: [Buffer, Buffer, Buffer, Buffer];
  tdAttributes: Buffer;
  xfam: Buffer;
  teeTcbSvn: Buffer;
}

export interface StartMockTdxDeviceOptions {
  readonly stateDir: string;
  /** 48 bytes of MRCONFIGID; exclusive with `initDataDigest`. */
  readonly mrConfigId?: Uint8Array;
  /** The initdata digest, zero-padded to 48 bytes as MRCONFIGID (what kata's host sets). */
  readonly initDataDigest?: Uint8Array;
  readonly mrTd?: Uint8Array;
  /** The boot event log (firmware, kernel, ...); a small sample by default. Set `[]` for none. */
  readonly bootEvents?: readonly EventRecord[];
  /** Also write the CCEL ACPI table (default true). */
  readonly ccel?: boolean;
  /** Also serve the measurements folder (default true; kernels before 6.16 have none). */
  readonly measurements?: boolean;
  /** TD attributes (8 bytes); SEPT_VE_DISABLE by default. */
  readonly tdAttributes?: Uint8Array;
  /**
   * Sign each distinct TD body once and answer repeats with the same quote (ECDSA signatures are
   * randomized), so that evidence collected two ways (configfs-tsm, TD report + QGS) can be
   * compared byte for byte. Off by default.
   */
  readonly stableQuotes?: boolean;
  readonly onError?: (err: unknown, where: string) => void;
}

export interface MockTdxDevice {
  readonly stateDir: string;
  readonly tsmRoot: string;
  readonly ccelPath: string;
  readonly measurementsPath: string;
  readonly devicePath: string;
  /** Environment that points the `tdx` attester (and the attestation agent) at this device. */
  readonly env: {
    readonly BROKER_TSM_REPORT_ROOT: string;
    readonly BROKER_TDX_CCEL: string;
    readonly BROKER_TDX_MEASUREMENTS: string;
    readonly BROKER_TDX_GUEST_DEVICE: string;
  };
  readonly hardware: TdxHardware;
  /** The collateral texts, also written under `collateral/`. */
  readonly collateral: TdxCollateralFiles;
  /** What a verifier needs: `{ trustedSgxRoots, collateral }` (ExpectedData.tdx). */
  readonly verifierOptions: {
    readonly trustedSgxRoots: readonly string[];
    readonly collateral: {
      readonly tcbInfos: readonly string[];
      readonly qeIdentity: string;
      readonly signingCerts: readonly string[];
      readonly pckCrl: Buffer;
      readonly rootCaCrl: Buffer;
    };
  };
  readonly td: MockTdState;
  readonly bootEvents: readonly EventRecord[];
  readonly requests: number;
  /** A quote for `reportData` as the device would answer (tests). */
  quote(reportData: Uint8Array): Buffer;
  /** TDX_CMD_GET_REPORT0: the TD report (TDREPORT_STRUCT, MAC zero) for `reportData`, RTMR writes applied. */
  tdReport(reportData: Uint8Array): Promise<Buffer>;
  /** What the quoting enclave makes of a TD report (the QGS's work); the same quote configfs-tsm gives. */
  quoteTdReport(tdReport: Uint8Array): Buffer;
  close(): void;
}

/** MRTD unless configured: a fixed stand-in for a TD image's. */
export const DEFAULT_MRTD: Buffer = createHash('sha384').update('broker mock-tee TDX MRTD').digest();

/** A small boot log: firmware volume and config into RTMR0, a kernel and command line into RTMR1. */
export function sampleBootEvents(): EventRecord[] {
  const blob2 = (name: string) =>
    Buffer.concat([Buffer.from([name.length + 1]), Buffer.from(`${name}\0`), Buffer.alloc(16)]);
  return [
    { index: 1, type: 0x8000000a, data: blob2('Fv(mock-td-firmware)') },
    { index: 1, type: 0x4, data: Buffer.alloc(4) },
    { index: 2, type: 0x4, data: Buffer.alloc(4) },
    { index: 2, type: 0x8000000a, data: blob2('td_payload') },
    { index: 2, type: 0xa, data: Buffer.from('td_payload_info console=hvc0 rw') },
  ];
}

function exactly(bytes: Uint8Array, len: number, what: string): Buffer {
  if (bytes.length !== len)
    throw new MockTeeError('USAGE', `${what} must be ${len} bytes, got ${bytes.length}`);
  return Buffer.from(bytes);
}

/** The `tdx_guest` provider callback: 64 bytes of inblob in, a quote out. */
export function tdxTsmProvider(
  hw: TdxHardware,
  td: MockTdState,
  beforeQuote: () => Promise<void>,
  sign: (fields: TdReportBodyFields) => Buffer = (fields) => signTestQuote(hw.qe, fields),
): TsmProviderCallback {
  return async (request) => {
    if (request.inblob.length !== TDX_INBLOB_SIZE) {
      throw new MockTeeError(
        'USAGE',
        `tdx_guest needs ${TDX_INBLOB_SIZE} bytes of inblob, got ${request.inblob.length}`,
      );
    }
    await beforeQuote();
    return { outblob: sign(tdFields(td, request.inblob)) };
  };
}

/** The TD's fields as a quote body carries them, for `reportData`. */
function tdFields(td: MockTdState, reportData: Uint8Array): TdReportBodyFields {
  return {
    teeTcbSvn: td.teeTcbSvn,
    tdAttributes: td.tdAttributes,
    xfam: td.xfam,
    mrTd: td.mrTd,
    mrConfigId: td.mrConfigId,
    rtmrs: td.rtmrs,
    reportData: exactly(reportData, 64, 'report data'),
  };
}

/** Signs quotes with the device's QE; with `stable`, a body signed before gets its earlier quote. */
function quoteSigner(hw: TdxHardware, stable: boolean): (fields: TdReportBodyFields) => Buffer {
  if (!stable) return (fields) => signTestQuote(hw.qe, fields);
  const issued = new Map<string, Buffer>();
  return (fields) => {
    const key = encodeTdReport(fields).toString('hex');
    let quote = issued.get(key);
    if (quote === undefined) {
      quote = signTestQuote(hw.qe, fields);
      // Bounded: a test compares a handful of quotes.
      if (issued.size >= 256) issued.delete(issued.keys().next().value!);
      issued.set(key, quote);
    }
    return Buffer.from(quote);
  };
}

/** The fields a quoting enclave takes from a TD report (REPORTTYPE and CPUSVN stay behind). */
function fieldsOfTdReport(tdReport: Uint8Array): TdReportBodyFields {
  if (tdReport.length !== TD_REPORT_SIZE || tdReport[0] !== 0x81) {
    throw new MockTeeError('USAGE', `a TD report is ${TD_REPORT_SIZE} bytes of type 0x81`);
  }
  const { type: _type, cpuSvn: _cpuSvn, ...fields } = parseTdReport(tdReport);
  return fields;
}

async function publish(path: string, data: Uint8Array | string): Promise<void> {
  await writeFile(`${path}.tmp`, data);
  await rename(`${path}.tmp`, path);
}

const RTMR_FILE = /^rtmr([0-3]):sha384$/;

/**
 * The measurements folder: reads give the registers; a write of 48 bytes to `rtmr<n>:sha384`
 * extends RTMR n. Writes are found by comparing each file with the register it shows, both when
 * the folder changes and before every quote, so a quote never misses an extend made before it.
 */
class Measurements {
  readonly #dir: string;
  readonly #td: MockTdState;
  #watcher: FSWatcher | undefined;
  #queue: Promise<void> = Promise.resolve();

  constructor(dir: string, td: MockTdState) {
    this.#dir = dir;
    this.#td = td;
  }

  async start(onError: (err: unknown) => void): Promise<void> {
    await rm(this.#dir, { recursive: true, force: true });
    await mkdir(this.#dir, { recursive: true });
    await publish(join(this.#dir, 'mrconfigid'), this.#td.mrConfigId);
    for (let i = 0; i < 4; i++) await publish(join(this.#dir, `rtmr${i}:sha384`), this.#td.rtmrs[i]!);
    this.#watcher = watch(this.#dir, { persistent: false }, () => {
      void this.sync().catch(onError);
    });
    this.#watcher.on('error', onError);
  }

  /** Applies pending extends; serialized. */
  sync(): Promise<void> {
    this.#queue = this.#queue.then(() => this.#scan());
    return this.#queue;
  }

  async #scan(): Promise<void> {
    for (const name of await readdir(this.#dir)) {
      const m = RTMR_FILE.exec(name);
      if (m === null) continue;
      const i = Number(m[1]);
      const content = await readFile(join(this.#dir, name));
      const current = this.#td.rtmrs[i]!;
      if (content.equals(current) || content.length === 0) continue;
      if (content.length !== 48) {
        // The kernel refuses such a write; restore what a read shows.
        await publish(join(this.#dir, name), current);
        continue;
      }
      this.#td.rtmrs[i] = createHash('sha384').update(current).update(content).digest();
      await publish(join(this.#dir, name), this.#td.rtmrs[i]!);
    }
  }

  close(): void {
    this.#watcher?.close();
  }
}

/** Starts serving the TDX device under `stateDir` (the hardware root is made on first use and kept). */
export async function startMockTdxDevice(options: StartMockTdxDeviceOptions): Promise<MockTdxDevice> {
  if (options.mrConfigId !== undefined && options.initDataDigest !== undefined) {
    throw new MockTeeError('USAGE', 'give mrConfigId or initDataDigest, not both');
  }
  const { stateDir } = options;
  const onError = options.onError ?? (() => undefined);
  const hardware = await loadOrCreateTdxHardware(join(stateDir, TDX_STATE_FILES.hardware));
  const bootEvents = options.bootEvents ?? sampleBootEvents();
  let mrConfigId: Buffer = Buffer.alloc(48);
  if (options.initDataDigest !== undefined) {
    if (options.initDataDigest.length > 48)
      throw new MockTeeError('USAGE', 'an initdata digest has at most 48 bytes');
    mrConfigId.set(options.initDataDigest);
  } else if (options.mrConfigId !== undefined) {
    mrConfigId = exactly(options.mrConfigId, 48, 'MRCONFIGID');
  }
  const rtmrs = rtmrsOf(bootEvents) as [Buffer, Buffer, Buffer, Buffer];
  const td: MockTdState = {
    mrTd: exactly(options.mrTd ?? DEFAULT_MRTD, 48, 'MRTD'),
    mrConfigId,
    rtmrs,
    tdAttributes: exactly(options.tdAttributes ?? Buffer.from('0000001000000000', 'hex'), 8, 'TD attributes'),
    xfam: Buffer.from('e702060000000000', 'hex'),
    teeTcbSvn: Buffer.from(MOCK_TEE_TCB_SVN),
  };

  const path = (p: string) => join(stateDir, p);
  const ccelPath = path(TDX_STATE_FILES.ccel);
  await mkdir(join(ccelPath, '..'), { recursive: true });
  await rm(ccelPath, { force: true });
  if (options.ccel !== false) {
    // The ACPI table area is larger than the log; the rest reads as 0xFF.
    const log = encodeCcEventLog(bootEvents);
    await publish(ccelPath, Buffer.concat([log, Buffer.alloc(4096 - (log.length % 4096), 0xff)]));
  }
  const devicePath = path(TDX_STATE_FILES.device);
  await mkdir(join(devicePath, '..'), { recursive: true });
  await writeFile(devicePath, '');

  const collateral = signMockCollateral(hardware);
  await mkdir(path('collateral'), { recursive: true });
  await publish(path(TDX_STATE_FILES.tcbInfo), collateral.tcbInfo);
  await publish(path(TDX_STATE_FILES.qeIdentity), collateral.qeIdentity);
  await publish(path(TDX_STATE_FILES.tcbSigning), hardware.tcbSigningPem);
  await publish(path(TDX_STATE_FILES.sgxRoot), hardware.rootPem);
  await publish(path(TDX_STATE_FILES.pckCrl), collateral.pckCrl);
  await publish(path(TDX_STATE_FILES.rootCaCrl), collateral.rootCaCrl);

  const measurementsPath = path(TDX_STATE_FILES.measurements);
  const measurements = new Measurements(measurementsPath, td);
  if (options.measurements !== false) await measurements.start((e) => onError(e, measurementsPath));
  else await rm(measurementsPath, { recursive: true, force: true });

  const tsmRoot = path(TDX_STATE_FILES.tsmReport);
  await rm(tsmRoot, { recursive: true, force: true });
  const sign = quoteSigner(hardware, options.stableQuotes === true);
  const syncRegisters = () => (options.measurements !== false ? measurements.sync() : Promise.resolve());
  const responder = await ConfigfsTsmResponder.start({
    root: tsmRoot,
    provider: TDX_GUEST_PROVIDER,
    respond: tdxTsmProvider(hardware, td, syncRegisters, sign),
    onError,
  });
  return {
    stateDir,
    tsmRoot,
    ccelPath,
    measurementsPath,
    devicePath,
    env: {
      BROKER_TSM_REPORT_ROOT: tsmRoot,
      BROKER_TDX_CCEL: ccelPath,
      BROKER_TDX_MEASUREMENTS: measurementsPath,
      BROKER_TDX_GUEST_DEVICE: devicePath,
    },
    hardware,
    collateral,
    verifierOptions: {
      trustedSgxRoots: [hardware.rootPem],
      collateral: {
        tcbInfos: [collateral.tcbInfo],
        qeIdentity: collateral.qeIdentity,
        signingCerts: [hardware.tcbSigningPem],
        pckCrl: collateral.pckCrl,
        rootCaCrl: collateral.rootCaCrl,
      },
    },
    td,
    bootEvents,
    get requests() {
      return responder.requests;
    },
    quote: (reportData) => sign(tdFields(td, reportData)),
    tdReport: async (reportData) => {
      await syncRegisters();
      return encodeTdReport(tdFields(td, reportData));
    },
    quoteTdReport: (tdReport) => sign(fieldsOfTdReport(tdReport)),
    close: () => {
      responder.close();
      measurements.close();
    },
  };
}
