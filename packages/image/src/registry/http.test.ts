import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeLoopbackCert } from '@broker/kbs-client/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { HttpClient, HttpError, MAX_REDIRECTS, readBody } from './http.js';

const servers: (http.Server | https.Server)[] = [];
const clients: HttpClient[] = [];

async function serve(handler: http.RequestListener): Promise<{ url: string }> {
  const server = http.createServer(handler);
  const sockets = new Set<Socket>();
  server.on('connection', (s) => sockets.add(s));
  server.on('close', () => {
    for (const s of sockets) s.destroy();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function client(idleTimeoutMs?: number): HttpClient {
  const c = new HttpClient(idleTimeoutMs !== undefined ? { idleTimeoutMs } : {});
  clients.push(c);
  return c;
}

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});

describe('HttpClient', () => {
  it('follows redirects, dropping credentials that would leave the origin', async () => {
    const seen: (string | undefined)[] = [];
    const other = await serve((q, res) => {
      seen.push(q.headers.authorization);
      res.end('there');
    });
    const srv = await serve((q, res) => {
      seen.push(q.headers.authorization);
      if (q.url === '/a') res.writeHead(302, { location: '/b' }).end();
      else res.writeHead(307, { location: `${other.url}/c` }).end();
    });
    const res = await client().request({
      method: 'GET',
      url: new URL(`${srv.url}/a`),
      headers: { authorization: 'Bearer secret' },
    });
    expect(res.url.href).toBe(`${other.url}/c`);
    expect((await readBody(res.body, 10)).toString()).toBe('there');
    expect(seen).toEqual(['Bearer secret', 'Bearer secret', undefined]);
  });

  it('refuses an https to http redirect and endless redirects', async () => {
    const loop = await serve((_q, res) => res.writeHead(302, { location: '/again' }).end());
    const err = await client()
      .request({ method: 'GET', url: new URL(`${loop.url}/start`) })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HttpError);
    expect((err as Error).message).toMatch(new RegExp(`more than ${MAX_REDIRECTS} redirects`));

    const dir = mkdtempSync(join(tmpdir(), 'registry-http-'));
    try {
      const { cert, key } = makeLoopbackCert(dir, 'server');
      const tls = https.createServer({ cert, key }, (_q, res) =>
        res.writeHead(301, { location: `${loop.url}/plain` }).end(),
      );
      servers.push(tls);
      await new Promise<void>((r) => tls.listen(0, '127.0.0.1', r));
      const c = new HttpClient({ ca: [cert] });
      clients.push(c);
      const downgrade = await c
        .request({ method: 'GET', url: new URL(`https://127.0.0.1:${(tls.address() as AddressInfo).port}/`) })
        .catch((e: unknown) => e);
      expect(downgrade).toBeInstanceOf(HttpError);
      expect((downgrade as Error).message).toMatch(/refusing redirect from https to http/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the request when the server sends no answer or stops sending', async () => {
    const silent = await serve(() => {});
    const noAnswer = await client(100)
      .request({ method: 'GET', url: new URL(`${silent.url}/v2/x/blobs/sha256:1?token=t`) })
      .catch((e: unknown) => e);
    expect(noAnswer).toBeInstanceOf(HttpError);
    expect((noAnswer as Error).message).toBe(`GET ${silent.url}/v2/x/blobs/sha256:1: no answer for 100 ms`);

    const stalls = await serve((_q, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial');
    });
    const res = await client(100).request({ method: 'GET', url: new URL(`${stalls.url}/blob`) });
    const stalled = await readBody(res.body, 1000).catch((e: unknown) => e);
    expect(stalled).toBeInstanceOf(HttpError);
    expect((stalled as Error).message).toBe(`GET ${stalls.url}/blob: no data for 100 ms`);
  });

  it('fails a body past its limit and a refused connection as HttpError', async () => {
    const big = await serve((_q, res) => res.end(Buffer.alloc(5000)));
    const res = await client().request({ method: 'GET', url: new URL(`${big.url}/`) });
    await expect(readBody(res.body, 4096, 'manifest')).rejects.toThrow('manifest larger than 4096 bytes');
    const refused = await client()
      .request({ method: 'GET', url: new URL('http://127.0.0.1:1/v2/') })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(HttpError);
    expect((refused as Error).message).toMatch(/^GET http:\/\/127\.0\.0\.1:1\/v2\/: .*ECONNREFUSED/);
  });
});

describe('HttpClient aborts', () => {
  it("keeps the caller's abort as it is, before and during the answer", async () => {
    const srv = await serve((_q, res) => {
      res.writeHead(200, { 'content-length': '10' });
      res.write('x');
    });
    const before = new AbortController();
    before.abort();
    const early = await client()
      .request({ method: 'GET', url: new URL(`${srv.url}/a`), headers: {}, signal: before.signal })
      .catch((e: unknown) => e);
    expect(early).not.toBeInstanceOf(HttpError);
    expect(early).toBe(before.signal.reason);

    const during = new AbortController();
    const res = await client().request({
      method: 'GET',
      url: new URL(`${srv.url}/b`),
      headers: {},
      signal: during.signal,
    });
    const reading = readBody(res.body, 100).catch((e: unknown) => e);
    during.abort();
    const late = await reading;
    expect(late).not.toBeInstanceOf(HttpError);
    expect(late).toBeInstanceOf(DOMException);
    expect((late as DOMException).code).toBe(DOMException.ABORT_ERR);
  });
});
