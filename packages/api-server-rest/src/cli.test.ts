import http from 'node:http';
import net from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { main } from './cli.js';

describe('command line (upstream clap flags)', () => {
  async function parse(argv: string[]) {
    const r = { code: 0, out: '', err: '' };
    r.code = await main(argv, {
      out: (t) => {
        r.out += t;
      },
      err: (t) => {
        r.err += t;
      },
      env: {},
    });
    return r;
  }

  it.each([
    [['--features'], "option '--features' needs a value"],
    [['-f'], "option '-f' needs a value"],
    [['--features', 'all', '--features', 'all'], "option '--features' given more than once"],
    [['--feature', 'all'], "unknown option '--feature'"],
    [['--cdh-addr', 'x'], "unknown option '--cdh-addr'"],
    [['-x'], "unknown option '-x'"],
    [['all'], "unexpected argument 'all'"],
    [['-'], "unexpected argument '-'"],
  ])('%j is a usage error, status 2', async (argv, message) => {
    expect(await parse(argv)).toEqual({
      code: 2,
      out: '',
      err: `api-server-rest: ${message}\nRun 'api-server-rest --help' for usage.\n`,
    });
  });

  it.each([
    [['--help'], 'Usage: api-server-rest'],
    [['-h'], 'Usage: api-server-rest'],
    [['--features', 'all', '-V'], 'api-server-rest 0.1.0 (broker dev)\n'],
    [['--version'], 'api-server-rest 0.1.0 (broker dev)\n'],
  ])('%j prints %s', async (argv, text) => {
    const r = await parse(argv);
    expect(r.code).toBe(0);
    expect(r.out).toContain(text);
  });
});

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

function get(port: number, path: string): Promise<{ status: number; body: string } | null> {
  return new Promise((resolve) => {
    http
      .get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
        let body = '';
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', () => resolve(null));
  });
}

describe('main', () => {
  let out: string;
  let err: string;
  const saved = { ...process.env };
  beforeEach(() => {
    out = '';
    err = '';
    process.env.RUST_LOG = 'error';
    vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => {
      out += String(c);
      return true;
    });
    vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
      err += String(c);
      return true;
    });
  });
  afterEach(() => {
    vi.restoreAllMocks();
    process.env = { ...saved };
  });

  it('prints help and version', async () => {
    expect(await main(['--help'])).toBe(0);
    expect(out).toContain('--features <FEATURES>');
    expect(out).toContain('[default: unix:///run/confidential-containers/cdh.sock]');
    out = '';
    expect(await main(['-V'])).toBe(0);
    expect(out).toBe('api-server-rest 0.1.0 (broker dev)\n');
  });

  it('exits 2 on a malformed command line', async () => {
    expect(await main(['--bogus'])).toBe(2);
    expect(err).toBe("api-server-rest: unknown option '--bogus'\nRun 'api-server-rest --help' for usage.\n");
  });

  it('exits 1 on an unknown feature, as upstream', async () => {
    expect(await main(['--features', 'everything'])).toBe(1);
    expect(err).toContain('Unknown features. Supported features are: resource, attestation, all.');
  });

  it('exits 1 on a bad bind address, a bad ttrpc address or a bad timeout', async () => {
    expect(await main(['--bind', 'localhost:8006'])).toBe(1);
    expect(err).toMatch(/invalid bind address/);
    expect(await main(['--bind', '127.0.0.1:0', '--cdh_addr', 'http://x'])).toBe(1);
    expect(err).toMatch(/invalid ttrpc address/);
    process.env.API_SERVER_REST_TTRPC_TIMEOUT_MS = '5s';
    expect(await main(['--bind', '127.0.0.1:0'])).toBe(1);
    expect(err).toMatch(/API_SERVER_REST_TTRPC_TIMEOUT_MS must be a positive number/);
  });

  it('exits 1 when the port is taken', async () => {
    const srv = net.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const { port } = srv.address() as net.AddressInfo;
    try {
      expect(await main(['--bind', `127.0.0.1:${port}`])).toBe(1);
      expect(err).toMatch(/cannot listen on 127\.0\.0\.1:\d+: listen EADDRINUSE/);
    } finally {
      srv.close();
    }
  });

  it.each(['SIGTERM', 'SIGINT'] as const)(
    'serves until %s, then exits 0 and leaves no listener',
    async (signal) => {
      const port = await freePort();
      const before = process.listenerCount(signal);
      const running = main([
        '--features',
        'all',
        '--bind',
        `127.0.0.1:${port}`,
        '--cdh_addr',
        '/nonexistent/cdh.sock',
        '-a',
        '/nonexistent/aa.sock',
      ]);
      let info: { status: number; body: string } | null = null;
      for (let i = 0; i < 200 && info === null; i++) {
        info = await get(port, '/info');
        if (info === null) await new Promise((r) => setTimeout(r, 25));
      }
      expect(info?.status).toBe(500);
      const res = await get(port, '/cdh/resource/default/key/1');
      expect(res?.status).toBe(500);
      expect(res?.body).toMatch(/^ttrpc connect to CDH addr: \/nonexistent\/cdh\.sock failed: /);
      process.kill(process.pid, signal);
      expect(await running).toBe(0);
      expect(process.listenerCount(signal)).toBe(before);
      expect(await get(port, '/info')).toBeNull();
    },
  );
});
