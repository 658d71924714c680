import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { BackendError } from './backends.js';
import { ApiServerError } from './errors.js';
import {
  type ApiServer,
  type ApiServerOptions,
  InvalidBindAddress,
  parseBindAddress,
  startApiServer,
} from './server.js';
import { FakeAttestationAgent, FakeDataHub } from './testing/helpers.js';

interface Response {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** One request with node's client, which sends the path exactly as given (no normalisation). */
function send(
  server: ApiServer,
  method: string,
  path: string,
  opts: { body?: string | Buffer; headers?: http.OutgoingHttpHeaders; host?: string } = {},
): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: opts.host ?? server.address.host,
        port: server.address.port,
        method,
        path,
        headers: opts.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Writes raw bytes and collects everything the server sends until it closes the connection. */
function raw(server: ApiServer, bytes: string | Buffer, { end = false } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(server.address.port, server.address.host);
    const chunks: Buffer[] = [];
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    sock.on('error', (err: NodeJS.ErrnoException) => {
      // A reset after the answer was sent still counts as an answer.
      if (err.code === 'ECONNRESET' && chunks.length > 0) return;
      reject(err);
    });
    sock.write(bytes);
    if (end) sock.end();
  });
}

class Lines extends Writable {
  readonly lines: Record<string, unknown>[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void) {
    for (const l of chunk.toString().split('\n')) if (l.trim() !== '') this.lines.push(JSON.parse(l));
    cb();
  }
}

const servers: ApiServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close({ graceMs: 100 })));
});

async function start(options: Partial<ApiServerOptions> = {}) {
  const cdh = new FakeDataHub({ 'kbs:///default/key/1': 'secret-bytes' });
  const aa = new FakeAttestationAgent();
  const log = new Lines();
  const server = await startApiServer({
    features: 'all',
    bind: '127.0.0.1:0',
    resourceBackend: cdh,
    attestationBackend: aa,
    logger: pino({ level: 'debug' }, log),
    ...options,
  });
  servers.push(server);
  return { server, cdh, aa, log };
}

describe('parseBindAddress', () => {
  it('accepts IPv4:port and [IPv6]:port', () => {
    expect(parseBindAddress('127.0.0.1:8006')).toEqual({ host: '127.0.0.1', port: 8006 });
    expect(parseBindAddress('[::1]:0')).toEqual({ host: '::1', port: 0 });
    expect(parseBindAddress('0.0.0.0:65535')).toEqual({ host: '0.0.0.0', port: 65535 });
  });

  it.each([
    'localhost:8006',
    '127.0.0.1',
    '127.0.0.1:',
    '127.0.0.1:65536',
    '127.0.0.1:-1',
    '::1:8006',
    '[127.0.0.1]:80',
    '[fe80::1%eth0]:80',
    ':8006',
    '',
    '127.0.0.1:80 ',
  ])('rejects %j', (bind) => {
    expect(() => parseBindAddress(bind)).toThrow(InvalidBindAddress);
  });
});

describe('startApiServer over HTTP', () => {
  it('serves a resource as octets with a length', async () => {
    const { server, cdh } = await start();
    const r = await send(server, 'GET', '/cdh/resource/default/key/1');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/octet-stream');
    expect(r.headers['content-length']).toBe('12');
    expect(r.body.toString()).toBe('secret-bytes');
    expect(cdh.calls).toEqual(['kbs:///default/key/1']);
    expect(server.url).toBe(`http://127.0.0.1:${server.address.port}`);
  });

  it('answers HEAD on a resource with headers only', async () => {
    const { server } = await start();
    const r = await send(server, 'HEAD', '/cdh/resource/default/key/1');
    expect([r.status, r.headers['content-length'], r.body.length]).toEqual([200, '12', 0]);
  });

  it('serves /info, tokens, evidence and aael', async () => {
    const { server } = await start();
    const info = await send(server, 'GET', '/info');
    expect(info.headers['content-type']).toBe('application/json');
    expect(JSON.parse(info.body.toString())).toMatchObject({ tee: 'sample', feature: 'all' });
    expect((await send(server, 'GET', '/aa/token?token_type=kbs')).status).toBe(200);
    const ev = await send(server, 'GET', '/aa/evidence?runtime_data=eHh4eA&encoding=base64');
    expect(ev.body.toString()).toBe('{"svn":"1","report_data":"eHh4eA=="}');
    const aael = await send(server, 'POST', '/aa/aael', {
      body: '{"domain":"d","operation":"o","content":"c"}',
      headers: { 'content-type': 'application/json' },
    });
    expect([aael.status, aael.body.toString()]).toEqual([200, '{"success":"true"}']);
  });

  it('sends plain-text error bodies', async () => {
    const { server, cdh } = await start();
    cdh.failure = new BackendError('ttrpc request error: INTERNAL: [CDH] [ERROR]: boom');
    const r = await send(server, 'GET', '/cdh/resource/default/key/1');
    expect([r.status, r.headers['content-type'], r.body.toString()]).toEqual([
      500,
      'text/plain; charset=utf-8',
      'ttrpc request error: INTERNAL: [CDH] [ERROR]: boom',
    ]);
    const nf = await send(server, 'GET', '/nope');
    expect([nf.status, nf.body.toString()]).toEqual([404, 'URL NOT FOUND']);
  });

  it('serves several requests on one keep-alive connection', async () => {
    const { server } = await start();
    const req = 'GET /info HTTP/1.1\r\nHost: x\r\n\r\n';
    const out = await raw(server, `${req}${req}GET /info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(out.match(/HTTP\/1\.1 200 OK/g)).toHaveLength(3);
  });

  it('accepts HTTP/1.0 without a Host header and absolute-form targets', async () => {
    const { server, cdh } = await start();
    const a = await raw(server, 'GET /info HTTP/1.0\r\n\r\n');
    expect(a).toMatch(/^HTTP\/1\.1 200 OK/);
    const b = await raw(
      server,
      'GET http://127.0.0.1:8006/cdh/resource/default/key/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    expect(b).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(b.endsWith('secret-bytes')).toBe(true);
    expect(cdh.calls).toEqual(['kbs:///default/key/1']);
  });
});

describe('peer check over HTTP', () => {
  it('answers 403 Forbidden and closes the connection for a refused peer', async () => {
    const { server, cdh } = await start({ allowPeer: () => false });
    const r = await send(server, 'GET', '/cdh/resource/default/key/1');
    expect([r.status, r.body.toString(), r.headers.connection]).toEqual([403, 'Forbidden', 'close']);
    expect(cdh.calls).toEqual([]);
  });

  it('gives the router the real peer address', async () => {
    const seen: (string | undefined)[] = [];
    const { server } = await start({
      allowPeer: (a) => {
        seen.push(a);
        return true;
      },
    });
    await send(server, 'GET', '/info');
    expect(seen).toEqual(['127.0.0.1']);
  });

  const external = Object.values(os.networkInterfaces())
    .flat()
    .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal)?.address;

  it.skipIf(external === undefined)('refuses a peer on a non-loopback address with 403', async () => {
    const { server, cdh } = await start({ bind: `${external}:0` });
    const r = await send(server, 'GET', '/cdh/resource/default/key/1');
    expect([r.status, r.body.toString()]).toEqual([403, 'Forbidden']);
    expect(cdh.calls).toEqual([]);
  });

  it('serves IPv6 loopback', async () => {
    const { server } = await start({ bind: '[::1]:0' });
    expect(server.url).toBe(`http://[::1]:${server.address.port}`);
    expect((await send(server, 'GET', '/info')).status).toBe(200);
  });
});

describe('hostile requests', () => {
  it('answers 431 to a URL longer than the header limit, and keeps serving', async () => {
    const { server, cdh } = await start();
    const out = await raw(server, `GET /cdh/resource/${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(out).toMatch(/^HTTP\/1\.1 431 /);
    expect(cdh.calls).toEqual([]);
    expect((await send(server, 'GET', '/info')).status).toBe(200);
  });

  it('answers 431 to too many header fields', async () => {
    const { server } = await start({ limits: { maxHeaders: 8 } });
    const headers = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-h${i}`, 'v']));
    // node's client adds Host and Connection.
    expect((await send(server, 'GET', '/info', { headers: headers(6) })).status).toBe(200);
    const r = await send(server, 'GET', '/info', { headers: headers(7) });
    expect([r.status, r.body.toString()]).toEqual([431, 'Request Header Fields Too Large']);
  });

  it('answers 413 to a declared body over the cap without reading it', async () => {
    const { server, aa } = await start({ limits: { maxBodyBytes: 100 } });
    const out = await raw(server, 'POST /aa/aael HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n{"do');
    expect(out).toMatch(/^HTTP\/1\.1 413 Payload Too Large/);
    expect(out).toMatch(/Connection: close/i);
    expect(aa.calls).toEqual([]);
  });

  it('answers 413 to a chunked body that grows over the cap', async () => {
    const { server, aa } = await start({ limits: { maxBodyBytes: 100 } });
    const chunk = `64\r\n${'x'.repeat(100)}\r\n`;
    const out = await raw(
      server,
      `POST /aa/aael HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${chunk}${chunk}${chunk}`,
    );
    expect(out).toMatch(/^HTTP\/1\.1 413 /);
    expect(aa.calls).toEqual([]);
  });

  it('accepts a body exactly at the cap', async () => {
    const body = '{"domain":"d","operation":"o","content":"c"}';
    const { server, aa } = await start({ limits: { maxBodyBytes: body.length } });
    expect((await send(server, 'POST', '/aa/aael', { body })).status).toBe(200);
    expect(aa.calls).toHaveLength(1);
  });

  it.each([
    ['garbage', 'GARBAGE\r\n\r\n'],
    ['binary junk', Buffer.from([0, 1, 2, 255, 254, 13, 10, 13, 10])],
    ['a bad version', 'GET /info HTTP/9.9\r\n\r\n'],
    ['a control character in the target', 'GET /info\x01 HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['a space in the target', 'GET /cdh/resource/a b/c HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['a bad header line', 'GET /info HTTP/1.1\r\nno colon here\r\n\r\n'],
    ['conflicting lengths', 'POST /aa/aael HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab'],
    ['a bad chunk size', 'POST /aa/aael HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
  ])('answers 400 to %s and keeps serving', async (_why, bytes) => {
    const { server, aa, cdh } = await start();
    const out = await raw(server, bytes);
    expect(out).toMatch(/^HTTP\/1\.1 400 Bad Request/);
    expect(aa.calls).toEqual([]);
    expect(cdh.calls).toEqual([]);
    expect((await send(server, 'GET', '/info')).status).toBe(200);
  });

  it('survives a connection dropped in the middle of a request', async () => {
    const { server } = await start();
    await raw(server, 'POST /aa/aael HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"dom', { end: true });
    await raw(server, 'GET /cdh/res', { end: true });
    expect((await send(server, 'GET', '/info')).status).toBe(200);
  });

  it('passes traversal attempts and bad escapes to the data hub verbatim', async () => {
    const { server, cdh } = await start();
    const paths = [
      '/cdh/resource/../../etc/passwd',
      '/cdh/resource/default/%2e%2e/%2e%2e/key',
      '/cdh/resource/%2E%2E%2F%2E%2E%2Fetc/x/y',
      '/cdh/resource/a%zz/%/b%',
      '/cdh/resource/%00/%ff/x',
    ];
    for (const p of paths) {
      const r = await send(server, 'GET', p);
      expect(r.status).toBe(500);
    }
    expect(cdh.calls).toEqual(paths.map((p) => `kbs://${p.slice('/cdh/resource'.length)}`));
  });

  it('survives bytes outside ASCII in the target', async () => {
    const { server, cdh } = await start();
    const out = await raw(
      server,
      Buffer.concat([
        Buffer.from('GET /cdh/resource/default/'),
        Buffer.from([0xc3, 0xa9, 0xff]),
        Buffer.from('/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
      ]),
    );
    expect(out).toMatch(/^HTTP\/1\.1 (400|500) /);
    expect(cdh.calls.length).toBeLessThanOrEqual(1);
    expect((await send(server, 'GET', '/info')).status).toBe(200);
  });

  it('answers a bad query with 400, not a crash', async () => {
    const { server } = await start();
    const r = await send(server, 'GET', '/aa/evidence?runtime_data=%zz%&encoding=base64');
    expect([r.status, r.body.toString()]).toEqual([400, 'BAD REQUEST']);
  });
});

describe('access log', () => {
  it('logs method, path, route, status and size, but no query, body or resource bytes', async () => {
    const { server, log } = await start();
    await send(server, 'GET', '/cdh/resource/default/key/1?secretquery=1');
    await send(server, 'GET', '/aa/evidence?runtime_data=SECRETDATA');
    await send(server, 'POST', '/aa/aael', {
      body: '{"domain":"d","operation":"o","content":"SECRETCONTENT"}',
    });
    const requests = log.lines.filter((l) => l.msg === 'access');
    expect(requests.map((l) => [l.method, l.path, l.route, l.status])).toEqual([
      ['GET', '/cdh/resource/default/key/1', 'cdh/resource', 200],
      ['GET', '/aa/evidence', 'aa/evidence', 200],
      ['POST', '/aa/aael', 'aa/aael', 200],
    ]);
    expect(requests[0]).toMatchObject({ bytes: 12, peer: '127.0.0.1' });
    expect(typeof requests[0]?.ms).toBe('number');
    const all = JSON.stringify(log.lines);
    for (const secret of ['secret-bytes', 'secretquery', 'SECRETDATA', 'SECRETCONTENT'])
      expect(all).not.toContain(secret);
  });

  it('logs failures at warn level with the error text', async () => {
    const { server, cdh, log } = await start();
    cdh.failure = new BackendError('ttrpc connect to CDH addr: unix:///x failed: ENOENT');
    await send(server, 'GET', '/cdh/resource/default/key/1');
    const failed = log.lines.find((l) => l.msg === 'access' && l.level === 40);
    expect(failed).toMatchObject({
      level: 40,
      status: 500,
      error: 'ttrpc connect to CDH addr: unix:///x failed: ENOENT',
    });
  });

  it('bounds the logged path', async () => {
    const { server, log } = await start();
    await send(server, 'GET', `/x/${'a'.repeat(5000)}`);
    const entry = log.lines.find((l) => l.msg === 'access');
    expect(typeof entry?.path).toBe('string');
    expect(String(entry?.path).length).toBeLessThan(300);
  });
});

describe('shutdown and slow backends', () => {
  it('finishes a request in flight, then closes the backends', async () => {
    const { server, cdh } = await start();
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const original = cdh.getResource.bind(cdh);
    let started = false;
    cdh.getResource = async (uri) => {
      started = true;
      await gate;
      return original(uri);
    };
    const pending = send(server, 'GET', '/cdh/resource/default/key/1');
    while (!started) await new Promise((r) => setTimeout(r, 5));
    const closing = server.close({ graceMs: 10_000 });
    release();
    const r = await pending;
    expect([r.status, r.body.toString()]).toEqual([200, 'secret-bytes']);
    await closing;
    expect(cdh.closed).toBe(true);
    await expect(send(server, 'GET', '/info')).rejects.toThrow(/ECONNREFUSED/);
  });

  it('cuts requests still running after the grace period', async () => {
    const { server, cdh, aa } = await start();
    cdh.getResource = () => new Promise(() => undefined);
    const pending = send(server, 'GET', '/cdh/resource/default/key/1').catch((e: Error) => e);
    await new Promise((r) => setTimeout(r, 50));
    await server.close({ graceMs: 50 });
    expect(await pending).toBeInstanceOf(Error);
    expect(aa.closed).toBe(true);
  });

  it('does not crash when the client leaves before the backend answers', async () => {
    const { server, cdh, log } = await start();
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const original = cdh.getResource.bind(cdh);
    cdh.getResource = async (uri) => {
      cdh.calls.push(uri);
      await gate;
      return original(uri);
    };
    const sock = net.connect(server.address.port, '127.0.0.1');
    sock.write('GET /cdh/resource/default/key/1 HTTP/1.1\r\nHost: x\r\n\r\n');
    while (cdh.calls.length === 0) await new Promise((r) => setTimeout(r, 5));
    sock.destroy();
    await new Promise((r) => setTimeout(r, 20));
    release();
    await new Promise((r) => setTimeout(r, 20));
    expect(log.lines.some((l) => l.status === 499)).toBe(true);
    expect((await send(server, 'GET', '/info')).status).toBe(200);
  });

  it('reports a port in use and closes the backends', async () => {
    const { server } = await start();
    const cdh = new FakeDataHub();
    await expect(
      startApiServer({
        features: 'resource',
        bind: `127.0.0.1:${server.address.port}`,
        resourceBackend: cdh,
      }),
    ).rejects.toThrow(/^cannot listen on 127\.0\.0\.1:\d+: listen EADDRINUSE/);
    expect(cdh.closed).toBe(true);
    // An ApiServerError with a code, not a bare Error.
    await expect(
      startApiServer({
        features: 'resource',
        bind: `127.0.0.1:${server.address.port}`,
        resourceBackend: cdh,
      }),
    ).rejects.toSatisfy((e) => e instanceof ApiServerError && e.code === 'LISTEN_FAILED');
  });

  it('only builds the backends its feature needs', async () => {
    const { server, log } = await start({ features: 'resource' });
    const r = await send(server, 'GET', '/aa/token?token_type=kbs');
    expect([r.status, r.body.toString()]).toEqual([404, 'Attestation Feature Not Enabled']);
    expect(
      log.lines.some((l) => typeof l.msg === 'string' && l.msg.startsWith('API Server listening on')),
    ).toBe(true);
  });
});
