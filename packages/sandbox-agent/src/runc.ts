/**
 * Debian's runc, driven as a command. A container's first process runs under `runc run` and an extra
 * one under `runc exec`, both in the foreground: runc stays the parent of the process, passes our pipes
 * through as its stdio, and exits with its status (128 + the signal when it was killed). See the
 * README for why not `runc create` + `runc start`.
 */
import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { readFile, readlink, rm } from 'node:fs/promises';
import { constants } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { RuntimeFailed, WrongState } from './errors.js';
import { OutputBuffer } from './output.js';

export interface RuncOptions {
  /** The runc executable [default: `runc` on PATH]. */
  readonly binary?: string;
  /** runc's `--root`: where it keeps container state. */
  readonly stateRoot: string;
}

/** One process of a container: its stdio buffers, its runc child, its exit status. */
export class AgentProcess {
  readonly stdout: OutputBuffer;
  readonly stderr: OutputBuffer;
  child: ChildProcessWithoutNullStreams | undefined;
  pid: number | undefined;
  /** The process has a terminal: runc runs under script(1), on a pseudo-terminal of its own. */
  terminal = false;
  status: number | undefined;
  readonly #exited: Promise<number>;
  #onExit: (status: number) => void = () => {};

  constructor(outputLimit?: number) {
    this.stdout = new OutputBuffer(outputLimit);
    this.stderr = new OutputBuffer(outputLimit);
    this.#exited = new Promise((resolve) => {
      this.#onExit = resolve;
    });
  }

  /** Resolves with the exit status once the process has ended. */
  wait(): Promise<number> {
    return this.#exited;
  }

  get started(): boolean {
    return this.child !== undefined;
  }

  /** Marks a process that will never run (its container was removed first). */
  abandon(status = 255): void {
    if (this.status !== undefined) return;
    this.status = status;
    this.stdout.end();
    this.stderr.end();
    this.#onExit(status);
  }

  /** Takes over `child` (a foreground runc); resolves once runc has written `pidFile`. */
  async adopt(child: ChildProcessWithoutNullStreams, pidFile: string, what: string): Promise<void> {
    this.child = child;
    this.stdout.attach(child.stdout);
    this.stderr.attach(child.stderr);
    let exitedEarly = false;
    child.on('error', () => {});
    child.stdin.on('error', () => {}); // EPIPE once the process has gone
    child.once('exit', (code, signal) => {
      exitedEarly = true;
      this.status = code ?? 128 + signalNumber(signal);
      this.#onExit(this.status);
      // As kata's agent: output still in the pipe is drained for a moment, then the stream ends even
      // if a child the process left behind keeps the pipe open. Timers run before the poll phase that
      // reads pipes: after a stalled event loop the timer would fire with output still unread, so the
      // end waits for the next check phase, after that poll.
      setTimeout(() => {
        setImmediate(() => {
          this.stdout.end();
          this.stderr.end();
        });
      }, 500).unref();
    });
    const spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    try {
      await spawned;
    } catch (e) {
      throw new RuntimeFailed(`${what}: cannot run runc: ${(e as Error).message}`, { cause: e });
    }
    for (let delay = 1; ; delay = Math.min(delay * 2, 4)) {
      const text = await readFile(pidFile, 'utf8').catch(() => '');
      const pid = Number.parseInt(text, 10);
      if (pid > 0) {
        this.pid = pid;
        return;
      }
      if (exitedEarly) {
        await this.wait();
        throw new RuntimeFailed(`${what} failed (runc exited with ${this.status})`);
      }
      await sleep(delay);
    }
  }
}

/**
 * The pseudo-terminal runc reads a terminal process's input from (`/dev/pts/N`, script(1)'s): its size
 * is the one runc gives the container's terminal when told of a change (SIGWINCH).
 */
export async function hostTerminal(p: AgentProcess): Promise<string> {
  const script = p.child?.pid;
  if (!p.terminal || script === undefined || p.status !== undefined)
    throw new WrongState('the process has no terminal');
  const children = await readFile(`/proc/${script}/task/${script}/children`, 'utf8').catch(() => '');
  const runc = children.trim().split(/\s+/)[0];
  if (!runc) throw new WrongState('the process has no terminal');
  const tty = await readlink(`/proc/${runc}/fd/0`).catch(() => '');
  if (!/^\/dev\/pts\/\d+$/.test(tty)) throw new WrongState('the process has no terminal');
  return tty;
}

/** One shell word. */
function quoted(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

function signalNumber(signal: NodeJS.Signals | null): number {
  return signal === null ? 0 : (constants.signals[signal] ?? 0);
}

export class Runc {
  readonly binary: string;
  readonly stateRoot: string;

  constructor(options: RuncOptions) {
    this.binary = options.binary ?? 'runc';
    this.stateRoot = options.stateRoot;
  }

  #args(args: readonly string[]): string[] {
    return ['--root', this.stateRoot, ...args];
  }

  /**
   * A foreground runc, stdio on pipes. With a terminal, runc needs one of its own to copy to and from
   * the container's: util-linux's script(1) gives it a pseudo-terminal (raw, no echo) and relays it to
   * our pipes, and returns runc's exit status.
   */
  #spawn(args: readonly string[], terminal: boolean): ChildProcessWithoutNullStreams {
    if (!terminal) return spawn(this.binary, this.#args(args), { stdio: ['pipe', 'pipe', 'pipe'] });
    const command = `stty raw -echo && exec ${[this.binary, ...this.#args(args)].map(quoted).join(' ')}`;
    return spawn('script', ['--quiet', '--flush', '--return', '--command', command, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, SHELL: '/bin/sh' },
    });
  }

  /** Runs a short runc command; rejects with runc's message. */
  command(args: readonly string[], what: string): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(this.binary, this.#args(args), { timeout: 30_000 }, (err, stdout, stderr) => {
        if (err) reject(new RuntimeFailed(`${what}: ${(stderr || err.message).trim()}`, { cause: err }));
        else resolve(stdout);
      });
    });
  }

  /** `runc run --bundle B --pid-file P ID` in the foreground, stdio on pipes. */
  async run(process: AgentProcess, id: string, bundle: string, pidFile: string): Promise<void> {
    await rm(pidFile, { force: true });
    const child = this.#spawn(
      ['--log-format', 'json', 'run', '--bundle', bundle, '--pid-file', pidFile, id],
      process.terminal,
    );
    await process.adopt(child, pidFile, `starting container ${id}`);
  }

  /** `runc exec --process F --pid-file P ID` in the foreground, stdio on pipes. */
  async exec(process: AgentProcess, id: string, processFile: string, pidFile: string): Promise<void> {
    await rm(pidFile, { force: true });
    const child = this.#spawn(
      ['exec', '--process', processFile, '--pid-file', pidFile, id],
      process.terminal,
    );
    await process.adopt(child, pidFile, `exec in container ${id}`);
  }

  kill(id: string, signal: number): Promise<string> {
    return this.command(['kill', id, String(signal)], `signalling container ${id}`);
  }

  /** `runc delete --force`; a container runc does not know is already deleted. */
  async delete(id: string): Promise<void> {
    try {
      await this.command(['delete', '--force', id], `deleting container ${id}`);
    } catch (e) {
      if (!/does not exist|not exist/.test((e as Error).message)) throw e;
    }
  }
}
