// Slow clients against the real HTTP server over real sockets: connections that trickle their
// headers must not lock well-behaved clients out, one peer sheds its own connections first, a
// request being answered is never closed for a newcomer, and the header timeout fires on time.
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type ApiServer, type ApiServerLimits, startApiServer } from './server.js';
import { FakeAttestationAgent, FakeDataHub } from './testing/helpers.js';

const servers: ApiServer[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => s.close({ graceMs: 100 })));
});

async function start(limits: ApiServerLimits, cdh = new FakeDataHub()): Promise<ApiServer> {
  const server = await startApiServer({
    features: 'all',
    bind: '127.0.0.1:0',
    resourceBackend: cdh,
    attestationBackend: new FakeAttestationAgent(),
    limits,
  });
  servers.push(server);
  return server;
}

/** Long timeouts: what is tested here is admission, not the timeouts cutting the slow clients off. */
const PATIENT = { headersTimeoutMs: 120_000, requestTimeoutMs: 240_000 };

interface Slow {
  readonly socket: net.Socket;
  closed: boolean;
}

/** A client that sends a request line and then never finishes its headers; resolves once connected. */
function slowClient(server: ApiServer, localAddress: string): Promise<Slow> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: server.address.host, port: server.address.port, localAddress });
    sockets.push(socket);
    const slow: Slow = { socket, closed: false };
    socket.on('error', () => {});
    socket.on('close', () => {
      slow.closed = true;
    });
    socket.once('connect', () => {
      socket.write('GET /info HTTP/1.1\r\nX-Slow: 1\r\n');
      resolve(slow);
    });
    socket.once('error', reject);
  });
}

/** Resolves when `condition` holds, checking after each turn of the event loop's timers. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((r) => setTimeout(r, 10));
}

function get(server: ApiServer, path: string, localAddress = '127.0.0.1') {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request(
      { host: server.address.host, port: server.address.port, path, localAddress, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('api-server-rest under slow clients', () => {
  it('serves a new client while 1024 connections trickling their headers fill every slot', async () => {
    const server = await start({ ...PATIENT });
    // 16 loopback addresses × 64: the global cap (1024) is reached without passing the per-peer one.
    const slow: Slow[] = [];
    for (let a = 2; a < 18; a++) {
      slow.push(...(await Promise.all(Array.from({ length: 64 }, () => slowClient(server, `127.0.0.${a}`)))));
    }
    await until(() => server.connections === 1024);

    const before = performance.now();
    const r = await get(server, '/info');
    const waitedMs = performance.now() - before;
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ feature: 'all' });
    expect(waitedMs).toBeGreaterThan(0);
    // One slow connection, the one idle longest, made room; the others are still open.
    await until(() => slow.filter((s) => s.closed).length === 1);
    expect(server.connections).toBeLessThanOrEqual(1024);
  });

  it('makes one peer shed its own connections past maxConnectionsPerPeer, not other peers', async () => {
    const server = await start({ ...PATIENT, maxConnections: 1024, maxConnectionsPerPeer: 16 });
    const other = await slowClient(server, '127.0.0.99');
    const flood = await Promise.all(Array.from({ length: 100 }, () => slowClient(server, '127.0.0.1')));
    await until(() => flood.filter((s) => s.closed).length === 100 - 16);
    expect(other.closed).toBe(false);
    expect((await get(server, '/info', '127.0.0.1')).status).toBe(200);
    // The newcomer made room by closing one more of its own peer's; it then closed itself.
    await until(() => flood.filter((s) => s.closed).length === 100 - 15 && server.connections === 16);
    expect(other.closed).toBe(false);
  });

  it('never closes a connection whose request is being answered', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    class SlowDataHub extends FakeDataHub {
      override async getResource(uri: string): Promise<Uint8Array> {
        const answer = super.getResource(uri);
        await gate;
        return answer;
      }
    }
    const cdh = new SlowDataHub({ 'kbs:///default/key/1': 'secret-bytes' });
    const server = await start({ ...PATIENT, maxConnections: 8, maxConnectionsPerPeer: 8 }, cdh);
    const pending = get(server, '/cdh/resource/default/key/1');
    await until(() => cdh.calls.length === 1);
    const flood = await Promise.all(Array.from({ length: 40 }, () => slowClient(server, '127.0.0.1')));
    await until(() => flood.filter((s) => s.closed).length === 40 - 7);
    release();
    expect(await pending).toEqual({ status: 200, body: 'secret-bytes' });
  });

  it('answers 408 and closes a connection that does not finish its headers in time', async () => {
    const server = await start({ headersTimeoutMs: 200, requestTimeoutMs: 400 });
    const slow = await slowClient(server, '127.0.0.1');
    const received: Buffer[] = [];
    slow.socket.on('data', (c: Buffer) => received.push(c));
    await until(() => slow.closed);
    expect(Buffer.concat(received).toString('latin1')).toMatch(/^HTTP\/1\.1 408 /);
  });
});
