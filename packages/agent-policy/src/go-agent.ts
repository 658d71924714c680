/**
 * Test and benchmark helper (not exported): builds `testdata/agent/main.go` against Debian's
 * containerd/ttrpc in GOPATH mode, caches the binary per source and Go version, and drives it as a
 * stand-in kata agent (`serve`) or as a ttrpc client (`call`).
 */
import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { AgentPolicyError } from './errors.js';

const run = promisify(execFile);
const GOPATH = '/usr/share/gocode';
const TTRPC_SRC = join(GOPATH, 'src/github.com/containerd/ttrpc');

/** Set to skip the Go tests deliberately (the same switch as @broker/ttrpc's interop test). */
export const SKIP_GO = process.env.BROKER_SKIP_GO_INTEROP === '1';

function sourcePath(): string {
  const beside = fileURLToPath(new URL('../testdata/agent/main.go', import.meta.url));
  if (existsSync(beside)) return beside;
  // Bundled (the benchmark runs from dist/bench): resolve from the repository root.
  return join(process.cwd(), 'packages/agent-policy/testdata/agent/main.go');
}

/** Builds the Go program once per source version; returns the binary's path. */
export async function buildGoAgent(): Promise<string> {
  const missing =
    'the Go interop tests need `go` and containerd/ttrpc sources: run scripts/install-deps.sh ' +
    '(Debian packages golang-go golang-github-containerd-ttrpc-dev), or set BROKER_SKIP_GO_INTEROP=1 to skip';
  let goVersion: string;
  try {
    goVersion = (await run('go', ['version'])).stdout;
  } catch {
    throw new AgentPolicyError(`go not found on PATH; ${missing}`, { code: 'GO_AGENT_UNAVAILABLE' });
  }
  if (!existsSync(TTRPC_SRC))
    throw new AgentPolicyError(`${TTRPC_SRC} is missing; ${missing}`, { code: 'GO_AGENT_UNAVAILABLE' });
  const src = sourcePath();
  const source = await readFile(src);
  const key = createHash('sha256').update(source).update(goVersion).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), `broker-agent-policy-go-${key}`);
  const bin = join(dir, 'agent');
  if (existsSync(bin)) return bin;
  await mkdir(dir, { recursive: true });
  const tmp = `${bin}.${process.pid}.tmp`;
  try {
    await run('go', ['build', '-o', tmp, src], {
      cwd: dirname(src),
      env: { ...process.env, GO111MODULE: 'off', GOPATH, GOCACHE: join(dir, 'gocache'), GOFLAGS: '' },
      timeout: 180_000,
    });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new AgentPolicyError(`building the Go stand-in agent failed: ${err.stderr || err.message}`, {
      code: 'GO_AGENT_UNAVAILABLE',
    });
  }
  await rename(tmp, bin); // atomic: a concurrent run never executes a half-written binary
  return bin;
}

export interface GoAgentCall {
  readonly call: string;
  readonly sha256: string;
  readonly len: number;
}

/** A running Go stand-in agent. */
export class GoStandInAgent {
  /** Calls received so far, in arrival order. */
  readonly calls: GoAgentCall[] = [];
  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    readonly socket: string,
  ) {}

  static async start(bin: string, socket: string): Promise<GoStandInAgent> {
    const child = spawn(bin, ['serve', socket], { stdio: ['pipe', 'pipe', 'pipe'] });
    const agent = new GoStandInAgent(child, socket);
    await new Promise<void>((ready, fail) => {
      let buf = '';
      child.stdout.on('data', (d: Buffer) => {
        buf += d.toString();
        let nl = buf.indexOf('\n');
        while (nl >= 0) {
          const line = JSON.parse(buf.slice(0, nl)) as Record<string, unknown>;
          buf = buf.slice(nl + 1);
          if ('ready' in line) ready();
          else agent.calls.push(line as unknown as GoAgentCall);
          nl = buf.indexOf('\n');
        }
      });
      child.once('exit', (code) => fail(new Error(`Go stand-in agent exited early (${code})`)));
    });
    return agent;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.stdin.end(); // it exits when its stdin closes
    await exited;
  }
}

export interface GoCall {
  service: string;
  method: string;
  /** Base64, as Go's encoding/json reads []byte. */
  payload?: string;
  metadata?: Record<string, string[]>;
  timeout_ms?: number;
}

export interface GoResult {
  code: number;
  message: string;
  details: { type_url: string; value: string }[];
  payload: string | null;
  error?: string;
}

/** Runs the Go client: all calls concurrently on one connection to `address` (`unix:…` or `tcp:…`). */
export function goCalls(bin: string, address: string, calls: GoCall[]): Promise<GoResult[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ['call', address], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`Go client exited ${code}: ${err}`));
      else resolve(JSON.parse(out) as GoResult[]);
    });
    child.stdin.end(JSON.stringify(calls));
  });
}
