/**
 * `attestation-agent [-c aa.toml] [-a unix://PATH] [-t initdata.toml | -i DIGEST]`,
 * with upstream `ttrpc-aa`'s flags, defaults and exit behaviour: it serves
 * until SIGINT, SIGHUP or SIGTERM (upstream stops on the first two; a service
 * manager sends the third), then closes the socket and resolves 0.
 */
import type { DetectOptions } from '@broker/attester';
import { DEFAULT_ATTESTATION_AGENT_SOCKET } from '@broker/guest-api';
import pino, { type DestinationStream, type Logger } from 'pino';
import { type AaConfig, configFromKbcParams, loadAaConfig } from './config.js';
import { type LoadedInitData, loadInitDataToml, parseInitDataDigestArgument } from './initdata.js';
import { parseLogLevel } from './logging.js';
import { type RunningAttestationAgent, startAttestationAgent } from './start.js';

export const AA_VERSION = '0.1.0';

const USAGE = `Usage: attestation-agent [OPTIONS]

Attestation agent: TEE evidence, init-data binding and KBS tokens over ttrpc.

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
  -h, --help
          Print help
  -V, --version
          Print version
`;

interface Flag {
  readonly short: string;
  readonly long: string;
  readonly key: 'socket' | 'configFile' | 'initdataDigest' | 'initdataToml';
  readonly metavar: string;
}

const FLAGS: readonly Flag[] = [
  { short: '-a', long: '--attestation_sock', key: 'socket', metavar: 'ATTESTATION_SOCK' },
  { short: '-c', long: '--config-file', key: 'configFile', metavar: 'CONFIG_FILE' },
  { short: '-i', long: '--initdata-digest', key: 'initdataDigest', metavar: 'INITDATA_DIGEST' },
  { short: '-t', long: '--initdata-toml', key: 'initdataToml', metavar: 'INITDATA_TOML' },
];

export interface CliArgs {
  readonly socket: string;
  readonly configFile?: string;
  readonly initdataDigest?: string;
  readonly initdataToml?: string;
}

export type ParsedArgs =
  | { readonly kind: 'run'; readonly args: CliArgs }
  | { readonly kind: 'help' }
  | { readonly kind: 'version' }
  | { readonly kind: 'error'; readonly message: string };

/** Parses the command line as clap would for upstream's `Cli` struct. */
export function parseArgs(argv: readonly string[]): ParsedArgs {
  const values: Partial<Record<Flag['key'], string>> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '-h' || a === '--help') return { kind: 'help' };
    if (a === '-V' || a === '--version') return { kind: 'version' };
    let flag: Flag | undefined;
    let value: string | undefined;
    for (const f of FLAGS) {
      if (a === f.short || a === f.long) {
        flag = f;
        value = argv[i + 1];
        if (value === undefined) {
          return {
            kind: 'error',
            message: `a value is required for '${f.long} <${f.metavar}>' but none was supplied`,
          };
        }
        i++;
      } else if (a.startsWith(`${f.long}=`)) {
        flag = f;
        value = a.slice(f.long.length + 1);
      } else if (a.startsWith(f.short) && a.length > 2 && !a.startsWith('--')) {
        flag = f;
        value = a.slice(a[2] === '=' ? 3 : 2);
      }
      if (flag !== undefined) break;
    }
    if (flag === undefined || value === undefined) {
      return { kind: 'error', message: `unexpected argument '${a.slice(0, 200)}' found` };
    }
    if (values[flag.key] !== undefined) {
      return { kind: 'error', message: `the argument '${flag.long}' cannot be used multiple times` };
    }
    values[flag.key] = value;
  }
  return {
    kind: 'run',
    args: {
      socket: values.socket ?? DEFAULT_ATTESTATION_AGENT_SOCKET,
      ...(values.configFile !== undefined && { configFile: values.configFile }),
      ...(values.initdataDigest !== undefined && { initdataDigest: values.initdataDigest }),
      ...(values.initdataToml !== undefined && { initdataToml: values.initdataToml }),
    },
  };
}

/** The path of a `unix://` address; upstream refuses other schemes for the agent's socket. */
export function socketPathOf(address: string): string {
  if (!address.startsWith('unix://')) {
    throw new Error(`socket address scheme is not expected: ${JSON.stringify(address.slice(0, 200))}`);
  }
  const path = address.slice('unix://'.length);
  if (path === '') throw new Error('socket address has an empty path');
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
  /** Where JSON log lines go; default stderr. */
  readonly logDestination?: DestinationStream;
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

function createLogger(
  config: AaConfig,
  env: Readonly<Record<string, string | undefined>>,
  dest?: DestinationStream,
) {
  const directive = env.RUST_LOG ?? config.log.level;
  const parsed = parseLogLevel(directive);
  const logger = pino(
    { name: 'attestation-agent', level: parsed.level },
    dest ?? pino.destination({ fd: 2, sync: true }),
  );
  if (parsed.warning !== undefined) logger.warn(parsed.warning);
  return logger;
}

/** Runs the agent until a stop signal; resolves with the exit status (0, 1 failure, 2 usage). */
export async function main(argv: string[], options: MainOptions = {}): Promise<number> {
  const out = options.stdout ?? ((t: string) => process.stdout.write(t));
  const err = options.stderr ?? ((t: string) => process.stderr.write(t));
  const parsed = parseArgs(argv);
  if (parsed.kind === 'help') {
    out(USAGE);
    return 0;
  }
  if (parsed.kind === 'version') {
    out(`attestation-agent ${AA_VERSION}\nrpc: ttrpc\n`);
    return 0;
  }
  if (parsed.kind === 'error') {
    err(`error: ${parsed.message}\n\n${USAGE}`);
    return 2;
  }
  const { args } = parsed;
  const env = options.env ?? process.env;

  let config: AaConfig;
  let configLog: string;
  try {
    if (args.configFile !== undefined) {
      config = await loadAaConfig(args.configFile);
      configLog = `Using config file: ${args.configFile}`;
    } else {
      const fromParams = await configFromKbcParams({
        env,
        ...(options.cmdlinePath !== undefined && { cmdlinePath: options.cmdlinePath }),
      });
      config = fromParams.config;
      configLog = `No AA config file specified. Using default configuration; ${fromParams.note}`;
    }
  } catch (e) {
    err(`attestation-agent: error: ${(e as Error).message}\n`);
    return 1;
  }

  const logger: Logger = createLogger(config, env, options.logDestination);
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
    const socketPath = socketPathOf(args.socket);
    let initData: LoadedInitData | undefined;
    let initDataDigest: Buffer | undefined;
    if (args.initdataToml !== undefined) initData = await loadInitDataToml(args.initdataToml);
    else if (args.initdataDigest !== undefined)
      initDataDigest = parseInitDataDigestArgument(args.initdataDigest);
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
    logger.fatal({ err: (e as Error).message }, 'attestation agent failed to start');
    logger.flush();
    stop.cancel();
    return 1;
  }
  if (!stop.requested()) options.onListening?.(running);
  const why = await stop.stopped;
  logger.info({ reason: why }, 'shutting down');
  await running.close();
  logger.info('attestation agent stopped');
  logger.flush();
  return 0;
}
