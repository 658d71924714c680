import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KbsUnreachable } from './errors.js';
import { HttpTransport } from './http.js';
import { makeLoopbackCert } from './testing/loopback-cert.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** A backend that records the paths it was asked for; `handle` may drop or stall a request. */
async function backend(
  handle: (path: string, nth: number, res: http.ServerResponse, socket: Socket) => void,
  tls?: { cert: string; key: string },
) {
  const paths: string[] = [];
  const counts = new WeakMap<Socket, number>();
  const server = tls !== undefined ? https.createServer(tls) : http.createServer();
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const nth = (counts.get(req.socket) ?? 0) + 1;
    counts.set(req.socket, nth);
    paths.push(req.url ?? '');
    req.resume();
    req.on('end', () => handle(req.url ?? '', nth, res, req.socket));
  });
  const port = await listen(server);
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port, paths };
}

/** A TCP relay: its first connection goes to ports[0], its second to ports[1], and so on. */
async function relay(ports: readonly number[]): Promise<number> {
  let n = 0;
  const sockets = new Set<Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(ports[Math.min(n++, ports.length - 1)] ?? 0, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  const port = await listen(server);
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return port;
}

function transport(url: string, extra: { certPem?: string; timeoutMs?: number } = {}): HttpTransport {
  const t = new HttpTransport({ url, userAgent: 'http-adversarial-test', ...extra });
  cleanups.push(() => t.close());
  return t;
}

/** Lets undici free the connection just answered, so the next request goes out on it. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a failure');
}

/** Answers the first request of a connection; drops the connection at its second. */
const answerThenDrop = (path: string, nth: number, res: http.ServerResponse, socket: Socket) => {
  if (nth === 1) res.end(`answer ${path}`);
  else socket.destroy();
};

describe('the repeat on a new connection, attacked', () => {
  it('does not trust whoever answers the new connection: its certificate is checked as the first', async () => {
    const kbs = await backend(answerThenDrop, tls.trusted);
    const impostor = await backend((path, _n, res) => res.end(`impostor ${path}`), tls.untrusted);
    const port = await relay([kbs.port, impostor.port]);
    const t = transport(`https://127.0.0.1:${port}`, { certPem: tls.trusted.cert });
    expect((await t.request({ method: 'GET', path: '/one' })).body.toString()).toBe('answer /one');
    await settle();
    const err = await failure(t.request({ method: 'GET', path: '/two' }));
    expect(err).toBeInstanceOf(KbsUnreachable);
    expect(err.message).toMatch(/on a new connection, after .* on a kept one/);
    expect(err.message).toMatch(/self[- ]signed certificate/);
    // The request (its bearer token, its body) never reached the impostor.
    expect(impostor.paths).toEqual([]);
    expect(kbs.paths).toEqual(['/one', '/two']);
  });

  it('keeps the whole-request timeout over the repeat: a stalled new connection is not waited for', async () => {
    const kbs = await backend(answerThenDrop);
    const stall = await backend(() => undefined); // reads the request, never answers
    const port = await relay([kbs.port, stall.port]);
    const t = transport(`http://127.0.0.1:${port}`, { timeoutMs: 1_000 });
    await t.request({ method: 'GET', path: '/one' });
    await settle();
    const err = await failure(t.request({ method: 'GET', path: '/two' }));
    expect(err).toBeInstanceOf(KbsUnreachable);
    expect(err.message).toMatch(/\/two: no complete response within 1000 ms$/);
    expect(stall.paths).toEqual(['/two']);
  });
});

const tls = {} as Record<'trusted' | 'untrusted', { cert: string; key: string }>;
let tlsDir: string;
beforeAll(() => {
  tlsDir = mkdtempSync(join(tmpdir(), 'kbs-client-http-adv-'));
  for (const name of ['trusted', 'untrusted'] as const) {
    // Both name 127.0.0.1: only the trust anchor tells them apart.
    tls[name] = makeLoopbackCert(tlsDir, name);
  }
});
afterAll(() => rmSync(tlsDir, { recursive: true, force: true }));
