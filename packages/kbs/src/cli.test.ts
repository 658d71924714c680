import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { main } from './cli.js';
import { send } from './testing/client.js';

const dir = mkdtempSync(join(tmpdir(), 'kbs-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe('main', () => {
  function capture() {
    const lines = { out: '', err: '' };
    const io = {
      out: (t: string) => {
        lines.out += t;
      },
      err: (t: string) => {
        lines.err += t;
      },
      env: {},
    };
    return { lines, io };
  }

  it('prints the version and help, and exits 2 on bad usage', async () => {
    const { lines, io } = capture();
    expect(await main(['--version'], io)).toBe(0);
    expect(lines.out).toMatch(/^kbs \d+\.\d+\.\d+ \(broker dev\)\n$/);
    expect(await main(['-h'], io)).toBe(0);
    expect(lines.out).toContain('-c, --config-file <FILE>');
    expect(await main(['--bogus'], io)).toBe(2);
    expect(lines.err).toBe("kbs: unknown option '--bogus'\nRun 'kbs --help' for usage.\n");
  });

  it('takes KBS_CONFIG_FILE when no option is given, and needs one of them', async () => {
    const { lines, io } = capture();
    vi.stubEnv('KBS_CONFIG_FILE', join(dir, 'from-env.toml'));
    try {
      expect(await main([], io)).toBe(1);
      expect(lines.err).toMatch(
        /^kbs: configuration error: .*from-env\.toml.*no such file or directory[^\n]*\n$/,
      );
      vi.stubEnv('KBS_CONFIG_FILE', '');
      expect(await main([], io)).toBe(2);
      expect(lines.err).toContain("kbs: missing option '--config-file' (or KBS_CONFIG_FILE)\n");
      expect(await main(['-c'], io)).toBe(2);
      expect(lines.err).toContain("kbs: option '-c' needs a value\n");
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('exits 1 with the reason, printed once, when the configuration is refused', async () => {
    const path = join(dir, 'bad.toml');
    writeFileSync(path, '[http_server]\n[admin]\nauthorization_mode = "DenyAll"\n');
    const { lines, io } = capture();
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await main(['--config-file', path], io)).toBe(1);
      expect(lines.err).toMatch(/^kbs: configuration error: .*private_key and certificate missing[^\n]*\n$/);
      expect(out).not.toHaveBeenCalled();
    } finally {
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
