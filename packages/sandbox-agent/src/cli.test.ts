import { spawn } from 'node:child_process';
import { realpath, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Code, TtrpcClient, type TtrpcError } from '@broker/ttrpc';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from './cli.js';
import { codec } from './proto.js';
import type { RunningAgent } from './server.js';
import { tempDir } from './testing/index.js';

describe('sandbox-agent command', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
  });
  afterAll(() => cleanup());

  const run = async (argv: string[]) => {
    let out = '';
    let err = '';
    const code = await main(argv, {
      stdout: (t) => {
        out += t;
      },
      stderr: (t) => {
        err += t;
      },
    });
    return { code, out, err };
  };

  it('prints its help with the exit statuses', async () => {
    const r = await run(['--help']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^Usage: sandbox-agent \[OPTIONS\]/);
    expect(r.out).toMatch(/\nExit status:\n {2}0 {2}.+\n {2}1 {2}.+\n {2}2 {2}.+/);
  });

  it("refuses kata's vsock address as a usage error that says why", async () => {
    const r = await run(['--listen', 'vsock://-1:1024']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/cannot listen on vsock:\/\/-1:1024: Node\.js has no AF_VSOCK sockets/);
  });

  it('serves on a unix socket until stopped', async () => {
    const socket = join(dir, 'agent.sock');
    const stop = new AbortController();
    const lines: string[] = [];
    let ready: (a: RunningAgent) => void = () => {};
    const listening = new Promise<RunningAgent>((r) => {
      ready = r;
    });
    const exited = main(
      [
        ...['--listen', `unix://${socket}`, '--root', join(dir, 'kata'), '--state-dir', join(dir, 'state')],
        '--no-data-hub',
      ],
      { signal: stop.signal, logDestination: { write: (l) => void lines.push(l) }, onListening: ready },
    );
    await listening;
    const client = await TtrpcClient.connect({ path: socket });
    const e = (await client
      .call('grpc.AgentService', 'GetMetrics', new Uint8Array(0))
      .catch((x) => x)) as TtrpcError;
    expect([e.code, e.message]).toEqual([
      Code.UNIMPLEMENTED,
      'GetMetrics is not implemented by sandbox-agent',
    ]);
    client.close();
    stop.abort();
    expect(await exited).toBe(0);
    const serving = JSON.parse(lines.find((l) => l.includes('sandbox-agent serving'))!);
    expect(serving.listen).toEqual([`unix://${socket}`]);
    expect(serving.implemented).toContain('CreateContainer');
  });
});

// Root: CreateSandbox makes the pod's IPC and UTS namespaces.
describe.skipIf(process.getuid?.() !== 0)('sandbox-agent as a process', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let bundle: string;
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    const entry = join(dir, 'entry.mjs');
    await writeFile(
      entry,
      `import { main } from ${JSON.stringify(resolve(import.meta.dirname, 'cli.ts'))};\nmain(process.argv.slice(2)).then((c) => { process.exitCode = c; });\n`,
    );
    bundle = join(dir, 'sandbox-agent.mjs');
    await build({
      entryPoints: [entry],
      outfile: bundle,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node24',
      logLevel: 'silent',
      banner: {
        js: "import { createRequire as brokerCreateRequire } from 'node:module'; const require = brokerCreateRequire(import.meta.url);",
      },
    });
  });
  afterAll(() => cleanup());

  it('outlives the reader of its log: with stdout gone, SIGTERM still removes what the pod left', async () => {
    const socket = join(dir, 'agent.sock');
    const root = join(dir, 'kata');
    const child = spawn(
      process.execPath,
      [
        bundle,
        '--listen',
        `unix://${socket}`,
        '--root',
        root,
        '--state-dir',
        join(dir, 'state'),
        '--no-data-hub',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    await new Promise<void>((resolve) => {
      child.stdout.on('data', (d: Buffer) => {
        if (d.toString().includes('sandbox-agent serving')) resolve();
      });
    });
    const client = await TtrpcClient.connect({ path: socket });
    const emptyDir = join(await realpath(root), 'sandbox/local/scratch');
    await client.call(
      'grpc.AgentService',
      'CreateSandbox',
      codec('CreateSandboxRequest').encode({
        sandbox_id: 'p',
        storages: [{ driver: 'local', mount_point: emptyDir }],
      }),
    );
    client.close();
    expect((await stat(emptyDir)).isDirectory()).toBe(true);
    // Whoever read the log is gone: the next line written meets EPIPE.
    child.stdout.destroy();
    child.kill('SIGTERM');
    expect([await exited, stderr]).toEqual([0, '']);
    await expect(stat(emptyDir)).rejects.toThrow(/ENOENT/);
  });
});
