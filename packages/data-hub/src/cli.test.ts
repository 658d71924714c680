import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { join, resolve } from 'node:path';
import { DataHubClient } from '@broker/guest-api';
import { build } from 'esbuild';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { main } from './cli.js';
import type { RunningDataHub } from './server.js';
import { tempDir } from './testing/helpers.js';

describe('command line (clap, `-c` only)', () => {
  async function parse(argv: string[]) {
    const r = { code: 0, out: '', err: '' };
    r.code = await main(argv, {
      env: {},
      stdout: (t) => {
        r.out += t;
      },
      stderr: (t) => {
        r.err += t;
      },
    });
    return r;
  }

  it.each([
    [['-c'], "option '-c' needs a value"],
    [['--config', 'x'], "unknown option '--config'"],
    [['cdh.toml'], "unexpected argument 'cdh.toml'"],
    [['-c', 'a', '-c', 'b'], "option '-c' given more than once"],
  ])('refuses %j as clap does, status 2', async (argv, message) => {
    expect(await parse(argv)).toEqual({
      code: 2,
      out: '',
      err: `confidential-data-hub: ${message}\nRun 'confidential-data-hub --help' for usage.\n`,
    });
  });

  it.each([['-ccdh.toml'], ['-c=cdh.toml']])('reads %s as the file cdh.toml', async (arg) => {
    const r = await parse([arg]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^confidential-data-hub: failed to read config file cdh\.toml: /);
  });
});

describe('main', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let out: string;
  let err: string;
  const io = () => ({
    stdout: (t: string) => {
      out += t;
    },
    stderr: (t: string) => {
      err += t;
    },
    env: {},
  });
  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir('cdh-cli-'));
    out = '';
    err = '';
  });
  afterEach(() => cleanup());

  it('prints help and version', async () => {
    expect(await main(['--help'], io())).toBe(0);
    expect(out).toMatch(/^Usage: confidential-data-hub \[OPTIONS\]/);
    expect(out).toContain('-c <CONFIG>');
    out = '';
    expect(await main(['-V'], io())).toBe(0);
    expect(out).toBe('confidential-data-hub 0.1.0 (broker dev)\n');
  });

  it('exits 2 on a usage error, 1 on a bad config', async () => {
    expect(await main(['--bogus'], io())).toBe(2);
    expect(err).toBe(
      "confidential-data-hub: unknown option '--bogus'\nRun 'confidential-data-hub --help' for usage.\n",
    );
    err = '';
    expect(await main(['-c', join(dir, 'missing.toml')], { ...io(), logStream: { write() {} } })).toBe(1);
    expect(err).toMatch(
      /^confidential-data-hub: failed to read config file .*missing\.toml: no such file or directory; check/,
    );
    err = '';
    await writeFile(join(dir, 'bad.toml'), '[kbc]\nname = "nope"\n');
    expect(await main(['-c', join(dir, 'bad.toml')], { ...io(), logStream: { write() {} } })).toBe(1);
    expect(err).toContain('unknown kbc name nope');
  });

  it('names the file, the line and the column of a TOML syntax error, and what to do, in one line', async () => {
    const bad = join(dir, 'syntax.toml');
    await writeFile(bad, 'socket = "unix:///run/cdh.sock"\n[kbc\nname = "cc_kbc"\n');
    err = '';
    expect(await main(['-c', bad], { ...io(), logStream: { write() {} } })).toBe(1);
    expect(err.trim().split('\n')).toEqual([
      `confidential-data-hub: failed to read config file ${bad}: Invalid TOML document: ` +
        'illegal character in key (line 2, column 5); correct the file at that place and start confidential-data-hub again',
    ]);
  });

  it('exits 1 when start-up fails (credential path refused)', async () => {
    const cfg = join(dir, 'cdh.toml');
    await writeFile(
      cfg,
      `socket = "unix://${join(dir, 'cdh.sock')}"\n[kbc]\nname = "offline_fs_kbc"\n[[credentials]]\nresource_uri = "kbs:///a/b/c"\npath = "/etc/shadow"\n`,
    );
    const logs: string[] = [];
    expect(
      await main(['-c', cfg], {
        ...io(),
        env: {},
        kernelCmdline: '',
        logStream: { write: (l) => logs.push(l) },
      }),
    ).toBe(1);
    expect(err).toBe(
      'confidential-data-hub: create CDH instance: init Hub failed: illegal path to put credential : /etc/shadow\n',
    );
    // Said once, on stderr, not again in the log.
    expect(logs.join('')).not.toContain('illegal path');
    expect(existsSync(join(dir, 'cdh.sock'))).toBe(false);
  });

  it('creates the socket folder, replaces a stale socket, serves, and stops cleanly', async () => {
    const sockDir = join(dir, 'run', 'confidential-containers');
    const sock = join(sockDir, 'cdh.sock');
    await mkdir(sockDir, { recursive: true });
    // A previous instance that died: its socket file is still there.
    const old = net.createServer();
    await new Promise<void>((r) => old.listen(sock, r));
    const resources = join(dir, 'offline.json');
    await writeFile(resources, JSON.stringify({ 'default/key/one': Buffer.from('v').toString('base64') }));
    const cfg = join(dir, 'cdh.toml');
    await writeFile(
      cfg,
      `socket = "unix://${join(dir, 'run', 'new', 'cdh.sock')}"\n[kbc]\nname = "offline_fs_kbc"\n[log]\nlevel = "debug"\n`,
    );
    // First run: a folder that does not exist yet.
    const stop = new AbortController();
    const logs: string[] = [];
    let running: RunningDataHub | undefined;
    const listening = new Promise<void>((resolveListening) => {
      void main(['-c', cfg], {
        ...io(),
        env: { RUST_LOG: 'warn' },
        kernelCmdline: '',
        stop: stop.signal,
        logStream: { write: (l) => logs.push(l) },
        hubOptions: { offlineFsKbcFiles: [resources] },
        onListening: (hub) => {
          running = hub;
          resolveListening();
        },
      }).then((code) => {
        exitCode = code;
      });
    });
    let exitCode: number | undefined;
    await listening;
    expect(running?.address.path).toBe(join(dir, 'run', 'new', 'cdh.sock'));
    const client = await DataHubClient.connect(`unix://${join(dir, 'run', 'new', 'cdh.sock')}`);
    expect(Buffer.from(await client.getResource('kbs:///default/key/one')).toString()).toBe('v');
    client.close();
    // RUST_LOG=warn overrides [log] level = "debug": no info lines.
    expect(logs.some((l) => l.includes('"level":"info"'))).toBe(false);
    stop.abort();
    await expect.poll(() => exitCode).toBe(0);
    expect(existsSync(join(dir, 'run', 'new', 'cdh.sock'))).toBe(false);

    // Second run on the stale socket's path.
    await writeFile(cfg, `socket = "unix://${sock}"\n[kbc]\nname = "offline_fs_kbc"\n`);
    const stop2 = new AbortController();
    const code2 = main(['-c', cfg], {
      ...io(),
      env: {},
      kernelCmdline: '',
      stop: stop2.signal,
      logStream: { write() {} },
      hubOptions: { offlineFsKbcFiles: [resources] },
      onListening: () => stop2.abort(),
    });
    expect(await code2).toBe(0);
    old.close();
  });
});

describe('as a process', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let bundle: string;
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('cdh-proc-'));
    const entry = join(dir, 'entry.ts');
    await writeFile(
      entry,
      `import { main } from ${JSON.stringify(resolve(import.meta.dirname, 'cli.ts'))};\nmain(process.argv.slice(2)).then((c) => { process.exitCode = c; });\n`,
    );
    bundle = join(dir, 'cdh.mjs');
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

  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  });

  async function run(signal: NodeJS.Signals): Promise<{ code: number | null; output: string }> {
    const sock = join(dir, `${signal}.sock`);
    const cfg = join(dir, `${signal}.toml`);
    await writeFile(cfg, `socket = "unix://${sock}"\n[kbc]\nname = "offline_fs_kbc"\n`);
    const child = spawn(process.execPath, [bundle, '-c', cfg], {
      env: { PATH: process.env.PATH ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let output = '';
    child.stdout?.on('data', (d: Buffer) => {
      output += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      output += d.toString();
    });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    await expect
      .poll(() => existsSync(sock) || child.exitCode !== null, { timeout: 20_000, interval: 20 })
      .toBe(true);
    expect(child.exitCode, output).toBeNull();
    const client = await DataHubClient.connect(sock);
    const e = await client.getResource('kbs:///default/key/none').catch((x: unknown) => x as Error);
    expect((e as Error).message).toBe('[CDH] [ERROR]: Get Resource failed');
    await expect.poll(() => output).toContain('offline-fs-kbc: resource not found default/key/none');
    client.close();
    child.kill(signal);
    const code = await exited;
    expect(existsSync(sock)).toBe(false);
    return { code, output };
  }

  it('shuts down cleanly on SIGTERM', async () => {
    const { code, output } = await run('SIGTERM');
    expect(code).toBe(0);
    expect(output).toContain('Welcome to Confidential Containers Confidential Data Hub (ttRPC version)!');
    expect(output).toContain('SIGTERM received, gracefully shutdown.');
  });

  it('fails at once, naming the path, when the socket folder cannot be created', async () => {
    const cfg = join(dir, 'proc.toml');
    await writeFile(
      cfg,
      'socket = "unix:///proc/broker-cdh-test/cdh.sock"\n[kbc]\nname = "offline_fs_kbc"\n',
    );
    const child = spawn(process.execPath, [bundle, '-c', cfg], {
      env: { PATH: process.env.PATH ?? '' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(child);
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    // Node's recursive mkdir spun here at full CPU, never exiting.
    const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    expect(code).toBe(1);
    expect(stderr).toMatch(/^confidential-data-hub: .*cannot create directory \/proc\/broker-cdh-test/);
  });

  it('shuts down cleanly on SIGINT', async () => {
    const { code, output } = await run('SIGINT');
    expect(code).toBe(0);
    expect(output).toContain('SIGINT received, gracefully shutdown.');
  });
});
