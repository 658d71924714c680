// Real processes for end-to-end tests: spawn, wait until a port or socket answers, stop cleanly.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../..');
export const BIN = join(ROOT, 'dist', 'bin');

export function binary(name: string): string {
  const p = join(BIN, name);
  if (!existsSync(p)) throw new Error(`${p} is missing: run \`make build\` first`);
  return p;
}

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => res(port));
    });
  });
}

export interface Running {
  child: ChildProcess;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function start(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Running {
  // Own process group, so that stopping also reaches the children of wrappers such as faketime.
  const child = spawn(cmd, args, {
    env: opts.env ?? process.env,
    cwd: opts.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
  return {
    child,
    output: () => out,
    async stop(signal = 'SIGTERM') {
      const group = (sig: NodeJS.Signals) => {
        try {
          if (child.pid !== undefined) process.kill(-child.pid, sig);
        } catch {
          // already gone
        }
      };
      if (child.exitCode === null && child.signalCode === null) group(signal);
      const timer = setTimeout(() => group('SIGKILL'), 5000);
      const code = await exited;
      clearTimeout(timer);
      group('SIGKILL');
      if (child.pid !== undefined) await groupGone(child.pid);
      return code;
    },
  };
}

/**
 * Resolves once no live process is left in process group `pgid`. A wrapper
 * such as faketime forks its command and may exit first; until the command
 * has died too it can still hold the port, and a restarted server's "is it
 * listening" probe would reach the dying one. Zombies waiting to be reaped
 * hold nothing and do not count.
 */
async function groupGone(pgid: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!readdirSync('/proc').some((pid) => /^\d+$/.test(pid) && liveMemberOf(pgid, pid))) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`process group ${pgid} still has live processes after ${timeoutMs} ms`);
}

/**
 * Whether process `pid` is in group `pgid` and not yet dead. A leader thread
 * shows state Z as soon as it exits, while the process's other threads (and
 * with them its open sockets) may live on for a while: every thread counts.
 */
function liveMemberOf(pgid: number, pid: string): boolean {
  try {
    const [, pgrp] = statFields(`/proc/${pid}/stat`);
    if (Number(pgrp) !== pgid) return false;
    return readdirSync(`/proc/${pid}/task`).some((tid) => {
      const [state] = statFields(`/proc/${pid}/task/${tid}/stat`);
      return state !== 'Z' && state !== 'X';
    });
  } catch {
    return false; // gone while we looked
  }
}

/** State and process group from a /proc stat file (the fields after the parenthesised command). */
function statFields(path: string): [state: string | undefined, pgrp: string | undefined] {
  const stat = readFileSync(path, 'latin1');
  const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return [state, pgrp];
}

/** Resolves once a TCP port or unix socket accepts connections; fails with the process output otherwise. */
export async function waitForListen(
  target: { port: number; host?: string } | { path: string },
  proc?: Running,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc && proc.child.exitCode !== null) {
      throw new Error(`process exited with ${proc.child.exitCode} before listening:\n${proc.output()}`);
    }
    const ok = await new Promise<boolean>((res) => {
      const sock = 'path' in target ? connect(target.path) : connect(target.port, target.host ?? '127.0.0.1');
      sock.once('connect', () => {
        sock.destroy();
        res(true);
      });
      sock.once('error', () => res(false));
    });
    if (ok) return;
    if (Date.now() > deadline)
      throw new Error(`nothing listening after ${timeoutMs} ms:\n${proc?.output() ?? ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Runs a command to completion and returns its exit code and output. */
export async function runToEnd(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; input?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((res, rej) => {
    const child = spawn(cmd, args, { env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', rej);
    // 'close', not 'exit': the process may exit before its output has been read.
    child.on('close', (code) => res({ code, stdout, stderr }));
    // A command that exits without reading its input must not fail the caller with EPIPE.
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
  });
}
