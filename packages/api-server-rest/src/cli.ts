// `api-server-rest [--features resource|attestation|all] [--bind IP:PORT] [--cdh_addr ADDR] [--aa_addr ADDR]`,
// upstream's flags (clap: `-f/--features`, `-b/--bind`, `-c/--cdh_addr`, `-a/--aa_addr`) and defaults.
import pino from 'pino';
import { FEATURES, type Feature, isFeature } from './router.js';
import { DEFAULT_BIND, startApiServer } from './server.js';
import { DEFAULT_AA_ADDR, DEFAULT_CDH_ADDR, DEFAULT_TTRPC_TIMEOUT_MS } from './ttrpc-backends.js';
import { API_SERVER_REST_VERSION } from './version.js';

const DEFAULT_FEATURE: Feature = 'resource';

const USAGE = `Usage: api-server-rest [OPTIONS]

HTTP API (loopback only) in front of the confidential data hub and the attestation agent.

Options:
  -b, --bind <BIND>          Bind address for API Server [default: ${DEFAULT_BIND}]
  -f, --features <FEATURES>  Features for rest API Server, allowed options: ${FEATURES.join(', ')} [default: ${DEFAULT_FEATURE}]
  -c, --cdh_addr <CDH_ADDR>  Listen address of confidential-data-hub TTRPC Service [default: ${DEFAULT_CDH_ADDR}]
  -a, --aa_addr <AA_ADDR>    Listen address of attestation-agent TTRPC Service [default: ${DEFAULT_AA_ADDR}]
  -h, --help                 Print help
  -V, --version              Print version

Environment:
  RUST_LOG                          Log level: error, warn, info (default), debug or trace
  API_SERVER_REST_TTRPC_TIMEOUT_MS  Deadline of each CDH/AA call in ms [default: ${DEFAULT_TTRPC_TIMEOUT_MS}]
`;

interface RunArgs {
  readonly kind: 'run';
  readonly bind: string;
  readonly features: string;
  readonly cdhAddr: string;
  readonly aaAddr: string;
}
type Parsed = RunArgs | { kind: 'help' } | { kind: 'version' } | { kind: 'error'; message: string };

const OPTIONS: Readonly<Record<string, keyof Omit<RunArgs, 'kind'>>> = {
  bind: 'bind',
  features: 'features',
  cdh_addr: 'cdhAddr',
  aa_addr: 'aaAddr',
};
const SHORT: Readonly<Record<string, string>> = { b: 'bind', f: 'features', c: 'cdh_addr', a: 'aa_addr' };

/** Parses the command line the way upstream's clap definition does (`--x v`, `--x=v`, `-x v`, `-xv`, `-x=v`). */
export function parseArgs(argv: readonly string[]): Parsed {
  const values: Partial<Record<keyof Omit<RunArgs, 'kind'>, string>> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '-h' || arg === '--help') return { kind: 'help' };
    if (arg === '-V' || arg === '--version') return { kind: 'version' };
    let long: string | undefined;
    let inline: string | undefined;
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      long = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
      if (eq >= 0) inline = arg.slice(eq + 1);
    } else if (arg.startsWith('-') && arg.length > 1) {
      long = SHORT[arg.charAt(1)];
      if (long === undefined)
        return { kind: 'error', message: `unexpected argument '${arg.slice(0, 2)}' found` };
      if (arg.length > 2) inline = arg.charAt(2) === '=' ? arg.slice(3) : arg.slice(2);
    } else {
      return { kind: 'error', message: `unexpected argument '${arg}' found` };
    }
    const key = long === undefined ? undefined : OPTIONS[long];
    if (key === undefined) return { kind: 'error', message: `unexpected argument '${arg}' found` };
    let value = inline;
    if (value === undefined) {
      value = argv[i + 1];
      if (value === undefined) {
        return { kind: 'error', message: `a value is required for '--${long}' but none was supplied` };
      }
      i++;
    }
    if (values[key] !== undefined) {
      return { kind: 'error', message: `the argument '--${long}' cannot be used multiple times` };
    }
    values[key] = value;
  }
  return {
    kind: 'run',
    bind: values.bind ?? DEFAULT_BIND,
    features: values.features ?? DEFAULT_FEATURE,
    cdhAddr: values.cdhAddr ?? DEFAULT_CDH_ADDR,
    aaAddr: values.aaAddr ?? DEFAULT_AA_ADDR,
  };
}

const LEVELS = new Set(['error', 'warn', 'info', 'debug', 'trace']);

/** A plain level from `RUST_LOG`; per-module filters are not supported and fall back to `info`. */
function logLevel(env: NodeJS.ProcessEnv): string {
  const v = env.RUST_LOG?.trim().toLowerCase();
  return v !== undefined && LEVELS.has(v) ? v : 'info';
}

function ttrpcTimeout(env: NodeJS.ProcessEnv): number | string {
  const raw = env.API_SERVER_REST_TTRPC_TIMEOUT_MS;
  if (raw === undefined || raw === '') return DEFAULT_TTRPC_TIMEOUT_MS;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < 1) {
    return `API_SERVER_REST_TTRPC_TIMEOUT_MS must be a positive number of milliseconds, got ${JSON.stringify(raw)}`;
  }
  return n;
}

/**
 * Runs api-server-rest until SIGTERM or SIGINT; resolves with the exit code:
 * 0 after a clean shutdown, 1 for an unknown feature or a start-up failure,
 * 2 for a malformed command line.
 */
export async function main(argv: string[]): Promise<number> {
  const args = parseArgs(argv);
  if (args.kind === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (args.kind === 'version') {
    process.stdout.write(`api-server-rest ${API_SERVER_REST_VERSION}\n`);
    return 0;
  }
  if (args.kind === 'error') {
    process.stderr.write(`error: ${args.message}\n\n${USAGE}`);
    return 2;
  }
  const logger = pino({ name: 'api-server-rest', level: logLevel(process.env) });
  const fail = (message: string): number => {
    logger.error(message);
    logger.flush();
    process.stderr.write(`api-server-rest: ${message}\n`);
    return 1;
  };
  logger.info(`Starting API server on ${args.bind} with features ${args.features}`);
  const { features } = args;
  if (!isFeature(features)) {
    return fail('Unknown features. Supported features are: resource, attestation, all.');
  }
  const timeoutMs = ttrpcTimeout(process.env);
  if (typeof timeoutMs === 'string') return fail(timeoutMs);

  // Listen for signals before binding so a SIGTERM during start-up is not lost.
  let onSignal: (signal: NodeJS.Signals) => void = () => undefined;
  const signalled = new Promise<NodeJS.Signals>((resolve) => {
    onSignal = resolve;
  });
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  const detach = () => {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  };

  let server: Awaited<ReturnType<typeof startApiServer>>;
  try {
    server = await startApiServer({
      features,
      bind: args.bind,
      cdhAddr: args.cdhAddr,
      aaAddr: args.aaAddr,
      ttrpc: { timeoutMs },
      logger,
    });
  } catch (err) {
    detach();
    return fail(err instanceof Error ? err.message : String(err));
  }
  const signal = await signalled;
  detach();
  logger.info({ signal }, 'shutting down');
  await server.close();
  logger.flush();
  return 0;
}
