// Test-only: a real redis-server (Debian's) on a free loopback port with its own temp directory and
// append-only persistence, so tests can stop and restart it without losing data.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisServer {
  readonly port: number;
  /** Process id of the running server (undefined while stopped). */
  readonly pid: number | undefined;
  readonly url: string;
  readonly dir: string;
  /** Starts the server (again); resolves once it accepts commands. */
  start(): Promise<void>;
  /** Stops it (SIGTERM: Redis flushes the append-only file first); `kill` uses SIGKILL. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Stops it and removes its directory. */
  dispose(): Promise<void>;
  output(): string;
}

export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface RedisServerOptions {
  readonly port?: number;
  /**
   * Append-only file fsync policy: `always` (tests: nothing acknowledged is lost, even on SIGKILL),
   * `everysec` (Redis's default, what a deployment would use), or `off` (no persistence).
   */
  readonly persistence?: 'always' | 'everysec' | 'off';
}

export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const persistence = options.persistence ?? 'always';
  const port = options.port ?? (await freeLoopbackPort());
  const dir = mkdtempSync(join(tmpdir(), 'kbs-redis-'));
  let child: ChildProcess | undefined;
  let out = '';
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    get pid() {
      return child?.exitCode === null ? child.pid : undefined;
    },
    async start() {
      const args = [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        persistence === 'off' ? 'no' : 'yes',
        '--appendfsync',
        persistence === 'off' ? 'everysec' : persistence,
        '--protected-mode',
        'yes',
        '--daemonize',
        'no',
        '--logfile',
        '',
      ];
      const c = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      child = c;
      const ready = new Promise<void>((resolve, reject) => {
        const onData = (d: Buffer) => {
          out += d.toString();
          if (out.includes('Ready to accept connections')) resolve();
        };
        c.stdout?.on('data', onData);
        c.stderr?.on('data', onData);
        c.once('error', reject);
        c.once('exit', (code) => reject(new Error(`redis-server exited with ${code}:\n${out}`)));
      });
      const timeout = new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`redis-server did not start:\n${out}`)), 15_000).unref(),
      );
      await Promise.race([ready, timeout]);
    },
    async stop(signal = 'SIGTERM') {
      const c = child;
      child = undefined;
      if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
      c.kill(signal);
      await exited;
    },
    async dispose() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
    output: () => out,
  };
  await server.start();
  return server;
}
