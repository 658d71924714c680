// `kbs --config-file kbs-config.toml` (trustee's CLI: `-c/--config-file`, or KBS_CONFIG_FILE).
import cluster from 'node:cluster';
import { type LogLevel, LogLevelError, resolveLogLevel } from '@broker/cli';
import pino from 'pino';
import { reportListening, superviseWorkers } from './cluster.js';
import { ConfigError, type KbsConfig, loadKbsConfig } from './config.js';
import { startKbs } from './kbs.js';
import { KBS_VERSION } from './metrics.js';

const USAGE = `Usage: kbs --config-file <FILE>

Key broker service (trustee-compatible).

Options:
  -c, --config-file <FILE>  Path to a KBS config file (TOML; .json is read as JSON) [env: KBS_CONFIG_FILE]
  -h, --help                Print help
  -V, --version             Print version
`;

/** A worker's channel to the primary would keep the process running after `main` returns. */
function leaveCluster(): void {
  if (cluster.isWorker) cluster.worker?.disconnect();
}

type Parsed =
  | { kind: 'run'; configFile: string }
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'error'; message: string };

export function parseArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Parsed {
  let configFile: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '-h' || a === '--help') return { kind: 'help' };
    if (a === '-V' || a === '--version') return { kind: 'version' };
    if (a === '-c' || a === '--config-file') {
      const v = argv[i + 1];
      if (v === undefined) return { kind: 'error', message: `${a} needs a file path` };
      configFile = v;
      i++;
    } else if (a.startsWith('--config-file=')) {
      configFile = a.slice('--config-file='.length);
    } else {
      return { kind: 'error', message: `unexpected argument ${JSON.stringify(a)}` };
    }
  }
  configFile ??= env.KBS_CONFIG_FILE;
  if (configFile === undefined || configFile === '') {
    return {
      kind: 'error',
      message: 'the following required arguments were not provided: --config-file <FILE>',
    };
  }
  return { kind: 'run', configFile };
}

/** Runs the KBS until SIGTERM or SIGINT; resolves with the exit code. */
export async function main(argv: string[]): Promise<number> {
  const args = parseArgs(argv);
  if (args.kind === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (args.kind === 'version') {
    process.stdout.write(`kbs ${KBS_VERSION}\n`);
    return 0;
  }
  if (args.kind === 'error') {
    process.stderr.write(`error: ${args.message}\n\n${USAGE}`);
    return 2;
  }
  let level: LogLevel;
  try {
    // trustee's RUST_LOG (`info`, `kbs=debug,info`), then this KBS's KBS_LOG_LEVEL.
    level = resolveLogLevel({ env: process.env, targets: ['kbs'], aliases: ['KBS_LOG_LEVEL'] });
  } catch (e) {
    if (!(e instanceof LogLevelError)) throw e;
    process.stderr.write(`kbs: ${e.message}\n`);
    leaveCluster();
    return 1;
  }
  const logger = pino({
    name: 'kbs',
    level,
    ...(cluster.isWorker && { base: { pid: process.pid, worker: cluster.worker?.id } }),
  });
  let kbs: Awaited<ReturnType<typeof startKbs>>;
  try {
    const config: KbsConfig = await loadKbsConfig(args.configFile);
    const workers = config.httpServer.workerCount ?? 1;
    if (workers > 1 && cluster.isPrimary) {
      // The configuration was checked above (shared stores); each worker loads it again and serves.
      const code = await superviseWorkers({ workerCount: workers, logger, argv });
      logger.flush();
      return code;
    }
    kbs = await startKbs(config, { logger });
    reportListening(kbs.urls);
  } catch (e) {
    const msg = e instanceof ConfigError ? `configuration error: ${e.message}` : (e as Error).message;
    logger.fatal(msg);
    logger.flush();
    process.stderr.write(`kbs: ${msg}\n`);
    leaveCluster();
    return 1;
  }
  const running = kbs;
  // SIGHUP: re-read the watched files now (TLS, [mounted_files]) rather than on the next file event.
  const onHup = () => {
    logger.info('SIGHUP: reloading watched files');
    running.reload().catch((e: unknown) => logger.warn({ reason: (e as Error).message }, 'reload failed'));
  };
  process.on('SIGHUP', onHup);
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  process.off('SIGHUP', onHup);
  logger.info({ signal }, 'shutting down');
  await kbs.close();
  logger.flush();
  leaveCluster();
  return 0;
}
