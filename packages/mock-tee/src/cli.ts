// `mock-tee`: runs the mock Azure SEV-SNP vTPM device, or prints what a KBS or a reference-value
// tool needs from it.

import { join } from 'node:path';
import {
  createLogger,
  LOG_FORMAT_OPTION,
  logFlags,
  type OptionValues,
  runCommand,
  UsageError,
} from '@broker/cli';
import { ccaMain } from './cca/command.js';
import { type MockTee, STATE_FILES, startMockTee } from './device.js';
import { MockTeeError } from './errors.js';
import { GPU_TOOL_COMMAND, runGpuTool } from './gpu/client.js';
import { gpuMain } from './gpu/command.js';
import { expectedPcrValues, loadMeasurementManifest, type MeasurementManifest } from './manifest.js';
import { loadOrCreateHardwareRoots, ROOT_FILES } from './roots.js';
import { sampleManifest } from './sample-manifest.js';

const VERSION = '0.1.0';

export const USAGE = `Usage: mock-tee <COMMAND> [OPTIONS]

Mock TEE devices for tests: an Azure-style SEV-SNP vTPM on swtpm with its IMDS, a confidential
NVIDIA Hopper GPU, an Arm CCA realm.

Commands:
  start          Run the device in the foreground until SIGTERM/SIGINT
  gpu            Run the simulated Hopper GPU in the foreground
  cca            Run the simulated CCA realm in the foreground
  roots          Print the path of the PEM bundle (test ARK and ASK) the KBS must trust
  expected-pcrs  Print the SHA-256 PCR values a boot from the manifest gives, as JSON

Options:
  -h, --help     Print help (each command has its own: mock-tee start --help)
  -V, --version  Print version
`;

const START = {
  name: 'mock-tee start',
  version: VERSION,
  help: `Usage: mock-tee start --state <DIR> [OPTIONS]

Runs the device in the foreground until SIGTERM/SIGINT: swtpm behind the paravisor interposer
(guest TPM at P, its control channel at P+1), IMDS at Q. Prints the guest's settings as
KEY=VALUE lines once it serves. Without --manifest, boots the built-in sample pod-VM image.
Log lines go to stderr: JSON, or text on a terminal.

Options:
      --state <DIR>          State folder (hardware roots, TPM state)
      --manifest <FILE>      Measurement manifest of the image to boot
      --tpm-port <P>         Guest TPM port (its control channel is P+1)
      --imds-port <Q>        IMDS port
      --host <ADDR>          Address to listen on
      --log-level <LEVEL>    off, error, warn, info, debug or trace [default: RUST_LOG, else info]
      --log-format <FORMAT>  json (default) or text (default when stderr is a terminal)
  -h, --help                 Print help
`,
  options: {
    state: { type: 'string' },
    manifest: { type: 'string' },
    'tpm-port': { type: 'string' },
    'imds-port': { type: 'string' },
    host: { type: 'string' },
    'log-level': { type: 'string' },
    ...LOG_FORMAT_OPTION,
  },
  exitStatus: [
    [0, 'stopped by SIGTERM, SIGINT or SIGHUP'],
    [1, 'the device did not start (state folder, swtpm, ports), or swtpm exited'],
  ],
} as const;

const ROOTS = {
  name: 'mock-tee roots',
  version: VERSION,
  help: `Usage: mock-tee roots --state <DIR>

Prints the path of the PEM bundle (test ARK and ASK) the KBS must be configured to trust;
creates the device's hardware roots first if the state folder has none.

Options:
      --state <DIR>  State folder
  -h, --help         Print help
`,
  options: { state: { type: 'string' } },
  exitStatus: [[1, 'the state folder cannot be created or read']],
} as const;

const EXPECTED_PCRS = {
  name: 'mock-tee expected-pcrs',
  version: VERSION,
  help: `Usage: mock-tee expected-pcrs [--manifest <FILE>]

Prints the SHA-256 PCR values a boot from the manifest (default: the built-in sample) gives, as JSON.

Options:
      --manifest <FILE>  Measurement manifest
  -h, --help             Print help
`,
  options: { manifest: { type: 'string' } },
} as const;

const TOP = {
  name: 'mock-tee',
  version: VERSION,
  help: USAGE,
  subcommands: ['start', 'gpu', 'cca', 'roots', 'expected-pcrs'],
} as const;

export interface MockTeeMainOptions {
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
  /** Aborting it stops `start` as a signal would. */
  readonly signal?: AbortSignal;
  /** Called once `start` serves. */
  readonly onReady?: (device: MockTee) => void;
  /** Where `start` writes its JSON log lines; stderr by default. */
  readonly logDestination?: { write(line: string): void };
  /** ARK/ASK modulus for new roots (tests); AMD's 4096 by default. */
  readonly rootKeyBits?: number;
}

/** The attesters' settings for the TPM and IMDS addresses (@broker/attester reads these; a test keeps them equal). */
export const GUEST_ENV = Object.freeze({ tpm: 'BROKER_TPM', imdsUrl: 'BROKER_AZURE_IMDS_URL' } as const);

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

function port(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65534) throw new UsageError(`${flag} must be a port number`);
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
export function mockTeeMain(argv: string[], options: MockTeeMainOptions = {}): Promise<number> {
  const out = options.stdout ?? ((t: string) => void process.stdout.write(t));
  const err = options.stderr ?? ((t: string) => void process.stderr.write(t));
  const io = { out, err };
  // The GPU's stand-ins in a single executable; not a command for people, so not in the help.
  if (argv[0] === GPU_TOOL_COMMAND) return runGpuTool(argv.slice(1), io);
  const foreground = { ...io, watch: () => watchForStop(options.signal), word: shellWord };
  return runCommand(
    TOP,
    argv,
    async ({ command, rest }) => {
      if (command === 'start')
        return runCommand(START, rest, ({ values }) => start(values, options, out), io);
      if (command === 'gpu') return gpuMain(rest, VERSION, foreground);
      if (command === 'cca') return ccaMain(rest, VERSION, foreground);
      if (command === 'roots') {
        return runCommand(
          ROOTS,
          rest,
          async ({ values }) => {
            if (values.state === undefined) throw new UsageError("missing option '--state'");
            const dir = join(values.state, STATE_FILES.roots);
            await loadOrCreateHardwareRoots(
              dir,
              options.rootKeyBits !== undefined ? { rsaBits: options.rootKeyBits } : {},
            );
            out(`${join(dir, ROOT_FILES.bundle)}\n`);
            return 0;
          },
          io,
        );
      }
      return runCommand(
        EXPECTED_PCRS,
        rest,
        async ({ values }) => {
          const manifest = await manifestFrom(values.manifest);
          const sha256: Record<string, string> = {};
          for (const [pcr, value] of expectedPcrValues(manifest))
            sha256[`pcr${String(pcr).padStart(2, '0')}`] = value;
          out(`${JSON.stringify({ image_tag: manifest.imageTag, measurements: { sha256 } }, null, 2)}\n`);
          return 0;
        },
        io,
      );
    },
    io,
  );
}

async function start(
  values: OptionValues<typeof START.options>,
  options: MockTeeMainOptions,
  out: (t: string) => void,
): Promise<number> {
  const state = values.state;
  if (state === undefined) throw new UsageError("missing option '--state'");
  const { level, format } = logFlags(values, ['mock_tee']);
  const tpmPort = port(values['tpm-port'], '--tpm-port');
  const imdsPort = port(values['imds-port'], '--imds-port');
  const manifest = await manifestFrom(values.manifest);
  // stdout carries the settings; the log goes to stderr.
  const logger = createLogger({
    name: 'mock-tee',
    fd: 2,
    ...(level !== undefined && { env: { RUST_LOG: level } }),
    ...(format !== undefined && { format }),
    ...(options.logDestination !== undefined && { destination: options.logDestination }),
  });
  // Handlers first: a signal during start-up must not kill the process and orphan swtpm.
  const stop = watchForStop(options.signal);
  let device: MockTee;
  try {
    device = await startMockTee({
      stateDir: state,
      manifest,
      logger,
      ...(values.host !== undefined && { host: values.host }),
      ...(tpmPort !== undefined && { tpmPort }),
      ...(imdsPort !== undefined && { imdsPort }),
      ...(options.rootKeyBits !== undefined && { rootKeyBits: options.rootKeyBits }),
    });
  } catch (e) {
    stop.cancel();
    throw new MockTeeError('START_FAILED', `the device did not start: ${(e as Error).message}`, { cause: e });
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
  if (why.startsWith('swtpm exited')) throw new MockTeeError('SWTPM_FAILED', why);
  return 0;
}
