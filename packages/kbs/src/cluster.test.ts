// `worker_count` with real processes: the `kbs` command (bundled from this source) runs a primary and two
// node:cluster workers on LocalFs; the test kills workers with SIGKILL and reads the exit status.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

let dir: string;
let bundle: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kbs-cluster-'));
  const entry = join(dir, 'entry.ts');
  writeFileSync(
    entry,
    `import { main } from ${JSON.stringify(resolve(import.meta.dirname, 'cli.ts'))};\nmain(process.argv.slice(2)).then((c) => { process.exitCode = c; });\n`,
  );
  bundle = join(dir, 'kbs.mjs');
  await build({
    entryPoints: [entry],
    outfile: bundle,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    logLevel: 'silent',
    banner: {
      js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
    },
  });
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

function configText(port: number, storage: string): string {
  return `[http_server]\nsockets = ["127.0.0.1:${port}"]\ninsecure_http = true\nworker_count = 2\n[admin]\nauthorization_mode = "DenyAll"\n[attestation_token]\ninsecure_header_jwk = true\n[storage_backend]\nstorage_type = "LocalFs"\n[storage_backend.backends.local_fs]\ndir_path = "${storage}"\n`;
}

interface Primary {
  readonly child: ChildProcess;
  readonly port: number;
  readonly config: string;
  output(): string;
  readonly exited: Promise<number | null>;
}

async function startPrimary(name: string): Promise<Primary> {
  const port = await freePort();
  const config = join(dir, `${name}.toml`);
  writeFileSync(config, configText(port, join(dir, `${name}-store`)));
  const child = spawn(process.execPath, [bundle, '--config-file', config], {
    env: { PATH: process.env.PATH ?? '', KBS_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const p = { child, port, config, output: () => out, exited };
  await until(p, () => out.includes('KBS workers listening'));
  return p;
}

/** Polls `probe` until it holds; fails with the KBS output once the primary exited or after 30 s. */
async function until(
  p: Pick<Primary, 'child' | 'output'>,
  probe: () => boolean | Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await probe())) {
    if (p.child.exitCode !== null) throw new Error(`primary exited with ${p.child.exitCode}:\n${p.output()}`);
    if (Date.now() > deadline) throw new Error(`condition not reached:\n${p.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function workerPids(p: Primary): number[] {
  const file = `/proc/${p.child.pid}/task/${p.child.pid}/children`;
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}

function healthy(port: number): Promise<boolean> {
  return new Promise((res) => {
    const req = request({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (r) => {
      r.resume();
      res(r.statusCode === 200);
    });
    req.on('error', () => res(false));
    req.end();
  });
}

const count = (text: string, needle: string) => text.split(needle).length - 1;

describe('worker_count supervision with real processes', () => {
  it('starts new workers when both are killed at once, and exits 0 on SIGTERM', async () => {
    const p = await startPrimary('both');
    const before = workerPids(p);
    expect(before).toHaveLength(2);
    for (const pid of before) process.kill(pid, 'SIGKILL');
    await until(p, () => count(p.output(), 'starting a new one') === 2);
    await until(p, () => {
      const now = workerPids(p);
      return now.length === 2 && now.every((pid) => !before.includes(pid));
    });
    await until(p, () => count(p.output(), 'replacement KBS worker listening') === 2);
    await until(p, () => healthy(p.port));
    expect(p.child.exitCode).toBeNull();
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 90_000);

  it('exits 1 when a replacement worker cannot start', async () => {
    const p = await startPrimary('broken');
    // The next worker reads a configuration it refuses.
    writeFileSync(p.config, '[http_server]\nno_such_key = 1\n');
    const [first] = workerPids(p);
    process.kill(first as number, 'SIGKILL');
    expect(await p.exited).toBe(1);
    expect(p.output()).toContain('a KBS worker could not start; stopping');
  }, 90_000);

  it('exits 1 when workers keep crashing', async () => {
    const p = await startPrimary('crashing');
    // More than 5 crashes of serving workers within a minute.
    for (let i = 1; i <= 6; i++) {
      // The previous replacement serves (a worker killed before that counts as one that cannot start).
      await until(p, () => count(p.output(), 'replacement KBS worker listening') === i - 1);
      const [victim] = workerPids(p);
      process.kill(victim as number, 'SIGKILL');
      if (i < 6) await until(p, () => count(p.output(), 'starting a new one') === i);
    }
    expect(await p.exited).toBe(1);
    expect(p.output()).toContain('KBS workers keep crashing; stopping');
  }, 90_000);
});
