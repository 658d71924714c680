/**
 * `confidential-data-hub [-c <config>]`, upstream's `ttrpc-cdh` command
 * line: `-c` only (no long form), plus `-h/--help` and `-V/--version`.
 * Without `-c` the KBC comes from `AA_KBC_PARAMS` or the kernel command line.
 *
 * Only what listening needs is loaded before the socket opens; the KBS
 * client, the agent client and the resource code load on first use.
 */
import {
  applyConfiguredLevel,
  choice,
  createLogger,
  LOG_FORMAT_OPTION,
  LOG_FORMATS,
  type LoggerOptions,
  type OptionValues,
  runCommand,
} from '@broker/cli';
import { CdhConfigError, type ConfigEnvironment, loadCdhConfig } from './config.js';
import { DataHubError } from './errors.js';
import type { RunningDataHub, StartDataHubOptions } from './server.js';

export const CDH_VERSION = '0.1.0';

const HELP = `Usage: confidential-data-hub [OPTIONS]

Confidential Data Hub (ttRPC): resources, sealed secrets and image pulls for the guest. Serves until
SIGTERM, SIGINT or SIGHUP. Log lines are JSON on stdout (text on a terminal); the level comes from
RUST_LOG ("info", "confidential_data_hub=debug"), else the config's [log] level, else info.

Options:
  -c <CONFIG>                Path to the config file (\`-c /etc/confidential-data-hub.conf\`); TOML, or JSON for .json
      --log-format <FORMAT>  json (default) or text (default when stdout is a terminal)
  -h, --help                 Print help
  -V, --version              Print version
`;

/** Upstream's `#[arg(short)] config: Option<String>`: `-c` only. */
const SPEC = {
  name: 'confidential-data-hub',
  version: CDH_VERSION,
  help: HELP,
  options: { c: { type: 'string' }, ...LOG_FORMAT_OPTION },
  exitStatus: [
    [0, 'stopped by SIGTERM, SIGINT or SIGHUP'],
    [1, 'configuration refused or unreadable, or the hub could not start (socket, credentials)'],
  ],
} as const;

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

/** Runs the hub until SIGTERM, SIGINT or SIGHUP; resolves with the exit status. */
export async function main(argv: string[], runtime: CliRuntime = {}): Promise<number> {
  const io = {
    out: runtime.stdout ?? ((t: string) => void process.stdout.write(t)),
    err: runtime.stderr ?? ((t: string) => void process.stderr.write(t)),
    ...(runtime.env !== undefined && { env: runtime.env }),
  };
  return runCommand(SPEC, argv, ({ values }) => serve(values, runtime), io);
}

async function serve(values: OptionValues<typeof SPEC.options>, runtime: CliRuntime): Promise<number> {
  const env = runtime.env ?? process.env;
  const envs: ConfigEnvironment = {
    env,
    ...(runtime.kernelCmdline !== undefined ? { kernelCmdline: runtime.kernelCmdline } : {}),
  };
  const format = choice('log-format', values['log-format'], LOG_FORMATS);
  const logOptions: LoggerOptions = {
    name: 'confidential-data-hub',
    env,
    ...(format !== undefined && { format }),
    ...(runtime.logStream !== undefined && { destination: runtime.logStream }),
  };
  const logger = createLogger(logOptions);

  // Handlers go in before start-up, so a signal during it still shuts down cleanly.
  const stop = stopSignal(runtime.stop);
  let hub: RunningDataHub;
  try {
    let config: Awaited<ReturnType<typeof loadCdhConfig>>;
    try {
      config = await loadCdhConfig(values.c, envs);
    } catch (e) {
      // A file's errors already say `failed to read config file <path>`; the default configuration's
      // (kernel command line, environment) get upstream's context.
      if (e instanceof CdhConfigError)
        throw new DataHubError(values.c === undefined ? `failed to read config: ${e.message}` : e.message, {
          cause: e,
          code: 'CONFIG_INVALID',
        });
      throw e;
    }
    // RUST_LOG overrides [log] level, as upstream's EnvFilter.
    applyConfiguredLevel(logger, {
      ...logOptions,
      configured: { value: config.log.level, source: `${values.c ?? 'configuration'} [log] level` },
    });
    logger.info('Welcome to Confidential Containers Confidential Data Hub (ttRPC version)!');
    logger.info(
      values.c !== undefined
        ? `Using config file: ${values.c}`
        : 'No CDH config path specified. Using default configuration.',
    );
    for (const key of config.unknownKeys) logger.warn(`unknown config key ${key} is ignored`);
    const { startDataHub } = await import('./server.js');
    try {
      hub = await startDataHub(config, { ...runtime.hubOptions, logger });
    } catch (e) {
      if (e instanceof DataHubError)
        throw new DataHubError(`create CDH instance: ${e.message}`, { cause: e, code: 'INIT_FAILED' });
      throw e;
    }
  } catch (e) {
    // Reported once, by the dialect, on stderr.
    logger.flush();
    stop.cancel();
    throw e;
  }
  runtime.onListening?.(hub);
  const why = await stop.stopped;
  logger.info(`${why} received, gracefully shutdown.`);
  await hub.close();
  logger.flush();
  return 0;
}
