import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { main, parseArgs } from './cli.js';
import { send } from './testing/client.js';

const dir = mkdtempSync(join(tmpdir(), 'kbs-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('parseArgs', () => {
  it.each([
    [['--config-file', 'a.toml'], { kind: 'run', configFile: 'a.toml' }],
    [['-c', 'b.toml'], { kind: 'run', configFile: 'b.toml' }],
    [['--config-file=c.toml'], { kind: 'run', configFile: 'c.toml' }],
    [['--help'], { kind: 'help' }],
    [['-V'], { kind: 'version' }],
  ])('%j', (argv, want) => {
    expect(parseArgs(argv, {})).toEqual(want);
  });

  it('takes KBS_CONFIG_FILE when no flag is given, and refuses anything else', () => {
    expect(parseArgs([], { KBS_CONFIG_FILE: '/etc/kbs.toml' })).toEqual({
      kind: 'run',
      configFile: '/etc/kbs.toml',
    });
    expect(parseArgs([], {}).kind).toBe('error');
    expect(parseArgs(['-c'], {}).kind).toBe('error');
    expect(parseArgs(['--port', '1'], {}).kind).toBe('error');
  });
});

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe('main', () => {
  it('prints the version and help, and exits 2 on bad usage', async () => {
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(await main(['--version'])).toBe(0);
      expect(String(out.mock.calls[0]?.[0])).toMatch(/^kbs \d+\.\d+\.\d+/);
      expect(await main(['--help'])).toBe(0);
      expect(await main(['--bogus'])).toBe(2);
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  });

  it('exits 1 with the reason when the configuration is refused', async () => {
    const path = join(dir, 'bad.toml');
    writeFileSync(path, '[http_server]\n[admin]\nauthorization_mode = "DenyAll"\n');
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await main(['--config-file', path])).toBe(1);
      expect(err.mock.calls.map((c) => String(c[0])).join('')).toMatch(/private_key and certificate missing/);
    } finally {
      err.mockRestore();
      out.mockRestore();
    }
  });

  it.each([
    ['RUST_LOG', 'verbose'],
    ['RUST_LOG', 'kbs=loud'],
    ['KBS_LOG_LEVEL', 'chatty'],
  ])('exits 1 naming the variable when %s = %s is not a log level', async (variable, value) => {
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    vi.stubEnv(variable, value);
    try {
      expect(await main(['--config-file', join(dir, 'never-read.toml')])).toBe(1);
      const text = err.mock.calls.map((c) => String(c[0])).join('');
      expect(text).toMatch(new RegExp(`^kbs: ${variable}: "${value}" is not a log level`));
    } finally {
      vi.unstubAllEnvs();
      err.mockRestore();
    }
  });

  it('serves until SIGTERM, then closes and resolves 0', async () => {
    const port = await freePort();
    const path = join(dir, 'kbs.toml');
    writeFileSync(
      path,
      `[http_server]\nsockets = ["127.0.0.1:${port}"]\ninsecure_http = true\n[attestation_token]\ninsecure_header_jwk = true\n[admin]\nauthorization_mode = "DenyAll"\n`,
    );
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      const done = main(['-c', path]);
      let health = 0;
      for (let i = 0; i < 100 && health !== 200; i++) {
        health = await send(`http://127.0.0.1:${port}/healthz`).then(
          (r) => r.status,
          () => 0,
        );
        if (health !== 200) await new Promise((r) => setTimeout(r, 50));
      }
      expect(health).toBe(200);
      process.emit('SIGTERM', 'SIGTERM');
      expect(await done).toBe(0);
      await expect(send(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    } finally {
      out.mockRestore();
    }
  });
});
