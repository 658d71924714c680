import diagnostics from 'node:diagnostics_channel';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SampleAttester } from '@broker/attester';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KbsClient } from './client.js';
import { KbsUnreachable } from './errors.js';
import { HttpTransport } from './http.js';
import { FakeKbs } from './testing/fake-kbs.js';
import { makeLoopbackCert } from './testing/loopback-cert.js';

/** What the server does with a request: answer it, reset its connection (RST), or close it (FIN). */
type Fate = 'answer' | 'reset' | 'close';

interface Seen {
  readonly method: string;
  readonly path: string;
  /** 1-based number of the connection it came on. */
  readonly connection: number;
  readonly fate: Fate;
}

/**
 * Wraps a request handler: `fate(method, path, nth)` (nth = the request's
 * number on its connection) decides whether the request is dropped with its
 * connection instead of being handed on. Every request is recorded.
 */
class Dropper {
  readonly seen: Seen[] = [];
  readonly #connectionOf = new WeakMap<Socket, { id: number; requests: number }>();
  #connections = 0;

  constructor(readonly fate: (method: string, path: string, nth: number) => Fate) {}

  wrap(handler: http.RequestListener): http.RequestListener {
    return (req, res) => {
      const socket = req.socket;
      let conn = this.#connectionOf.get(socket);
      if (conn === undefined) {
        conn = { id: ++this.#connections, requests: 0 };
        this.#connectionOf.set(socket, conn);
      }
      const method = req.method ?? '';
      const path = req.url ?? '';
      const fate = this.fate(method, path, ++conn.requests);
      this.seen.push({ method, path, connection: conn.id, fate });
      if (fate === 'reset') socket.resetAndDestroy();
      else if (fate === 'close') socket.destroy();
      else handler(req, res);
    };
  }
}

/** Answers 200 with "<method> <path>" once the request body has been read. */
const echo: http.RequestListener = (req, res) => {
  req.resume();
  req.on('end', () => res.end(`${req.method} ${req.url}`));
};

/** The second and later requests of a connection meet `fate`. */
const dropLater = (fate: Fate) => (_m: string, _p: string, nth: number) => (nth > 1 ? fate : 'answer');

class Server {
  connections = 0;
  readonly #server: http.Server;
  url = '';

  constructor(handler: http.RequestListener, tls?: { cert: string; key: string }) {
    this.#server = tls !== undefined ? https.createServer(tls, handler) : http.createServer(handler);
    // A TLS server's 'connection' is the TCP accept, before any handshake.
    this.#server.on('connection', () => this.connections++);
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    const { port } = this.#server.address() as AddressInfo;
    this.url = `${this.#server instanceof https.Server ? 'https' : 'http'}://127.0.0.1:${port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function serve(handler: http.RequestListener, tls?: { cert: string; key: string }) {
  const server = await new Server(handler, tls).start();
  cleanups.push(() => server.stop());
  return server;
}

function transport(url: string, extra: { certPem?: string; timeoutMs?: number } = {}): HttpTransport {
  const t = new HttpTransport({ url, userAgent: 'http-test', ...extra });
  cleanups.push(() => t.close());
  return t;
}

/**
 * Lets undici mark the connection of the request just answered as free again
 * (it does so a moment after the body ends), so the next request goes on the
 * kept connection rather than a second one.
 */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a failure');
}

/** Counts undici's connection attempts while `run` runs. */
async function countConnects(run: () => Promise<void>): Promise<number> {
  let connects = 0;
  const onConnect = () => {
    connects++;
  };
  diagnostics.subscribe('undici:client:beforeConnect', onConnect);
  try {
    await run();
  } finally {
    diagnostics.unsubscribe('undici:client:beforeConnect', onConnect);
  }
  return connects;
}

describe('a request on a kept connection the KBS has closed', () => {
  it('repeats a GET on a new connection after a reset', async () => {
    const drop = new Dropper(dropLater('reset'));
    const server = await serve(drop.wrap(echo));
    const t = transport(server.url);
    expect((await t.request({ method: 'GET', path: '/one' })).body.toString()).toBe('GET /one');
    await settle();
    const res = await t.request({ method: 'GET', path: '/two' });
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('GET /two');
    expect(server.connections).toBe(2);
    expect(drop.seen).toEqual([
      { method: 'GET', path: '/one', connection: 1, fate: 'answer' },
      { method: 'GET', path: '/two', connection: 1, fate: 'reset' },
      { method: 'GET', path: '/two', connection: 2, fate: 'answer' },
    ]);
  });

  it('repeats a GET after the KBS closed the connection without an answer', async () => {
    const drop = new Dropper(dropLater('close'));
    const server = await serve(drop.wrap(echo));
    const t = transport(server.url);
    await t.request({ method: 'GET', path: '/one' });
    await settle();
    expect((await t.request({ method: 'GET', path: '/two' })).body.toString()).toBe('GET /two');
    expect(server.connections).toBe(2);
    expect(drop.seen.map((s) => [s.path, s.connection, s.fate])).toEqual([
      ['/one', 1, 'answer'],
      ['/two', 1, 'close'],
      ['/two', 2, 'answer'],
    ]);
  });

  it('repeats it over TLS with the same trust (the new connection is verified as the pooled ones)', async () => {
    // (A TLS socket has no TCP handle of its own to reset: this one is closed.)
    const drop = new Dropper(dropLater('close'));
    const server = await serve(drop.wrap(echo), tlsFiles);
    const t = transport(server.url, { certPem: tlsFiles.cert });
    await t.request({ method: 'GET', path: '/one' });
    await settle();
    expect((await t.request({ method: 'GET', path: '/two' })).body.toString()).toBe('GET /two');
    expect(server.connections).toBe(2);
  });

  it('repeats only once: a second drop is the error', async () => {
    // Connection 1 answers /one, then drops /two; the retry's connection drops /two as well.
    const drop = new Dropper((_m, path) => (path === '/two' ? 'reset' : 'answer'));
    const server = await serve(drop.wrap(echo));
    const t = transport(server.url);
    await t.request({ method: 'GET', path: '/one' });
    await settle();
    const err = await failure(t.request({ method: 'GET', path: '/two' }));
    expect(err).toBeInstanceOf(KbsUnreachable);
    expect(err.message).toMatch(
      /^GET http:\/\/127\.0\.0\.1:\d+\/two: .*on a new connection, after .* on a kept one/,
    );
    expect(drop.seen.filter((s) => s.path === '/two')).toHaveLength(2);
    expect(server.connections).toBe(2);
  });

  it('repeats a POST the caller marked safe to repeat (/auth)', async () => {
    const drop = new Dropper(dropLater('reset'));
    const server = await serve(drop.wrap(echo));
    const t = transport(server.url);
    await t.request({ method: 'GET', path: '/one' });
    await settle();
    const res = await t.request({
      method: 'POST',
      path: '/kbs/v0/auth',
      body: '{}',
      contentType: 'application/json',
      retryOnStaleConnection: true,
    });
    expect(res.body.toString()).toBe('POST /kbs/v0/auth');
    expect(drop.seen.filter((s) => s.path === '/kbs/v0/auth').map((s) => s.connection)).toEqual([1, 2]);
  });

  it('does not repeat a POST by default: /attest fails and was sent once', async () => {
    const drop = new Dropper(dropLater('reset'));
    const server = await serve(drop.wrap(echo));
    const t = transport(server.url);
    await t.request({ method: 'GET', path: '/one' });
    await settle();
    const err = await failure(
      t.request({ method: 'POST', path: '/kbs/v0/attest', body: '{"x":1}', contentType: 'application/json' }),
    );
    expect(err).toBeInstanceOf(KbsUnreachable);
    expect(err.message).toMatch(/^POST http:\/\/127\.0\.0\.1:\d+\/kbs\/v0\/attest: /);
    expect(drop.seen.filter((s) => s.path === '/kbs/v0/attest')).toHaveLength(1);
    expect(server.connections).toBe(1);
  });

  it('does not repeat a GET the caller marked unsafe to repeat, nor a DELETE', async () => {
    const drop = new Dropper(dropLater('reset'));
    const server = await serve(drop.wrap(echo));
    const t = transport(server.url);
    await t.request({ method: 'GET', path: '/one' });
    await settle();
    await failure(t.request({ method: 'GET', path: '/two', retryOnStaleConnection: false }));
    await t.request({ method: 'GET', path: '/three' }); // connection 2
    await settle();
    await failure(t.request({ method: 'DELETE', path: '/four' }));
    expect(drop.seen.map((s) => [s.method, s.path, s.connection, s.fate])).toEqual([
      ['GET', '/one', 1, 'answer'],
      ['GET', '/two', 1, 'reset'],
      ['GET', '/three', 2, 'answer'],
      ['DELETE', '/four', 2, 'reset'],
    ]);
  });

  it('does not repeat a GET whose connection closed after the answer began', async () => {
    let requests = 0;
    const server = await serve((req, res) => {
      requests++;
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial', () => req.socket.destroy());
    });
    const t = transport(server.url);
    const err = await failure(t.request({ method: 'GET', path: '/one' }));
    expect(err).toBeInstanceOf(KbsUnreachable);
    expect(err.message).toMatch(/other side closed/);
    expect(requests).toBe(1);
    expect(server.connections).toBe(1);
  });

  it('does not repeat a refused connection (the KBS is down: the caller retries)', async () => {
    const t = transport('http://127.0.0.1:1');
    let err: Error | undefined;
    const connects = await countConnects(async () => {
      err = await failure(t.request({ method: 'GET', path: '/one' }));
    });
    expect(err).toBeInstanceOf(KbsUnreachable);
    expect(((err as Error).cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
    expect(connects).toBe(1);
  });

  it('does not repeat a request that timed out', async () => {
    let requests = 0;
    const server = await serve(() => {
      requests++; // never answered
    });
    const t = transport(server.url, { timeoutMs: 500 });
    const err = await failure(t.request({ method: 'GET', path: '/one' }));
    expect(err.message).toMatch(/no complete response within 500 ms/);
    expect(requests).toBeLessThanOrEqual(1);
    expect(server.connections).toBeLessThanOrEqual(1);
  });
});

describe('the KBS client marks which requests may be repeated', () => {
  it('sends /auth again on a new connection, but never /attest', async () => {
    // Dropped: the first /attest, and the /auth of the third handshake. (Which of the pool's
    // connections a request goes on is undici's choice; these drops do not depend on it.)
    const counts = new Map<string, number>();
    const drop = new Dropper((_m, path) => {
      const n = (counts.get(path) ?? 0) + 1;
      counts.set(path, n);
      return (path.endsWith('/attest') && n === 1) || (path.endsWith('/auth') && n === 3)
        ? 'reset'
        : 'answer';
    });
    const kbs = await new FakeKbs((h) => http.createServer(drop.wrap(h))).start();
    cleanups.push(() => kbs.stop());
    const sleeps: number[] = [];
    const client = new KbsClient({
      url: kbs.url,
      attester: new SampleAttester(),
      sleep: async (ms) => {
        sleeps.push(ms);
      },
    });
    cleanups.push(() => client.close());

    // The dropped /attest is not sent again by the HTTP layer: the handshake fails and the
    // client's own policy makes a new one (a new challenge, a new nonce) after a pause.
    await client.getToken();
    expect(sleeps).toHaveLength(1);
    // The dropped /auth is sent again at once, on a new connection, and the handshake goes on.
    await client.attest();
    expect(sleeps).toHaveLength(1);
    const auth = '/kbs/v0/auth';
    const attest = '/kbs/v0/attest';
    expect(drop.seen.map((s) => [s.path, s.fate])).toEqual([
      [auth, 'answer'],
      [attest, 'reset'],
      [auth, 'answer'],
      [attest, 'answer'],
      [auth, 'reset'],
      [auth, 'answer'],
      [attest, 'answer'],
    ]);
    expect(drop.seen[5]?.connection).not.toBe(drop.seen[4]?.connection);
    // Each /attest answered a challenge of its own.
    const cookies = kbs.hits(attest).map((r) => r.headers.cookie);
    expect(new Set(cookies).size).toBe(cookies.length);
  });
});

let tlsDir: string;
let tlsFiles: { cert: string; key: string };
beforeAll(() => {
  tlsDir = mkdtempSync(join(tmpdir(), 'kbs-client-http-'));
  tlsFiles = makeLoopbackCert(tlsDir, 'server');
});
afterAll(() => rmSync(tlsDir, { recursive: true, force: true }));
