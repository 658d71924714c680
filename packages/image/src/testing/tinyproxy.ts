/**
 * Debian's tinyproxy on a free loopback port, for tests of proxied pulls.
 * Its outgoing connections leave from `bind` (default 127.0.0.3), so a
 * server's access log tells proxied requests (from `bind`) from direct ones
 * (from 127.0.0.1).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, requireTool } from '../registry/local-registry.js';

export interface RunningTinyproxy {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** The address its outgoing connections come from. */
  readonly bind: string;
  /** Its log so far. */
  log(): string;
  /** The request lines it logged (`GET http://…`, `CONNECT host:port`), in order. */
  requests(): string[];
  stop(): Promise<void>;
}

async function listening(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`tinyproxy exited (${child.exitCode}): ${log()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`tinyproxy did not start: ${log()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `basicAuth`: the proxy requires these credentials (`Proxy-Authorization: Basic`), 407 otherwise. */
export async function startTinyproxy(
  options: { bind?: string; basicAuth?: { user: string; password: string } } = {},
): Promise<RunningTinyproxy> {
  const binary = requireTool('tinyproxy');
  const bind = options.bind ?? '127.0.0.3';
  const dir = await mkdtemp(join(tmpdir(), 'tinyproxy-'));
  const logFile = join(dir, 'tinyproxy.log');
  const port = await freePort();
  const config = join(dir, 'tinyproxy.conf');
  // No ConnectPort line: CONNECT is allowed to any port (the registries listen on free ones).
  await writeFile(
    config,
    [
      `Port ${port}`,
      'Listen 127.0.0.1',
      `Bind ${bind}`,
      'Timeout 60',
      `LogFile "${logFile}"`,
      'LogLevel Connect',
      'MaxClients 64',
      'Allow 127.0.0.1',
      ...(options.basicAuth !== undefined
        ? [`BasicAuth ${options.basicAuth.user} ${options.basicAuth.password}`]
        : []),
      '',
    ].join('\n'),
  );
  await writeFile(logFile, '');
  const child = spawn(binary, ['-d', '-c', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const log = () => {
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '';
    }
  };
  try {
    await listening(port, child, () => `${stderr}${log()}`);
  } catch (e) {
    child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    url: `http://127.0.0.1:${port}`,
    bind,
    log,
    requests: () =>
      [...log().matchAll(/Request \(file descriptor \d+\): (.*?) HTTP\/1\.1$/gm)].map((m) => m[1] ?? ''),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
