/**
 * Test helper: a real swtpm (TPM 2.0) on loopback ports with a temporary
 * state folder, started per test file and stopped by its pid. Import it as
 * `@broker/tpm/testing`; it is not part of the production entry point.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const INSTALL_HINT = 'run scripts/install-deps.sh (it installs swtpm, swtpm-tools and tpm2-tools)';

export interface SwtpmInstance {
  readonly host: string;
  /** Data channel: raw TPM commands. */
  readonly port: number;
  /** Control channel (init, shutdown). */
  readonly ctrlPort: number;
  readonly stateDir: string;
  readonly pid: number;
  /** `swtpm:127.0.0.1:PORT`, as `Tpm.open` and the attesters' `BROKER_TPM` take it. */
  readonly address: string;
  /** The tpm2-tools TCTI string (`TPM2TOOLS_TCTI`). */
  readonly tcti: string;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

async function onPath(program: string): Promise<boolean> {
  try {
    await run('sh', ['-c', `command -v ${program}`]);
    return true;
  } catch {
    return false;
  }
}

/** Throws, naming the install script, when a program the tests need is missing. */
export async function requirePrograms(...programs: string[]): Promise<void> {
  const missing: string[] = [];
  for (const p of programs) if (!(await onPath(p))) missing.push(p);
  if (missing.length > 0) throw new Error(`${missing.join(', ')} not found on PATH: ${INSTALL_HINT}`);
}

function listenOn(port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, host, () => {
      const address = server.address();
      const got = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(got));
    });
  });
}

/** A port P such that P and P+1 were both free a moment ago. */
async function freePortPair(host: string): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const p = await listenOn(0, host);
    if (p >= 65535) continue;
    try {
      await listenOn(p + 1, host);
      return p;
    } catch {
      // P+1 taken: try another pair.
    }
  }
  throw new Error('no free pair of loopback ports');
}

function connectOnce(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = new Socket();
    s.once('error', () => {
      s.destroy();
      resolve(false);
    });
    s.connect(port, host, () => {
      s.end();
      resolve(true);
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A daemon that exited but was not reaped yet (a zombie) still answers signal 0.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface StartSwtpmOptions {
  readonly host?: string;
  /** Keep the state folder after stop (for debugging). */
  readonly keepState?: boolean;
}

/**
 * Starts `swtpm socket --tpm2` as a daemon on a free loopback port pair,
 * already started (not-need-init, startup-clear). Fails, naming the
 * install script, when swtpm is missing.
 */
export async function startSwtpm(options: StartSwtpmOptions = {}): Promise<SwtpmInstance> {
  await requirePrograms('swtpm');
  const host = options.host ?? '127.0.0.1';
  const stateDir = await mkdtemp(join(tmpdir(), 'broker-swtpm-'));
  const pidFile = join(stateDir, 'swtpm.pid');
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePortPair(host);
    try {
      await run('swtpm', [
        'socket',
        '--tpm2',
        '--tpmstate',
        `dir=${stateDir}`,
        '--server',
        `type=tcp,port=${port},bindaddr=${host}`,
        '--ctrl',
        `type=tcp,port=${port + 1},bindaddr=${host}`,
        '--flags',
        'not-need-init,startup-clear',
        '--daemon',
        '--pid',
        `file=${pidFile}`,
      ]);
    } catch (err) {
      // Most likely another process took the port between the probe and the bind.
      lastError = err;
      continue;
    }
    const pid = Number((await readFile(pidFile, 'utf8')).trim());
    if (!Number.isInteger(pid) || pid <= 0) throw new Error(`swtpm wrote no usable pid to ${pidFile}`);
    for (let i = 0; i < 100 && !(await connectOnce(port, host)); i++) await sleep(20);
    let stopped = false;
    const stop = async () => {
      if (stopped) return;
      stopped = true;
      if (alive(pid)) {
        process.kill(pid, 'SIGTERM');
        for (let i = 0; i < 250 && alive(pid); i++) await sleep(20);
        if (alive(pid)) process.kill(pid, 'SIGKILL');
      }
      if (!options.keepState) await rm(stateDir, { recursive: true, force: true });
    };
    return {
      host,
      port,
      ctrlPort: port + 1,
      stateDir,
      pid,
      address: `swtpm:${host}:${port}`,
      tcti: `swtpm:host=${host},port=${port}`,
      stop,
      [Symbol.asyncDispose]: stop,
    };
  }
  await rm(stateDir, { recursive: true, force: true });
  throw new Error(`swtpm did not start: ${(lastError as Error | undefined)?.message ?? 'unknown error'}`);
}

/**
 * Runs a tpm2-tools program against the instance and returns its stdout.
 * Fails, naming the install script, when tpm2-tools is missing.
 */
export async function tpm2Tool(
  instance: SwtpmInstance,
  program: string,
  args: readonly string[],
): Promise<string> {
  await requirePrograms(program);
  const { stdout } = await run(program, [...args], {
    env: { ...process.env, TPM2TOOLS_TCTI: instance.tcti },
    maxBuffer: 16 * 1024 * 1024,
  });
  return stdout;
}
