// Runs swtpm (TPM 2.0, TCP data and control channels on loopback, already started) as a child of
// this process, so it dies with it. Production code (the mock TEE device) and the test helper
// (`@broker/tpm/testing`) both launch it through here.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, Socket } from 'node:net';
import { makeDirectory } from '@broker/cli';
import { SwtpmLaunchError } from './errors.js';

export interface SwtpmEndpoint {
  readonly host: string;
  /** Data channel (raw TPM commands). */
  readonly port: number;
  /** Control channel (power, locality). */
  readonly ctrlPort: number;
}

export interface SwtpmProcess extends SwtpmEndpoint {
  readonly pid: number;
  readonly stateDir: string;
  /** Resolves when swtpm exits, with its exit code or signal. */
  readonly exited: Promise<string>;
  stop(): Promise<void>;
}

export const SWTPM_INSTALL_HINT = 'install swtpm (scripts/install-deps.sh does)';

function probePort(port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen({ port, host, exclusive: true }, () => {
      const a = s.address();
      const got = typeof a === 'object' && a !== null ? a.port : port;
      s.close(() => resolve(got));
    });
  });
}

/** A port P with P and P + 1 free a moment ago. */
async function freePortPair(host: string): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const p = await probePort(0, host);
    if (p >= 65535) continue;
    try {
      await probePort(p + 1, host);
      return p;
    } catch {
      // P + 1 taken: another pair.
    }
  }
  throw new SwtpmLaunchError('no free pair of loopback ports for swtpm');
}

function canConnect(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = new Socket();
    s.once('error', () => {
      s.destroy();
      resolve(false);
    });
    s.connect(port, host, () => {
      s.destroy();
      resolve(true);
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function startOnce(
  stateDir: string,
  host: string,
  port: number,
): { child: ChildProcess; exited: Promise<string> } {
  const child = spawn(
    'swtpm',
    [
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
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (t: string) => {
    if (stderr.length < 4096) stderr += t;
  });
  const exited = new Promise<string>((resolve) => {
    child.once('error', (err) => resolve(`failed to run: ${err.message}`));
    child.once('exit', (code, signal) =>
      resolve(`${signal ?? `exit ${code}`}${stderr ? `: ${stderr.trim()}` : ''}`),
    );
  });
  return { child, exited };
}

export interface LaunchSwtpmOptions {
  /** swtpm's state folder; created (mode 0700) when missing. */
  readonly stateDir: string;
  /** Loopback address to bind; default 127.0.0.1. */
  readonly host?: string;
  /** Data port (control on port + 1); 0 or absent picks a free pair. */
  readonly port?: number;
}

/**
 * Starts swtpm on `port` (and port + 1), or on a free pair when `port` is 0,
 * and resolves once it accepts connections. Fails with `SwtpmLaunchError`.
 */
export async function launchSwtpm(options: LaunchSwtpmOptions): Promise<SwtpmProcess> {
  const host = options.host ?? '127.0.0.1';
  await makeDirectory(options.stateDir, 0o700);
  let why = '';
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = options.port || (await freePortPair(host));
    const { child, exited } = startOnce(options.stateDir, host, port);
    let dead: string | undefined;
    void exited.then((w) => {
      dead = w;
    });
    // swtpm binds both ports before it serves; the control port answers first contact harmlessly.
    for (let i = 0; i < 250 && dead === undefined; i++) {
      if (await canConnect(port + 1, host)) break;
      await sleep(20);
    }
    if (dead !== undefined || child.pid === undefined) {
      why = dead ?? 'no pid';
      if (why.startsWith('failed to run')) throw new SwtpmLaunchError(`swtpm ${why}; ${SWTPM_INSTALL_HINT}`);
      if (options.port) break;
      continue;
    }
    const onExit = () => child.kill('SIGKILL');
    process.once('exit', onExit);
    const pid = child.pid;
    return {
      host,
      port,
      ctrlPort: port + 1,
      pid,
      stateDir: options.stateDir,
      exited,
      async stop() {
        process.off('exit', onExit);
        if (dead !== undefined) return;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      },
    };
  }
  throw new SwtpmLaunchError(`swtpm did not start: ${why}`);
}
