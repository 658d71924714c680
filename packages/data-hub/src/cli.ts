/**
 * `confidential-data-hub [-c <config>]`, upstream's `ttrpc-cdh` command
 * line: `-c` only (no long form), plus `-h/--help` and `-V/--version`.
 * Without `-c` the KBC comes from `AA_KBC_PARAMS` or the kernel command line.
 *
 * Only what listening needs is loaded before the socket opens; the KBS
 * client, the agent client and the resource code load on first use.
 */
import type { Logger } from 'pino';
import { CdhConfigError, type ConfigEnvironment, loadCdhConfig, parseLogLevel } from './config.js';
import { DataHubError } from './errors.js';
import type { RunningDataHub, StartDataHubOptions } from './server.js';

export const CDH_VERSION = '0.1.0';

const USAGE = `Usage: confidential-data-hub [OPTIONS]

Confidential Data Hub (ttRPC): resources, sealed secrets and image pulls for the guest.

Options:
  -c <CONFIG>      Path to the config file (\`-c /etc/confidential-data-hub.conf\`); TOML, or JSON for .json
  -h, --help       Print help
  -V, --version    Print version
`;

type Parsed =
  | { kind: 'run'; config: string | undefined }
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'error'; message: string };

/** Parses the arguments the way clap does for `#[arg(short)] config: Option<String>`. */
export function parseArgs(argv: readonly string[]): Parsed {
  let config: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '-h' || a === '--help') return { kind: 'help' };
    if (a === '-V' || a === '--version') return { kind: 'version' };
    let value: string | undefined;
    if (a === '-c') {
      value = argv[i + 1];
      if (value === undefined) {
        return { kind: 'error', message: "a value is required for '-c <CONFIG>' but none was supplied" };
      }
      i++;
    } else if (a.startsWith('-c')) {
      value = a.slice(a.startsWith('-c=') ? 3 : 2);
    } else {
      return { kind: 'error', message: `unexpected argument '${a}' found` };
    }
    if (config !== undefined) {
      return { kind: 'error', message: "the argument '-c <CONFIG>' cannot be used multiple times" };
    }
    config = value;
  }
  return { kind: 'run', config };
}

/** Test hooks; the executable passes none. */
export interface CliRuntime {
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Kernel command line text instead of `/proc/cmdline`. */
  readonly kernelCmdline?: string;
  /** Stops the hub as SIGTERM would. */
  readonly stop?: AbortSignal;
  /** Called once the socket listens. */
  readonly onListening?: (hub: RunningDataHub) => void;
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
  /** Log destination (default stdout, as upstream's tracing subscriber). */
  readonly logStream?: { write(line: string): void };
  /** Extra options for the hub (credential root, timeouts). */
  readonly hubOptions?: Omit<StartDataHubOptions, 'logger'>;
}

const SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

/** Resolves on the first stop signal; `cancel` removes the handlers. */
function stopSignal(stop: AbortSignal | undefined): { stopped: Promise<string>; cancel(): void } {
  const handlers = new Map<NodeJS.Signals, () => void>();
  let resolveStop: (why: string) => void = () => {};
  const stopped = new Promise<string>((resolve) => {
    resolveStop = resolve;
  });
  const onAbort = () => finish('stop requested');
  const cancel = () => {
    for (const [sig, h] of handlers) process.off(sig, h);
    handlers.clear();
    stop?.removeEventListener('abort', onAbort);
  };
  const finish = (why: string) => {
    cancel();
    resolveStop(why);
  };
  for (const sig of SIGNALS) {
    const h = () => finish(sig);
    handlers.set(sig, h);
    process.once(sig, h);
  }
  if (stop?.aborted) finish('stop requested');
  else stop?.addEventListener('abort', onAbort, { once: true });
  return { stopped, cancel };
}

async function makeLogger(level: string, stream: CliRuntime['logStream']): Promise<Logger> {
  const { default: pino } = await import('pino');
  const options = { name: 'confidential-data-hub', level: level === 'off' ? 'silent' : level };
  return stream === undefined ? pino(options) : pino(options, stream);
}

/** Runs the hub until SIGTERM, SIGINT or SIGHUP; resolves with the exit status. */
export async function main(argv: string[], runtime: CliRuntime = {}): Promise<number> {
  const out = runtime.stdout ?? ((t: string) => void process.stdout.write(t));
  const err = runtime.stderr ?? ((t: string) => void process.stderr.write(t));
  const args = parseArgs(argv);
  if (args.kind === 'help') {
    out(USAGE);
    return 0;
  }
  if (args.kind === 'version') {
    out(`confidential-data-hub ${CDH_VERSION}\n`);
    return 0;
  }
  if (args.kind === 'error') {
    err(`error: ${args.message}\n\n${USAGE}`);
    return 2;
  }
  const env = runtime.env ?? process.env;
  const envs: ConfigEnvironment = {
    env,
    ...(runtime.kernelCmdline !== undefined ? { kernelCmdline: runtime.kernelCmdline } : {}),
  };

  // Handlers go in before start-up, so a signal during it still shuts down cleanly.
  const stop = stopSignal(runtime.stop);
  let logger: Logger | undefined;
  let hub: RunningDataHub;
  try {
    const config = await loadCdhConfig(args.config, envs);
    // RUST_LOG overrides [log] level, as upstream's EnvFilter.
    const rustLog = env.RUST_LOG;
    const level = rustLog !== undefined && rustLog !== '' ? parseLogLevel(rustLog) : config.log.level;
    logger = await makeLogger(level, runtime.logStream);
    logger.info('Welcome to Confidential Containers Confidential Data Hub (ttRPC version)!');
    logger.info(
      args.config !== undefined
        ? `Using config file: ${args.config}`
        : 'No CDH config path specified. Using default configuration.',
    );
    for (const key of config.unknownKeys) logger.warn(`unknown config key ${key} is ignored`);
    const { startDataHub } = await import('./server.js');
    hub = await startDataHub(config, { ...runtime.hubOptions, logger });
  } catch (e) {
    const message =
      e instanceof CdhConfigError
        ? `failed to read config: ${e.message}`
        : e instanceof DataHubError
          ? `create CDH instance: ${e.message}`
          : (e as Error).message;
    logger?.fatal(message);
    logger?.flush();
    err(`confidential-data-hub: ${message}\n`);
    stop.cancel();
    return 1;
  }
  runtime.onListening?.(hub);
  const why = await stop.stopped;
  logger.info(`${why} received, gracefully shutdown.`);
  await hub.close();
  logger.flush();
  return 0;
}
