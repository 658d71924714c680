// `[http_server] worker_count`: one primary process forks that many node:cluster workers, each a full KBS
// on the same sockets (the primary accepts connections and hands them out round-robin), so one KBS uses
// every core. Workers share no memory, which is why the configuration check refuses more than one worker
// unless every store is shared between processes (Redis, PostgreSQL or LocalFs).
//
// The primary only supervises: it starts the workers, restarts one that dies after it was serving,
// gives up when a worker cannot start (the same configuration would fail again) or crashes too often, and
// on SIGTERM/SIGINT asks every worker to finish its requests and waits for them. Giving up is exit status
// 1, so that a service manager restarts the KBS (`Restart=on-failure`, a pod's restart policy). While it
// supervises, the primary holds a timer of its own: when every worker has died at once, nothing else
// keeps its event loop alive, and it must not end there with status 0 instead of starting new ones.
import cluster, { type Worker } from 'node:cluster';
import { isSea } from 'node:sea';
import type { Logger } from 'pino';

/** What a worker tells the primary once its sockets listen. */
export interface WorkerListening {
  readonly kbs: 'listening';
  readonly urls: readonly string[];
}

function isListening(m: unknown): m is WorkerListening {
  return typeof m === 'object' && m !== null && (m as { kbs?: unknown }).kbs === 'listening';
}

/** Called in a worker once it serves: lets the primary know it started. */
export function reportListening(urls: readonly string[]): void {
  if (cluster.isWorker && process.send !== undefined) {
    const m: WorkerListening = { kbs: 'listening', urls };
    process.send(m);
  }
}

export interface SupervisorOptions {
  readonly workerCount: number;
  readonly logger: Logger;
  /**
   * The arguments the `kbs` command was given. A single executable application re-runs itself for each
   * worker, so the worker is started as the `kbs` command with these arguments; a script keeps Node's
   * default (the same script and arguments as the primary).
   */
  readonly argv: readonly string[];
  /** Pause before a crashed worker is replaced; default 1000 ms. */
  readonly restartDelayMs?: number;
  /** More crashes than this within `crashWindowMs` end the KBS; default 5 in 60 s. */
  readonly maxCrashes?: number;
  readonly crashWindowMs?: number;
  /** How long workers get to finish their requests on shutdown; default 10 s. */
  readonly shutdownGraceMs?: number;
  /** Resolves to stop the KBS; default: SIGTERM or SIGINT. */
  readonly stop?: Promise<string>;
}

/** Runs the primary until it is stopped or gives up; resolves with the exit code. */
export async function superviseWorkers(options: SupervisorOptions): Promise<number> {
  const { workerCount, logger } = options;
  const restartDelay = options.restartDelayMs ?? 1000;
  const maxCrashes = options.maxCrashes ?? 5;
  const crashWindow = options.crashWindowMs ?? 60_000;
  const grace = options.shutdownGraceMs ?? 10_000;
  // A single executable sees itself as argv[1] in the worker, so the command and its arguments are
  // passed explicitly; the multi-call dispatcher then routes to `kbs`.
  // Its Node options (the executable's own execArgv, e.g. --enable-source-maps) come with the executable
  // itself; passed again they would reach the worker as arguments of the `kbs` command.
  cluster.setupPrimary(isSea() ? { exec: 'kbs', args: [...options.argv], execArgv: [] } : {});

  const serving = new Set<Worker>();
  const crashes: number[] = [];
  const pendingRestarts = new Set<NodeJS.Timeout>();
  let stopping = false;
  let announced = false;
  let finish: (code: number) => void = () => undefined;
  const done = new Promise<number>((resolve) => {
    finish = resolve;
  });
  // Keeps the primary alive while no worker is (see the header); cleared once it is done.
  const keepAlive = setInterval(() => undefined, 60_000);
  void done.then(() => clearInterval(keepAlive));

  const stopAll = async (signal: NodeJS.Signals): Promise<void> => {
    stopping = true;
    for (const t of pendingRestarts) clearTimeout(t);
    pendingRestarts.clear();
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.isDead()) {
              resolve();
              return;
            }
            const force = setTimeout(() => w.process.kill('SIGKILL'), grace);
            w.once('exit', () => {
              clearTimeout(force);
              resolve();
            });
            w.process.kill(signal);
          }),
      ),
    );
  };

  const fork = (): void => {
    const w = cluster.fork();
    w.on('message', (m: unknown) => {
      if (!isListening(m)) return;
      serving.add(w);
      if (announced) logger.info({ workerPid: w.process.pid }, 'replacement KBS worker listening');
      else if (serving.size === workerCount) {
        announced = true;
        logger.info({ workers: workerCount, urls: m.urls }, 'KBS workers listening');
      }
    });
    w.on('exit', (code, signal) => {
      const wasServing = serving.delete(w);
      if (stopping) return;
      if (!wasServing) {
        logger.fatal({ workerPid: w.process.pid, code, signal }, 'a KBS worker could not start; stopping');
        void stopAll('SIGTERM').then(() => finish(1));
        return;
      }
      const now = Date.now();
      crashes.push(now);
      while (crashes.length > 0 && (crashes[0] as number) < now - crashWindow) crashes.shift();
      if (crashes.length > maxCrashes) {
        logger.fatal({ crashes: crashes.length }, 'KBS workers keep crashing; stopping');
        void stopAll('SIGTERM').then(() => finish(1));
        return;
      }
      logger.error({ workerPid: w.process.pid, code, signal }, 'a KBS worker exited; starting a new one');
      const t = setTimeout(() => {
        pendingRestarts.delete(t);
        if (!stopping) fork();
      }, restartDelay);
      pendingRestarts.add(t);
    });
  };

  logger.info({ workers: workerCount }, 'starting KBS worker processes');
  for (let i = 0; i < workerCount; i++) fork();
  // SIGHUP (re-read the watched files) goes to every worker.
  const onHup = () => {
    for (const w of Object.values(cluster.workers ?? {}))
      if (w !== undefined && !w.isDead()) w.process.kill('SIGHUP');
  };
  process.on('SIGHUP', onHup);
  void done.then(() => process.off('SIGHUP', onHup));

  const stop =
    options.stop ??
    new Promise<string>((resolve) => {
      process.once('SIGTERM', () => resolve('SIGTERM'));
      process.once('SIGINT', () => resolve('SIGINT'));
    });
  void stop.then(async (signal) => {
    if (stopping) return;
    logger.info({ signal }, 'shutting down KBS workers');
    await stopAll('SIGTERM');
    finish(0);
  });
  return done;
}
