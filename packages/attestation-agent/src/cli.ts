/**
 * `attestation-agent [-c aa.toml] [-a unix://PATH] [-t initdata.toml | -i DIGEST]`,
 * with upstream `ttrpc-aa`'s flags, defaults and exit behaviour: it serves
 * until SIGINT, SIGHUP or SIGTERM (upstream stops on the first two; a service
 * manager sends the third), then closes the socket and resolves 0.
 */
import type { DetectOptions } from '@broker/attester';
import {
  applyConfiguredLevel,
  choice,
  createLogger,
  LOG_FORMAT_OPTION,
  LOG_FORMATS,
  type Logger,
  type LoggerOptions,
  type OptionValues,
  runCommand,
} from '@broker/cli';
import { DEFAULT_ATTESTATION_AGENT_SOCKET } from '@broker/guest-api';
import { type AaConfig, configFromKbcParams, loadAaConfig } from './config.js';
import { AttestationAgentError } from './errors.js';
import { type LoadedInitData, loadInitDataToml, parseInitDataDigestArgument } from './initdata.js';
import { type RunningAttestationAgent, startAttestationAgent } from './start.js';

export const AA_VERSION = '0.1.0';

const HELP = `Usage: attestation-agent [OPTIONS]

Attestation agent: TEE evidence, init-data binding and KBS tokens over ttrpc. Serves until SIGINT,
SIGHUP or SIGTERM. Log lines are JSON on stdout (text on a terminal); the level comes from RUST_LOG
("info", "attestation_agent=debug"), else the config's [log] level, else info.

Options:
  -a, --attestation_sock <ATTESTATION_SOCK>
          Attestation ttRPC Unix socket addr [default: ${DEFAULT_ATTESTATION_AGENT_SOCKET}]
  -c, --config-file <CONFIG_FILE>
          Configuration file (TOML, or JSON with a .json name). Without it the KBS URL comes from
          env AA_KBC_PARAMS or the kernel parameter agent.aa_kbc_params=cc_kbc::<url>
  -i, --initdata-digest <INITDATA_DIGEST>
          Init-data digest (standard base64) to bind; the agent exits if the TEE disagrees
  -t, --initdata-toml <INITDATA_TOML>
          Init-data TOML file to bind and send to the KBS; wins over --initdata-digest
      --log-format <FORMAT>
          json (default) or text (default when stdout is a terminal)
  -h, --help
          Print help
  -V, --version
          Print version
`;

/** Upstream ttrpc-aa's flags (clap), spelled as upstream spells them. */
const SPEC = {
  name: 'attestation-agent',
  version: AA_VERSION,
  help: HELP,
  options: {
    attestation_sock: { type: 'string', short: 'a' },
    'config-file': { type: 'string', short: 'c' },
    'initdata-digest': { type: 'string', short: 'i' },
    'initdata-toml': { type: 'string', short: 't' },
    ...LOG_FORMAT_OPTION,
  },
  exitStatus: [
    [0, 'stopped by SIGINT, SIGHUP or SIGTERM'],
    [1, 'configuration refused, socket or init-data unusable, or the TEE disagrees with the init-data'],
  ],
} as const;

/** The path of a `unix://` address; upstream refuses other schemes for the agent's socket. */
export function socketPathOf(address: string): string {
  if (!address.startsWith('unix://')) {
    throw new AttestationAgentError(
      `socket address scheme is not expected: ${JSON.stringify(address.slice(0, 200))}`,
      { code: 'SOCKET_ADDRESS_INVALID' },
    );
  }
  const path = address.slice('unix://'.length);
  if (path === '')
    throw new AttestationAgentError('socket address has an empty path', { code: 'SOCKET_ADDRESS_INVALID' });
  return path;
}

/** Hooks for tests and embedding; the command line needs none of them. */
export interface MainOptions {
  /** Environment for AA_KBC_PARAMS, RUST_LOG and TEE probes; default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Kernel command line file; default `/proc/cmdline`. */
  readonly cmdlinePath?: string;
  /** TEE probe options (`root`, `modules`); `env` above is used unless given here. */
  readonly detect?: DetectOptions;
  /** Event log folder; default `/run/attestation-agent`. */
  readonly eventlogDir?: string;
  /** Where JSON log lines go; default stdout. */
  readonly logDestination?: { write(line: string): void };
  /** Help, version and usage text; default stdout/stderr. */
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
  /** Aborting it stops the agent as a signal would. */
  readonly signal?: AbortSignal;
  /** Called once the socket accepts connections. */
  readonly onListening?: (agent: RunningAttestationAgent) => void;
  readonly kbsRetryDelay?: (ms: number) => Promise<void>;
}

const STOP_SIGNALS = ['SIGINT', 'SIGHUP', 'SIGTERM'] as const;

interface StopWatch {
  /** Resolves with the first stop signal's name, or `abort`. */
  readonly stopped: Promise<string>;
  readonly requested: () => boolean;
  /** Removes the handlers (start-up failed). */
  cancel(): void;
}

function watchForStop(signal: AbortSignal | undefined): StopWatch {
  let requested = false;
  let finish: (why: string) => void = () => {};
  const stopped = new Promise<string>((resolve) => {
    finish = resolve;
  });
  const handlers = STOP_SIGNALS.map((name) => {
    const h = () => done(name);
    process.on(name, h);
    return [name, h] as const;
  });
  const onAbort = () => done('abort');
  function done(why: string): void {
    for (const [name, h] of handlers) process.off(name, h);
    signal?.removeEventListener('abort', onAbort);
    requested = true;
    finish(why);
  }
  if (signal?.aborted) done('abort');
  else signal?.addEventListener('abort', onAbort, { once: true });
  return { stopped, requested: () => requested, cancel: () => done('cancelled') };
}

/** Runs the agent until a stop signal; resolves with the exit status (0, 1 failure, 2 usage). */
export async function main(argv: string[], options: MainOptions = {}): Promise<number> {
  const io = {
    out: options.stdout ?? ((t: string) => void process.stdout.write(t)),
    err: options.stderr ?? ((t: string) => void process.stderr.write(t)),
    ...(options.env !== undefined && { env: options.env }),
  };
  return runCommand(SPEC, argv, ({ values }) => serve(values, options), io);
}

async function serve(values: OptionValues<typeof SPEC.options>, options: MainOptions): Promise<number> {
  const env = options.env ?? process.env;
  const format = choice('log-format', values['log-format'], LOG_FORMATS);
  const logOptions: LoggerOptions = {
    name: 'attestation-agent',
    env,
    ...(format !== undefined && { format }),
    ...(options.logDestination !== undefined && { destination: options.logDestination }),
  };
  const logger: Logger = createLogger(logOptions);

  let config: AaConfig;
  let configLog: string;
  const configFile = values['config-file'];
  if (configFile !== undefined) {
    config = await loadAaConfig(configFile);
    configLog = `Using config file: ${configFile}`;
  } else {
    const fromParams = await configFromKbcParams({
      env,
      ...(options.cmdlinePath !== undefined && { cmdlinePath: options.cmdlinePath }),
    });
    config = fromParams.config;
    configLog = `No AA config file specified. Using default configuration; ${fromParams.note}`;
  }
  // RUST_LOG overrides [log] level, as upstream's EnvFilter.
  applyConfiguredLevel(logger, {
    ...logOptions,
    configured: { value: config.log.level, source: `${configFile ?? 'configuration'} [log] level` },
  });
  logger.info(
    { version: AA_VERSION, rpc: 'ttrpc' },
    'Welcome to Confidential Containers Attestation Agent (ttRPC version)!',
  );
  logger.info(configLog);
  for (const key of config.ignoredKeys) logger.warn(`unknown configuration key ${key} ignored`);
  if (config.tokenConfigs.kbs === undefined) logger.warn('no KBS configured: GetToken("kbs") will fail');

  // Handlers go in before the socket exists: a signal in the window between bind and the end of
  // start-up would otherwise kill the process with the default action and leave the socket behind.
  const stop = watchForStop(options.signal);
  let running: RunningAttestationAgent;
  try {
    const socketPath = socketPathOf(values.attestation_sock ?? DEFAULT_ATTESTATION_AGENT_SOCKET);
    let initData: LoadedInitData | undefined;
    let initDataDigest: Buffer | undefined;
    if (values['initdata-toml'] !== undefined) initData = await loadInitDataToml(values['initdata-toml']);
    else if (values['initdata-digest'] !== undefined)
      initDataDigest = parseInitDataDigestArgument(values['initdata-digest']);
    running = await startAttestationAgent({
      config,
      socketPath,
      logger,
      detect: { env, ...options.detect },
      ...(initData !== undefined && { initData }),
      ...(initDataDigest !== undefined && { initDataDigest }),
      ...(options.eventlogDir !== undefined && { eventlogDir: options.eventlogDir }),
      ...(options.kbsRetryDelay !== undefined && { kbsRetryDelay: options.kbsRetryDelay }),
    });
  } catch (e) {
    // Reported once, by the dialect, on stderr.
    logger.flush();
    stop.cancel();
    throw e;
  }
  if (!stop.requested()) options.onListening?.(running);
  const why = await stop.stopped;
  logger.info({ reason: why }, 'shutting down');
  await running.close();
  logger.info('attestation agent stopped');
  logger.flush();
  return 0;
}
