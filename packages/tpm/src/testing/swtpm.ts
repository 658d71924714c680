/**
 * Test helper: a real swtpm (TPM 2.0) on loopback ports with a temporary
 * state folder, started per test file as a child of the test process. Import it as
 * `@broker/tpm/testing`; it is not part of the production entry point.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { launchSwtpm, type SwtpmProcess } from '../swtpm-launch.js';

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

export interface StartSwtpmOptions {
  readonly host?: string;
  /** Keep the state folder after stop (for debugging). */
  readonly keepState?: boolean;
}

/**
 * Starts `swtpm socket --tpm2` (through `launchSwtpm`) on a free loopback
 * port pair with a temporary state folder, already started (not-need-init,
 * startup-clear). Fails, naming the install script, when swtpm is missing.
 */
export async function startSwtpm(options: StartSwtpmOptions = {}): Promise<SwtpmInstance> {
  await requirePrograms('swtpm');
  const host = options.host ?? '127.0.0.1';
  const stateDir = await mkdtemp(join(tmpdir(), 'broker-swtpm-'));
  let launched: SwtpmProcess;
  try {
    launched = await launchSwtpm({ stateDir, host });
  } catch (err) {
    await rm(stateDir, { recursive: true, force: true });
    throw err;
  }
  const { port } = launched;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await launched.stop();
    if (!options.keepState) await rm(stateDir, { recursive: true, force: true });
  };
  return {
    host,
    port,
    ctrlPort: launched.ctrlPort,
    stateDir,
    pid: launched.pid,
    address: `swtpm:${host}:${port}`,
    tcti: `swtpm:host=${host},port=${port}`,
    stop,
    [Symbol.asyncDispose]: stop,
  };
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
