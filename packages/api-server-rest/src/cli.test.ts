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
    [['--plugins'], "option '--plugins' needs a value"],
    [['--plugins', 'a', '--plugins', 'b'], "option '--plugins' given more than once"],
    [['-p', 'nebula-ca'], "unknown option '-p'"],
    [
      ['--plugins', 'resource'],
      `invalid value for '--plugins': "resource" is not a plugin to allow: resources are always served at /cdh/resource/<path>`,
    ],
    [
      ['--plugins', 'Nebula'],
      `invalid value for '--plugins': "Nebula" is not a KBS plugin name (lower-case [a-z0-9][a-z0-9.-]*)`,
    ],
    [
      ['--plugins=nebula-ca,'],
      `invalid value for '--plugins': "nebula-ca," has an empty plugin name: list names separated by commas, e.g. nebula-ca,external`,
    ],
    [
      ['--features', 'attestation', '--plugins', 'nebula-ca'],
      "invalid value for '--plugins': --plugins needs the resource feature (--features resource or all)",
    ],
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
    expect(out).toContain('--plugins <PLUGINS>');
    expect(out).toContain('[default: none: only kbs:/// resources, at /cdh/resource/<path>]');
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

  it('serves /cdh/plugin only for the plugins given with --plugins', async () => {
    const port = await freePort();
    const running = main([
      '--bind',
      `127.0.0.1:${port}`,
      '--cdh_addr',
      '/nonexistent/cdh.sock',
      '--plugins',
      'nebula-ca',
    ]);
    let info: { status: number; body: string } | null = null;
    for (let i = 0; i < 200 && info === null; i++) {
      info = await get(port, '/info');
      if (info === null) await new Promise((r) => setTimeout(r, 25));
    }
    // Allowed: the data hub is asked (and is absent here).
    const allowed = await get(port, '/cdh/plugin/nebula-ca/credential?name=pod-1&ip=10.9.0.2/24');
    expect(allowed?.status).toBe(500);
    expect(allowed?.body).toMatch(/^ttrpc connect to CDH addr: \/nonexistent\/cdh\.sock failed: /);
    const refused = await get(port, '/cdh/plugin/external/echo/x');
    expect(refused).toEqual({
      status: 403,
      body: 'KBS plugin "external" is not enabled on this API: start api-server-rest with --plugins external to allow it',
    });
    process.kill(process.pid, 'SIGTERM');
    expect(await running).toBe(0);
  });

  it('serves no plugin without --plugins', async () => {
    const port = await freePort();
    const running = main(['--bind', `127.0.0.1:${port}`, '--cdh_addr', '/nonexistent/cdh.sock']);
    let r: { status: number; body: string } | null = null;
    for (let i = 0; i < 200 && r === null; i++) {
      r = await get(port, '/cdh/plugin/nebula-ca/credential?name=pod-1&ip=10.9.0.2/24');
      if (r === null) await new Promise((res) => setTimeout(res, 25));
    }
    expect(r?.status).toBe(403);
    expect(r?.body).toMatch(/--plugins nebula-ca to allow it$/);
    process.kill(process.pid, 'SIGTERM');
    expect(await running).toBe(0);
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
