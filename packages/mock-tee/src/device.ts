// The mock TEE device: swtpm behind the paravisor interposer, provisioned like an Azure SEV-SNP CVM's
// vTPM, booted from a measurement manifest, with the VCEK chain on a loopback IMDS endpoint.
import { type KeyObject, randomBytes, randomUUID } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { makeDirectory } from '@broker/cli';
import { SwtpmControlChannel, SwtpmSocketTransport } from '@broker/tpm';
import { type Logger, pino } from 'pino';
import { MockTeeError } from './errors.js';
import type { VmConfiguration } from './hcl.js';
import { ImdsServer } from './imds.js';
import {
  DEFAULT_SNP_MEASUREMENT,
  expectedPcrValues,
  loadMeasurementManifest,
  type MeasurementManifest,
} from './manifest.js';
import { Paravisor } from './paravisor.js';
import { provisionVtpm, simulateBoot } from './provision.js';
import {
  type HardwareRoots,
  loadOrCreateHardwareRoots,
  ROOT_FILES,
  rootBundlePem,
  type TcbVersion,
} from './roots.js';
import { sampleManifest } from './sample-manifest.js';
import { TpmStreamServer } from './stream-server.js';
import { launchSwtpm, type SwtpmEndpoint, type SwtpmProcess } from './swtpm.js';

/** Layout of the state folder. */
export const STATE_FILES = Object.freeze({
  roots: 'roots',
  swtpm: 'swtpm',
  device: 'device.json',
  /** The last HCL report issued, for inspection. */
  hclReport: 'hcl-report.bin',
} as const);

export interface StartMockTeeOptions {
  /** Holds the hardware roots, the VM's identity and (unless `swtpm` is given) swtpm's state. */
  readonly stateDir: string;
  /** The pod-VM image's measurements: a manifest or a path to one; the built-in sample by default. */
  readonly manifest?: MeasurementManifest | string;
  /** Loopback address to serve on; 127.0.0.1 by default. */
  readonly host?: string;
  /** The guest's TPM port (its control channel is the next one); 0, a free port, by default. */
  readonly tpmPort?: number;
  readonly imdsPort?: number;
  /** An swtpm already running (its control channel is used to reset it); by default one is started. */
  readonly swtpm?: SwtpmEndpoint;
  readonly logger?: Logger;
  /** For new hardware roots only: ARK/ASK modulus size (AMD's 4096 by default) and the TCB. */
  readonly rootKeyBits?: number;
  readonly tcb?: TcbVersion;
}

export interface MockTee {
  readonly stateDir: string;
  /** Where the guest's TPM stack connects (swtpm's raw TCP framing). */
  readonly tpmAddress: { readonly host: string; readonly port: number };
  /** `swtpm:HOST:PORT`, the TPM address form of @broker/tpm and the attesters. */
  readonly tpm: string;
  /** tpm2-tools' TCTI for the same endpoint (`TPM2TOOLS_TCTI`). */
  readonly tcti: string;
  /** The IMDS base URL, `http://HOST:PORT` (what BROKER_AZURE_IMDS_URL takes). */
  readonly imdsUrl: string;
  readonly arkPem: string;
  readonly askPem: string;
  readonly vcekPem: string;
  /** ARK and ASK: what the KBS verifier is configured to trust for this device. */
  readonly rootsBundlePem: string;
  readonly rootsBundlePath: string;
  readonly chipId: Buffer;
  readonly tcb: TcbVersion;
  /** swtpm itself (tests cross-check with tpm2-tools there while the device is idle: it serves one client at a time). */
  readonly swtpm: SwtpmEndpoint & { readonly pid?: number };
  /** When the device runs swtpm: resolves (with why) if swtpm ends before `close()` is called. */
  readonly swtpmExited?: Promise<string>;
  readonly akPublic: KeyObject;
  readonly ekPublic: KeyObject;
  readonly vmConfiguration: VmConfiguration;
  /** The manifest of the current boot, and the SHA-256 PCR values it gives. */
  readonly manifest: MeasurementManifest;
  readonly expectedPcrs: ReadonlyMap<number, string>;
  /** The HCL report guests currently read. */
  hclReport(): Buffer;
  /** Resets the vTPM (PCRs cleared), boots again from `manifest` (the current one by default), issues a new report. */
  reboot(options?: { readonly manifest?: MeasurementManifest | string }): Promise<void>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

interface DeviceState {
  readonly vmUniqueId: string;
  readonly reportId: string;
}

async function loadOrCreateDeviceState(path: string): Promise<DeviceState> {
  try {
    const doc = JSON.parse(await readFile(path, 'utf8')) as Partial<DeviceState>;
    if (
      typeof doc.vmUniqueId === 'string' &&
      /^[0-9A-F-]{36}$/.test(doc.vmUniqueId) &&
      typeof doc.reportId === 'string' &&
      /^[0-9a-f]{64}$/.test(doc.reportId)
    ) {
      return { vmUniqueId: doc.vmUniqueId, reportId: doc.reportId };
    }
    throw new MockTeeError('STATE_INVALID', `${path} is not a device state file`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const state = { vmUniqueId: randomUUID().toUpperCase(), reportId: randomBytes(32).toString('hex') };
  await writeFile(path, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  return state;
}

async function resolveManifest(m: MeasurementManifest | string | undefined): Promise<MeasurementManifest> {
  if (m === undefined) return sampleManifest();
  return typeof m === 'string' ? loadMeasurementManifest(m) : m;
}

function formatHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** Starts the device; resolves once the guest endpoints serve. */
export async function startMockTee(options: StartMockTeeOptions): Promise<MockTee> {
  const log = options.logger ?? pino({ level: 'silent' });
  const host = options.host ?? '127.0.0.1';
  const stateDir = options.stateDir;
  await makeDirectory(stateDir, 0o700);
  let manifest = await resolveManifest(options.manifest);
  const rootsDir = join(stateDir, STATE_FILES.roots);
  const roots: HardwareRoots = await loadOrCreateHardwareRoots(rootsDir, {
    ...(options.rootKeyBits !== undefined && { rsaBits: options.rootKeyBits }),
    ...(options.tcb !== undefined && { tcb: options.tcb }),
  });
  const device = await loadOrCreateDeviceState(join(stateDir, STATE_FILES.device));
  const vmConfiguration: VmConfiguration = {
    consoleEnabled: true,
    secureBoot: true,
    tpmEnabled: true,
    vmUniqueId: device.vmUniqueId,
  };

  const cleanups: (() => Promise<void>)[] = [];
  const cleanup = async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  };
  try {
    let launched: SwtpmProcess | undefined;
    let endpoint: SwtpmEndpoint;
    if (options.swtpm !== undefined) {
      endpoint = options.swtpm;
    } else {
      launched = await launchSwtpm({ stateDir: join(stateDir, STATE_FILES.swtpm), host });
      endpoint = launched;
      const proc = launched;
      cleanups.push(() => proc.stop());
    }
    const control = new SwtpmControlChannel({ host: endpoint.host, port: endpoint.ctrlPort });
    const upstream = new SwtpmSocketTransport({ host: endpoint.host, port: endpoint.port });
    cleanups.push(() => upstream.close());
    const reportPath = join(stateDir, STATE_FILES.hclReport);
    const paravisor = new Paravisor({
      upstream,
      logger: log,
      onReport: (report) => {
        const tmp = `${reportPath}.tmp`;
        writeFile(tmp, report)
          .then(() => rename(tmp, reportPath))
          .catch((err: Error) => log.warn({ err: err.message }, 'HCL report copy not written'));
      },
    });

    let keys: Awaited<ReturnType<typeof provisionVtpm>> | undefined;
    const boot = (m: MeasurementManifest) =>
      paravisor.exclusive(async (tpm) => {
        // A power cycle: _TPM_Init then Startup(CLEAR) resets the PCRs whatever ran before.
        await control.init();
        await tpm.ensureStarted();
        keys = await provisionVtpm(tpm);
        await paravisor.afterReset(tpm);
        paravisor.setIdentity({
          roots,
          akPublic: keys.akPublic,
          ekPublic: keys.ekPublic,
          vmConfiguration,
          measurement: m.snpMeasurement ?? DEFAULT_SNP_MEASUREMENT,
          reportId: Buffer.from(device.reportId, 'hex'),
        });
        await simulateBoot(tpm, m);
        await paravisor.issueReport(tpm);
      });
    await boot(manifest);
    log.info({ imageTag: manifest.imageTag }, 'vTPM provisioned and booted');

    const server = new TpmStreamServer({
      host,
      port: options.tpmPort ?? 0,
      controlChannel: true,
      handle: (command) => paravisor.handle(command),
      logger: log,
    });
    const tpmPort = await server.start();
    cleanups.push(() => server.close());
    const imds = new ImdsServer({ host, port: options.imdsPort ?? 0, roots, logger: log });
    await imds.start();
    cleanups.push(() => imds.close());
    log.info({ tpmPort, imds: imds.url }, 'mock TEE serving');

    let closed: Promise<void> | undefined;
    const close = () => {
      closed ??= cleanup();
      return closed;
    };
    const unexpectedExit =
      launched === undefined
        ? undefined
        : launched.exited.then((why) => {
            if (closed === undefined) log.error({ why }, 'swtpm exited: the vTPM is gone');
            // Pending forever once closing: the exit was asked for.
            return closed === undefined ? why : new Promise<string>(() => undefined);
          });
    const currentKeys = () => {
      if (keys === undefined) throw new MockTeeError('PROVISIONING_FAILED', 'the vTPM is not provisioned');
      return keys;
    };
    return {
      stateDir,
      tpmAddress: { host, port: tpmPort },
      tpm: `swtpm:${formatHost(host)}:${tpmPort}`,
      tcti: `swtpm:host=${host},port=${tpmPort}`,
      imdsUrl: imds.url,
      arkPem: roots.arkPem,
      askPem: roots.askPem,
      vcekPem: roots.vcekPem,
      rootsBundlePem: rootBundlePem(roots),
      rootsBundlePath: join(rootsDir, ROOT_FILES.bundle),
      chipId: roots.chipId,
      tcb: roots.tcb,
      swtpm: {
        host: endpoint.host,
        port: endpoint.port,
        ctrlPort: endpoint.ctrlPort,
        ...(launched !== undefined && { pid: launched.pid }),
      },
      ...(unexpectedExit !== undefined && { swtpmExited: unexpectedExit }),
      get akPublic() {
        return currentKeys().akPublic;
      },
      get ekPublic() {
        return currentKeys().ekPublic;
      },
      vmConfiguration,
      get manifest() {
        return manifest;
      },
      get expectedPcrs() {
        return expectedPcrValues(manifest);
      },
      hclReport() {
        const r = paravisor.report;
        if (r === undefined) throw new MockTeeError('REPORT_INVALID', 'no HCL report issued yet');
        return Buffer.from(r);
      },
      async reboot(opts = {}) {
        const next = opts.manifest === undefined ? manifest : await resolveManifest(opts.manifest);
        await boot(next);
        manifest = next;
        log.info({ imageTag: next.imageTag }, 'vTPM rebooted');
      },
      close,
      [Symbol.asyncDispose]: close,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
