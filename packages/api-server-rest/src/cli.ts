// `api-server-rest [--features resource|attestation|all] [--bind IP:PORT] [--cdh_addr ADDR] [--aa_addr ADDR]`,
// upstream's flags (clap: `-f/--features`, `-b/--bind`, `-c/--cdh_addr`, `-a/--aa_addr`) and defaults, plus
// our opt-in `--plugins LIST` (long form only, so no future upstream short flag collides with it).
import {
  type CommandIo,
  choice,
  createLogger,
  LOG_FORMAT_HELP,
  LOG_FORMAT_OPTION,
  LOG_FORMATS,
  type OptionValues,
  processIo,
  runCommand,
  UsageError,
} from '@broker/cli';
import { ApiServerError } from './errors.js';
import { PluginListError, parsePluginList } from './plugins.js';
import { FEATURES, isFeature } from './router.js';
import { DEFAULT_BIND, startApiServer } from './server.js';
import { DEFAULT_AA_ADDR, DEFAULT_CDH_ADDR, DEFAULT_TTRPC_TIMEOUT_MS } from './ttrpc-backends.js';

/** This command's version; `/info` answers upstream's `Guest Components Version` text. */
export const API_SERVER_REST_CLI_VERSION = '0.1.0';
const DEFAULT_FEATURE = 'resource';

const HELP = `Usage: api-server-rest [OPTIONS]

HTTP API (loopback only) in front of the confidential data hub and the attestation agent. Serves
until SIGTERM or SIGINT. Log lines are JSON on stdout (text on a terminal), one \`access\` record
per request.

Options:
  -b, --bind <BIND>          Bind address for API Server [default: ${DEFAULT_BIND}]
  -f, --features <FEATURES>  Features for rest API Server, allowed options: ${FEATURES.join(', ')} [default: ${DEFAULT_FEATURE}]
  -c, --cdh_addr <CDH_ADDR>  Listen address of confidential-data-hub TTRPC Service [default: ${DEFAULT_CDH_ADDR}]
  -a, --aa_addr <AA_ADDR>    Listen address of attestation-agent TTRPC Service [default: ${DEFAULT_AA_ADDR}]
      --plugins <PLUGINS>    KBS plugins any local process may call, without credential, at
                             GET /cdh/plugin/<plugin>/<path>?<query>; comma-separated, e.g. nebula-ca,external
                             [default: none: only kbs:/// resources, at /cdh/resource/<path>]
${LOG_FORMAT_HELP}
  -h, --help                 Print help
  -V, --version              Print version

Environment:
  RUST_LOG                          Log level: "info" (default), "api_server_rest=debug", off, error, warn, debug, trace
  API_SERVER_REST_TTRPC_TIMEOUT_MS  Deadline of each CDH/AA call in ms [default: ${DEFAULT_TTRPC_TIMEOUT_MS}]
`;

const SPEC = {
  name: 'api-server-rest',
  version: API_SERVER_REST_CLI_VERSION,
  help: HELP,
  options: {
    bind: { type: 'string', short: 'b' },
    features: { type: 'string', short: 'f' },
    cdh_addr: { type: 'string', short: 'c' },
    aa_addr: { type: 'string', short: 'a' },
    plugins: { type: 'string' },
    ...LOG_FORMAT_OPTION,
  },
  exitStatus: [
    [0, 'stopped by SIGTERM or SIGINT'],
    [1, 'unknown feature (as upstream), bad address or timeout, or the port could not be bound'],
    [2, 'malformed command line, or a --plugins list that is not plugin names'],
  ],
} as const;

function ttrpcTimeout(env: NodeJS.ProcessEnv): number {
  const raw = env.API_SERVER_REST_TTRPC_TIMEOUT_MS;
  if (raw === undefined || raw === '') return DEFAULT_TTRPC_TIMEOUT_MS;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < 1) {
    throw new ApiServerError(
      `API_SERVER_REST_TTRPC_TIMEOUT_MS must be a positive number of milliseconds, got ${JSON.stringify(raw.slice(0, 64))}`,
      { code: 'TIMEOUT_INVALID' },
    );
  }
  return n;
}

/** `--plugins`: a malformed list is a usage error (status 2), like any invalid argument. */
function pluginList(value: string | undefined, features: string): string[] {
  if (value === undefined) return [];
  try {
    const plugins = parsePluginList(value);
    if (features === 'attestation') {
      throw new PluginListError('--plugins needs the resource feature (--features resource or all)');
    }
    return plugins;
  } catch (err) {
    if (err instanceof PluginListError) throw new UsageError(`invalid value for '--plugins': ${err.message}`);
    throw err;
  }
}

/** Runs api-server-rest until SIGTERM or SIGINT; resolves with the exit code. */
export function main(argv: string[], io: CommandIo = processIo): Promise<number> {
  return runCommand(SPEC, argv, ({ values }) => serve(values), io);
}

async function serve(values: OptionValues<typeof SPEC.options>): Promise<number> {
  // A malformed command line is refused before anything is logged.
  const plugins = pluginList(values.plugins, values.features ?? DEFAULT_FEATURE);
  const format = choice('log-format', values['log-format'], LOG_FORMATS);
  const logger = createLogger({ name: 'api-server-rest', ...(format !== undefined && { format }) });
  const bind = values.bind ?? DEFAULT_BIND;
  const features = values.features ?? DEFAULT_FEATURE;
  logger.info(`Starting API server on ${bind} with features ${features}`);
  // Upstream refuses an unknown feature at run time, with status 1.
  if (!isFeature(features))
    throw new ApiServerError('Unknown features. Supported features are: resource, attestation, all.', {
      code: 'FEATURES_UNKNOWN',
    });
  const timeoutMs = ttrpcTimeout(process.env);

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
      bind,
      cdhAddr: values.cdh_addr ?? DEFAULT_CDH_ADDR,
      aaAddr: values.aa_addr ?? DEFAULT_AA_ADDR,
      ttrpc: { timeoutMs },
      plugins,
      logger,
    });
  } catch (err) {
    detach();
    logger.flush();
    throw err;
  }
  const signal = await signalled;
  detach();
  logger.info({ signal }, 'shutting down');
  await server.close();
  logger.flush();
  return 0;
}
