/**
 * A local registry for demos, benchmarks and tests: Debian's
 * `docker-registry` (distribution 2.8) on a free loopback port with a
 * temporary storage root, plain http. A missing binary is an error that says
 * how to install it (`scripts/install-deps.sh`); `skopeo` and `umoci` are
 * found the same way.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

/** The path of `name` on PATH; throws telling to run the install script when absent. */
export function requireTool(name: string): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // next
    }
  }
  throw new Error(
    `${name} is not installed: run scripts/install-deps.sh (it installs docker-registry, skopeo and umoci)`,
  );
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export interface RunningRegistry {
  /** `127.0.0.1:PORT`. */
  readonly host: string;
  readonly port: number;
  stop(): Promise<void>;
}

async function waitForRegistry(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited (${child.exitCode}): ${log()}`);
    try {
      const res = await fetch(url);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`docker-registry did not start: ${log()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts `docker-registry serve` on a free loopback port with a fresh storage root. */
export async function startDockerRegistry(): Promise<RunningRegistry> {
  const binary = requireTool('docker-registry');
  const root = await mkdtemp(join(tmpdir(), 'docker-registry-'));
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const config = join(root, 'config.yml');
    await writeFile(
      config,
      [
        'version: 0.1',
        'log:',
        '  level: error',
        '  accesslog:',
        '    disabled: true',
        'storage:',
        '  filesystem:',
        `    rootdirectory: ${join(root, 'data')}`,
        '  delete:',
        '    enabled: true',
        'http:',
        `  addr: 127.0.0.1:${port}`,
        '',
      ].join('\n'),
    );
    const child = spawn(binary, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    try {
      await waitForRegistry(`http://127.0.0.1:${port}/v2/`, child, () => stderr);
    } catch (e) {
      child.kill('SIGKILL');
      if (attempt < 3 && /address already in use/.test(stderr)) continue;
      throw e;
    }
    return {
      host: `127.0.0.1:${port}`,
      port,
      async stop() {
        if (child.exitCode === null) {
          const exited = new Promise((r) => child.once('exit', r));
          child.kill('SIGTERM');
          await exited;
        }
        await rm(root, { recursive: true, force: true });
      },
    };
  }
}
