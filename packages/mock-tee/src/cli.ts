// `mock-tee`: runs the mock Azure SEV-SNP vTPM device, or prints what a KBS or a reference-value
// tool needs from it.

import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type DestinationStream, type LevelWithSilent, pino } from 'pino';
import { type MockTee, STATE_FILES, startMockTee } from './device.js';
import { MockTeeError } from './errors.js';
import { expectedPcrValues, loadMeasurementManifest, type MeasurementManifest } from './manifest.js';
import { loadOrCreateHardwareRoots, ROOT_FILES } from './roots.js';
import { sampleManifest } from './sample-manifest.js';

export const USAGE = `usage:
  mock-tee start --state DIR [--manifest FILE] [--tpm-port P] [--imds-port Q] [--host ADDR] [--log-level LEVEL]
      Runs the device in the foreground until SIGTERM/SIGINT: swtpm behind the paravisor interposer
      (guest TPM at P, its control channel at P+1), IMDS at Q. Prints the guest's settings as
      KEY=VALUE lines once it serves. Without --manifest, boots the built-in sample pod-VM image.
  mock-tee roots --state DIR
      Prints the path of the PEM bundle (test ARK and ASK) the KBS must be configured to trust;
      creates the device's hardware roots first if the state folder has none.
  mock-tee expected-pcrs [--manifest FILE]
      Prints the SHA-256 PCR values a boot from the manifest gives, as JSON.
`;

export interface MockTeeMainOptions {
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
  /** Aborting it stops `start` as a signal would. */
  readonly signal?: AbortSignal;
  /** Called once `start` serves. */
  readonly onReady?: (device: MockTee) => void;
  /** Where `start` writes its JSON log lines; stderr by default. */
  readonly logDestination?: DestinationStream;
  /** ARK/ASK modulus for new roots (tests); AMD's 4096 by default. */
  readonly rootKeyBits?: number;
}

/** The attesters' settings for the TPM and IMDS addresses (@broker/attester reads these; a test keeps them equal). */
export const GUEST_ENV = Object.freeze({ tpm: 'BROKER_TPM', imdsUrl: 'BROKER_AZURE_IMDS_URL' } as const);

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const LOG_LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

function port(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65534)
    throw new MockTeeError('USAGE', `${flag} must be a port number`);
  return Number(text);
}

/** A value as a POSIX shell word: bare when safe, else single-quoted. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

async function manifestFrom(path: string | undefined): Promise<MeasurementManifest> {
  return path === undefined ? sampleManifest() : loadMeasurementManifest(path);
}

function watchForStop(signal: AbortSignal | undefined): { stopped: Promise<string>; cancel(): void } {
  let resolveStop: (why: string) => void = () => undefined;
  const stopped = new Promise<string>((r) => {
    resolveStop = r;
  });
  const handlers = STOP_SIGNALS.map((name) => {
    const h = () => resolveStop(name);
    process.on(name, h);
    return [name, h] as const;
  });
  const onAbort = () => resolveStop('abort');
  if (signal?.aborted) resolveStop('abort');
  signal?.addEventListener('abort', onAbort, { once: true });
  const cancel = () => {
    for (const [name, h] of handlers) process.off(name, h);
    signal?.removeEventListener('abort', onAbort);
  };
  void stopped.then(cancel);
  return { stopped, cancel };
}

/** Runs the command line; resolves with the exit status (0, 1 failure, 2 usage). */
export async function mockTeeMain(argv: string[], options: MockTeeMainOptions = {}): Promise<number> {
  const out = options.stdout ?? ((t: string) => process.stdout.write(t));
  const err = options.stderr ?? ((t: string) => process.stderr.write(t));
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    (command === undefined ? err : out)(USAGE);
    return command === undefined ? 2 : 0;
  }
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        state: { type: 'string' },
        manifest: { type: 'string' },
        'tpm-port': { type: 'string' },
        'imds-port': { type: 'string' },
        host: { type: 'string' },
        'log-level': { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    err(`mock-tee: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const str = (k: string) => values[k] as string | undefined;
  try {
    switch (command) {
      case 'start':
        return await start(str, options, out, err);
      case 'roots': {
        const state = str('state');
        if (state === undefined) throw new MockTeeError('USAGE', 'roots needs --state DIR');
        const dir = join(state, STATE_FILES.roots);
        await loadOrCreateHardwareRoots(
          dir,
          options.rootKeyBits !== undefined ? { rsaBits: options.rootKeyBits } : {},
        );
        out(`${join(dir, ROOT_FILES.bundle)}\n`);
        return 0;
      }
      case 'expected-pcrs': {
        const manifest = await manifestFrom(str('manifest'));
        const sha256: Record<string, string> = {};
        for (const [pcr, value] of expectedPcrValues(manifest))
          sha256[`pcr${String(pcr).padStart(2, '0')}`] = value;
        out(`${JSON.stringify({ image_tag: manifest.imageTag, measurements: { sha256 } }, null, 2)}\n`);
        return 0;
      }
      default:
        err(`mock-tee: unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
        return 2;
    }
  } catch (e) {
    if (e instanceof MockTeeError && e.code === 'USAGE') {
      err(`mock-tee: ${e.message}\n\n${USAGE}`);
      return 2;
    }
    err(`mock-tee: ${(e as Error).message}\n`);
    return 1;
  }
}

async function start(
  str: (k: string) => string | undefined,
  options: MockTeeMainOptions,
  out: (t: string) => void,
  err: (t: string) => void,
): Promise<number> {
  const state = str('state');
  if (state === undefined) throw new MockTeeError('USAGE', 'start needs --state DIR');
  const level = str('log-level') ?? 'info';
  if (!LOG_LEVELS.has(level))
    throw new MockTeeError('USAGE', `--log-level must be one of ${[...LOG_LEVELS].join(', ')}`);
  const tpmPort = port(str('tpm-port'), '--tpm-port');
  const imdsPort = port(str('imds-port'), '--imds-port');
  const manifest = await manifestFrom(str('manifest'));
  const logger = pino(
    { name: 'mock-tee', level: level as LevelWithSilent },
    options.logDestination ?? pino.destination({ fd: 2, sync: true }),
  );
  // Handlers first: a signal during start-up must not kill the process and orphan swtpm.
  const stop = watchForStop(options.signal);
  let device: MockTee;
  try {
    device = await startMockTee({
      stateDir: state,
      manifest,
      logger,
      ...(str('host') !== undefined && { host: str('host') }),
      ...(tpmPort !== undefined && { tpmPort }),
      ...(imdsPort !== undefined && { imdsPort }),
      ...(options.rootKeyBits !== undefined && { rootKeyBits: options.rootKeyBits }),
    });
  } catch (e) {
    stop.cancel();
    err(`mock-tee: the device did not start: ${(e as Error).message}\n`);
    return 1;
  }
  const settings: [string, string][] = [
    [GUEST_ENV.tpm, device.tpm],
    [GUEST_ENV.imdsUrl, device.imdsUrl],
    ['TPM2TOOLS_TCTI', device.tcti],
    ['MOCK_TEE_ROOTS', device.rootsBundlePath],
    ['MOCK_TEE_IMAGE_TAG', device.manifest.imageTag],
  ];
  out(settings.map(([k, v]) => `${k}=${shellWord(v)}\n`).join(''));
  options.onReady?.(device);
  const swtpmGone = device.swtpmExited?.then((w) => `swtpm exited (${w})`);
  const why = await Promise.race([stop.stopped, ...(swtpmGone !== undefined ? [swtpmGone] : [])]);
  stop.cancel();
  logger.info({ reason: why }, 'stopping');
  await device.close();
  logger.info('mock TEE stopped');
  logger.flush();
  if (why.startsWith('swtpm exited')) {
    err(`mock-tee: ${why}\n`);
    return 1;
  }
  return 0;
}
