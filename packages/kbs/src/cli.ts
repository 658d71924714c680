// `kbs --config-file kbs-config.toml` (trustee's CLI: `-c/--config-file`, or KBS_CONFIG_FILE).
import cluster from 'node:cluster';
import {
  type CommandIo,
  ConfigError,
  choice,
  createLogger,
  LOG_FORMAT_HELP,
  LOG_FORMAT_OPTION,
  LOG_FORMATS,
  processIo,
  runCommand,
  UsageError,
} from '@broker/cli';
import { reportListening, superviseWorkers } from './cluster.js';
import { type KbsConfig, loadKbsConfig } from './config.js';
import { KbsConfigError } from './errors.js';
import { startKbs } from './kbs.js';
import { KBS_VERSION } from './metrics.js';

const HELP = `Usage: kbs --config-file <FILE>

Key broker service (trustee-compatible). Serves until SIGTERM or SIGINT; SIGHUP re-reads the
watched files. Log lines are JSON on stdout (text on a terminal); the level comes from RUST_LOG
(trustee's: "info", "kbs=debug,info"), else KBS_LOG_LEVEL, else info.

Options:
  -c, --config-file <FILE>  Path to a KBS config file (TOML; .json is read as JSON) [env: KBS_CONFIG_FILE]
${LOG_FORMAT_HELP}
  -h, --help                Print help
  -V, --version             Print version
`;

const SPEC = {
  name: 'kbs',
  version: KBS_VERSION,
  help: HELP,
  options: { 'config-file': { type: 'string', short: 'c' }, ...LOG_FORMAT_OPTION },
  exitStatus: [
    [0, 'stopped by SIGTERM or SIGINT'],
    [1, 'configuration refused, a file unreadable, or the listener could not start'],
  ],
} as const;

/** A worker's channel to the primary would keep the process running after `main` returns. */
function leaveCluster(): void {
  if (cluster.isWorker) cluster.worker?.disconnect();
}

/** Runs the KBS until SIGTERM or SIGINT; resolves with the exit code. */
export async function main(argv: string[], io: CommandIo = processIo): Promise<number> {
  const code = await runCommand(
    SPEC,
    argv,
    async ({ values }) => {
      const configFile = values['config-file'] ?? process.env.KBS_CONFIG_FILE;
      if (configFile === undefined || configFile === '') {
        throw new UsageError("missing option '--config-file' (or KBS_CONFIG_FILE)");
      }
      const format = choice('log-format', values['log-format'], LOG_FORMATS);
      const logger = createLogger({
        name: 'kbs',
        aliases: ['KBS_LOG_LEVEL'],
        ...(format !== undefined && { format }),
        ...(cluster.isWorker && { base: { pid: process.pid, worker: cluster.worker?.id } }),
      });
      let config: KbsConfig;
      try {
        config = await loadKbsConfig(configFile);
      } catch (e) {
        if (e instanceof ConfigError)
          throw new KbsConfigError(`configuration error: ${e.message}`, { cause: e });
        throw e;
      }
      const workers = config.httpServer.workerCount ?? 1;
      if (workers > 1 && cluster.isPrimary) {
        // The configuration was checked above (shared stores); each worker loads it again and serves.
        const status = await superviseWorkers({ workerCount: workers, logger, argv });
        logger.flush();
        return status;
      }
      const kbs = await startKbs(config, { logger });
      reportListening(kbs.urls);
      // SIGHUP: re-read the watched files now (TLS, [mounted_files]) rather than on the next file event.
      const onHup = () => {
        logger.info('SIGHUP: reloading watched files');
        kbs.reload().catch((e: unknown) => logger.warn({ reason: (e as Error).message }, 'reload failed'));
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
      return 0;
    },
    io,
  );
  leaveCluster();
  return code;
}
