import { lstat, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TtrpcClient } from './client.js';
import { Code } from './codes.js';
import { requestCodec, responseCodec } from './envelope.js';
import { ProtoDecodeError, TtrpcClosedError, TtrpcConnectError, TtrpcError } from './errors.js';
import { encodeFrame, FrameDecoder, MessageType } from './frame.js';
import { defineProto, messageCodec } from './proto.js';
import { type CallContext, TtrpcServer } from './server.js';
import { tempDir, text, utf8 } from './testing/helpers.js';
import { clientMethod, serverMethod } from './typed.js';

/** Resolves when `signal` aborts, with its reason. */
function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener('abort', () => resolve(signal.reason), { once: true });
  });
}

function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

let dir: string;
let cleanup: () => Promise<void>;
let server: TtrpcServer;
let clients: TtrpcClient[];
let seenCtx: CallContext[];
let gates: Map<string, ReturnType<typeof deferred<void>>>;

beforeEach(async () => {
  ({ dir, cleanup } = await tempDir());
  clients = [];
  seenCtx = [];
  gates = new Map();
  server = new TtrpcServer();
  server.register('test.Echo', {
    Echo: async (req, ctx) => {
      seenCtx.push(ctx);
      return req;
    },
    // Waits for the test to open the gate named by the payload.
    Gate: async (req, ctx) => {
      seenCtx.push(ctx);
      const name = text(req);
      const g = gates.get(name) ?? deferred<void>();
      gates.set(name, g);
      await Promise.race([g.promise, aborted(ctx.signal)]);
      return utf8(`opened ${name}`);
    },
    Hang: async (_req, ctx) => {
      seenCtx.push(ctx);
      return aborted(ctx.signal).then(() => new Uint8Array(0));
    },
    Fail: async (req) => {
      const [code, message] = text(req).split(':');
      throw new TtrpcError(Number(code), message ?? '', {
        details: [{ type_url: 'type.googleapis.com/test.Detail', value: Uint8Array.of(1, 2, 3) }],
      });
    },
    Throw: async () => {
      throw new Error('boom');
    },
    ThrowSync: (() => {
      throw new Error('sync boom');
    }) as unknown as () => Promise<Uint8Array>,
    Nothing: (async () => undefined) as unknown as () => Promise<Uint8Array>,
    BadPayload: async () => {
      throw new ProtoDecodeError('x.Y', 'index out of range');
    },
    Big: async (req) => new Uint8Array(Number(text(req))),
  });
});

afterEach(async () => {
  for (const c of clients) c.close();
  await server.close({ graceMs: 0 });
  await cleanup();
});

async function listenUnix(name = 'a/b/ttrpc.sock'): Promise<{ path: string }> {
  const path = join(dir, name);
  await server.listen({ path });
  return { path };
}

async function connect(target: { path: string } | { host: string; port: number }): Promise<TtrpcClient> {
  const c = await TtrpcClient.connect(target);
  clients.push(c);
  return c;
}

async function waitFor(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 1));
}

function openGate(name: string): void {
  const g = gates.get(name) ?? deferred<void>();
  gates.set(name, g);
  g.resolve();
}

describe('unary calls', () => {
  it('round-trips over a unix socket', async () => {
    const c = await connect(await listenUnix());
    expect(text(await c.call('test.Echo', 'Echo', utf8('hello')))).toBe('hello');
    expect((await c.call('test.Echo', 'Echo', new Uint8Array(0))).length).toBe(0);
  });

  it('round-trips over TCP', async () => {
    const addr = await server.listen({ host: '127.0.0.1', port: 0 });
    expect('port' in addr && addr.port > 0).toBe(true);
    const c = await connect(addr as { host: string; port: number });
    expect(text(await c.call('test.Echo', 'Echo', utf8('tcp')))).toBe('tcp');
  });

  it('multiplexes concurrent calls and matches out-of-order responses', async () => {
    const c = await connect(await listenUnix());
    const first = c.call('test.Echo', 'Gate', utf8('first'));
    const second = c.call('test.Echo', 'Gate', utf8('second'));
    const quick = await c.call('test.Echo', 'Echo', utf8('quick'));
    expect(text(quick)).toBe('quick');
    openGate('second');
    expect(text(await second)).toBe('opened second');
    expect(c.pendingCalls).toBe(1);
    openGate('first');
    expect(text(await first)).toBe('opened first');
  });

  it('runs many calls at once on one connection', async () => {
    const c = await connect(await listenUnix());
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => c.call('test.Echo', 'Echo', utf8(`m${i}`))),
    );
    expect(results.map(text)).toEqual(Array.from({ length: 200 }, (_, i) => `m${i}`));
  });

  it('passes metadata to the handler, keys verbatim, values in order', async () => {
    const c = await connect(await listenUnix());
    await c.call('test.Echo', 'Echo', new Uint8Array(0), { metadata: { 'X-Trace': 'a', multi: ['1', '2'] } });
    const md = seenCtx[0]!.metadata;
    expect(md.get('X-Trace')).toEqual(['a']);
    expect(md.get('multi')).toEqual(['1', '2']);
    expect(seenCtx[0]!.service).toBe('test.Echo');
    expect(seenCtx[0]!.method).toBe('Echo');
    expect(seenCtx[0]!.deadline).toBeUndefined();
  });

  it('works with typed codecs on both sides', async () => {
    const root = defineProto(`
      syntax = "proto3";
      package api;
      message GetResourceRequest { string ResourcePath = 1; }
      message GetResourceResponse { bytes Resource = 1; }
    `);
    const Req = messageCodec<{ ResourcePath: string }>(root, 'api.GetResourceRequest');
    const Res = messageCodec<{ Resource: Uint8Array }>(root, 'api.GetResourceResponse');
    server.register('api.GetResourceService', {
      GetResource: serverMethod(Req, Res, async (req) => ({ Resource: utf8(`got ${req.ResourcePath}`) })),
    });
    const c = await connect(await listenUnix());
    const getResource = clientMethod(c, 'api.GetResourceService', 'GetResource', Req, Res);
    expect(text((await getResource({ ResourcePath: 'kbs:///a/b/c' })).Resource)).toBe('got kbs:///a/b/c');
    // A request that does not decode answers INTERNAL with Go's prefix.
    const err = await c
      .call('api.GetResourceService', 'GetResource', Uint8Array.of(0x0a, 0x05))
      .catch((e) => e);
    expect(err).toBeInstanceOf(TtrpcError);
    expect(err.code).toBe(Code.INTERNAL);
    expect(err.message).toMatch(/^ttrpc: error unmarshalling payload: api\.GetResourceRequest: /);
  });
});

describe('errors', () => {
  let c: TtrpcClient;
  beforeEach(async () => {
    c = await connect(await listenUnix());
  });
  const fail = (service: string, method: string, payload: Uint8Array = new Uint8Array(0)) =>
    c.call(service, method, payload).then(
      () => {
        throw new Error('expected a failure');
      },
      (e: TtrpcError) => e,
    );

  it('answers UNIMPLEMENTED for an unknown service or method, worded as Go ttrpc', async () => {
    const a = await fail('no.Such', 'Echo');
    expect([a.code, a.message]).toEqual([Code.UNIMPLEMENTED, 'service no.Such']);
    const b = await fail('test.Echo', 'Nope');
    expect([b.code, b.message]).toEqual([Code.UNIMPLEMENTED, 'method Nope']);
    // Inherited object members are not methods.
    const d = await fail('test.Echo', 'constructor');
    expect([d.code, d.message]).toEqual([Code.UNIMPLEMENTED, 'method constructor']);
    const e = await fail('__proto__', 'toString');
    expect(e.code).toBe(Code.UNIMPLEMENTED);
  });

  it('hands unknown services and methods to the fallback handler when one is configured', async () => {
    const seen: string[] = [];
    const interposer = new TtrpcServer({
      fallback: async (req, ctx) => {
        seen.push(`${ctx.service}/${ctx.method}`);
        return req;
      },
    });
    interposer.register('known.Service', { Known: async () => new TextEncoder().encode('known') });
    const path = join(dir, 'fallback.sock');
    await interposer.listen({ path });
    try {
      const c = await connect({ path });
      const unknown = await c.call('no.Such', 'Echo', new TextEncoder().encode('x'));
      expect(new TextDecoder().decode(unknown)).toBe('x');
      await c.call('known.Service', 'Other', new Uint8Array(0));
      const known = await c.call('known.Service', 'Known', new Uint8Array(0));
      expect(new TextDecoder().decode(known)).toBe('known');
      expect(seen).toEqual(['no.Such/Echo', 'known.Service/Other']);
    } finally {
      await interposer.close({ graceMs: 0 });
    }
  });

  it("propagates a handler's TtrpcError code, message and details", async () => {
    const e = await fail('test.Echo', 'Fail', utf8('7:denied by policy'));
    expect(e).toBeInstanceOf(TtrpcError);
    expect(e.code).toBe(Code.PERMISSION_DENIED);
    expect(e.codeName).toBe('PERMISSION_DENIED');
    expect(e.message).toBe('denied by policy');
    expect(e.details).toHaveLength(1);
    expect(e.details[0]!.type_url).toBe('type.googleapis.com/test.Detail');
    expect([...e.details[0]!.value]).toEqual([1, 2, 3]);
  });

  it('maps other handler failures to UNKNOWN with the error text', async () => {
    const a = await fail('test.Echo', 'Throw');
    expect([a.code, a.message]).toEqual([Code.UNKNOWN, 'boom']);
    const b = await fail('test.Echo', 'ThrowSync');
    expect([b.code, b.message]).toEqual([Code.UNKNOWN, 'sync boom']);
    const d = await fail('test.Echo', 'Nothing');
    expect([d.code, d.message]).toEqual([Code.UNKNOWN, 'ttrpc: marshal called with nil']);
    const e = await fail('test.Echo', 'BadPayload');
    expect([e.code, e.message]).toEqual([
      Code.INTERNAL,
      'ttrpc: error unmarshalling payload: x.Y: index out of range',
    ]);
  });

  it('answers RESOURCE_EXHAUSTED when a response would exceed the cap, and keeps the connection', async () => {
    const e = await fail('test.Echo', 'Big', utf8(String(4 << 20)));
    expect(e.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(e.message).toMatch(/^message length \d+ exceed maximum message size of 4194304$/);
    expect((await c.call('test.Echo', 'Big', utf8(String(4 << 19)))).length).toBe(4 << 19);
  });

  it('refuses to send a request over the cap without touching the connection', async () => {
    const e = await fail('test.Echo', 'Echo', new Uint8Array(4 << 20));
    expect(e.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(e.message).toMatch(/^message length 41943\d\d exceed maximum message size of 4194304$/);
    expect(text(await c.call('test.Echo', 'Echo', utf8('still fine')))).toBe('still fine');
  });
});

describe('deadlines and cancellation', () => {
  it('sends timeout_nano from timeoutMs; the handler sees the deadline and is aborted when it passes', async () => {
    const c = await connect(await listenUnix());
    const before = Date.now();
    const e = await c.call('test.Echo', 'Hang', new Uint8Array(0), { timeoutMs: 30 }).catch((x) => x);
    expect(e).toBeInstanceOf(TtrpcError);
    expect([e.code, e.message]).toEqual([Code.DEADLINE_EXCEEDED, 'context deadline exceeded']);
    const ctx = seenCtx[0]!;
    expect(ctx.deadline).toBeGreaterThanOrEqual(before + 30);
    const reason = await aborted(ctx.signal);
    expect(reason).toBeInstanceOf(TtrpcError);
    expect((reason as TtrpcError).code).toBe(Code.DEADLINE_EXCEEDED);
  });

  it('server answers DEADLINE_EXCEEDED on its own when timeout_nano passes', async () => {
    const { path } = await listenUnix();
    const sock = net.createConnection({ path });
    const decoder = new FrameDecoder();
    const got = new Promise<Uint8Array>((resolve) =>
      sock.on('data', (chunk) => {
        for (const ev of decoder.push(chunk)) if (ev.kind === 'frame') resolve(ev.data);
      }),
    );
    const req = requestCodec.encode({
      service: 'test.Echo',
      method: 'Hang',
      payload: new Uint8Array(0),
      timeout_nano: 20_000_000n,
      metadata: [],
    });
    sock.write(encodeFrame(1, MessageType.REQUEST, 0, req));
    const res = responseCodec.decode(await got);
    expect(res.status).toMatchObject({ code: Code.DEADLINE_EXCEEDED, message: 'context deadline exceeded' });
    sock.destroy();
  });

  it('rejects a negative timeout_nano (already expired) without running the handler', async () => {
    const { path } = await listenUnix();
    const sock = net.createConnection({ path });
    const decoder = new FrameDecoder();
    const got = new Promise<Uint8Array>((resolve) =>
      sock.on('data', (chunk) => {
        for (const ev of decoder.push(chunk)) if (ev.kind === 'frame') resolve(ev.data);
      }),
    );
    const req = requestCodec.encode({
      service: 'test.Echo',
      method: 'Echo',
      payload: new Uint8Array(0),
      timeout_nano: -1n,
      metadata: [],
    });
    sock.write(encodeFrame(1, MessageType.REQUEST, 0, req));
    const res = responseCodec.decode(await got);
    expect(res.status?.code).toBe(Code.DEADLINE_EXCEEDED);
    expect(seenCtx).toHaveLength(0);
    sock.destroy();
  });

  it('abandons a call when its signal aborts', async () => {
    const c = await connect(await listenUnix());
    const ac = new AbortController();
    const p = c.call('test.Echo', 'Gate', utf8('never'), { signal: ac.signal });
    await waitFor(() => seenCtx.length === 1);
    ac.abort();
    const e = await p.catch((x) => x);
    expect([e.code, e.message]).toEqual([Code.CANCELLED, 'context canceled']);
    expect(c.pendingCalls).toBe(0);
    const pre = await c.call('test.Echo', 'Echo', new Uint8Array(0), { signal: ac.signal }).catch((x) => x);
    expect(pre.code).toBe(Code.CANCELLED);
    // The late response of the abandoned call is ignored; the connection keeps working.
    openGate('never');
    expect(text(await c.call('test.Echo', 'Echo', utf8('ok')))).toBe('ok');
  });

  it('validates timeoutMs', async () => {
    const c = await connect(await listenUnix());
    await expect(c.call('test.Echo', 'Echo', new Uint8Array(0), { timeoutMs: 0 })).rejects.toThrow(
      RangeError,
    );
    await expect(c.call('test.Echo', 'Echo', new Uint8Array(0), { timeoutMs: Number.NaN })).rejects.toThrow(
      RangeError,
    );
  });
});

describe('client connection handling', () => {
  it('uses odd stream ids 1, 3, 5, … and sends timeout_nano', async () => {
    const { path } = { path: join(dir, 'raw.sock') };
    const seen: { id: number; timeout: bigint }[] = [];
    const raw = net.createServer((sock) => {
      const d = new FrameDecoder();
      sock.on('data', (chunk) => {
        for (const ev of d.push(chunk)) {
          if (ev.kind !== 'frame') continue;
          const req = requestCodec.decode(ev.data);
          seen.push({ id: ev.header.streamId, timeout: BigInt(req.timeout_nano) });
          sock.write(
            encodeFrame(
              ev.header.streamId,
              MessageType.RESPONSE,
              0,
              responseCodec.encode({ status: null, payload: req.payload }),
            ),
          );
        }
      });
    });
    await new Promise<void>((r) => raw.listen(path, r));
    const c = await connect({ path });
    await c.call('s', 'm', new Uint8Array(0));
    await c.call('s', 'm', new Uint8Array(0), { timeoutMs: 1500 });
    await c.call('s', 'm', new Uint8Array(0));
    expect(seen).toEqual([
      { id: 1, timeout: 0n },
      { id: 3, timeout: 1_500_000_000n },
      { id: 5, timeout: 0n },
    ]);
    c.close();
    await new Promise((r) => raw.close(r));
  });

  it('rejects every pending call when the connection drops, and later calls too', async () => {
    const path = join(dir, 'drop.sock');
    let accepted!: net.Socket;
    const received = deferred();
    let frames = 0;
    const raw = net.createServer((sock) => {
      accepted = sock;
      sock.on('data', () => {
        frames++;
        if (frames >= 1) received.resolve();
      });
    });
    await new Promise<void>((r) => raw.listen(path, r));
    const c = await connect({ path });
    const closedVia = deferred<TtrpcClosedError>();
    c.onClose((e) => closedVia.resolve(e));
    const a = c.call('s', 'm', new Uint8Array(0)).catch((e) => e);
    const b = c.call('s', 'm', new Uint8Array(0)).catch((e) => e);
    await received.promise;
    accepted.destroy();
    for (const e of [await a, await b]) {
      expect(e).toBeInstanceOf(TtrpcClosedError);
      expect(e.code).toBe(Code.UNAVAILABLE);
      expect(e.message).toMatch(/^ttrpc: closed/);
    }
    expect((await closedVia.promise).message).toMatch(/^ttrpc: closed/);
    expect(c.closed).toBe(true);
    await expect(c.call('s', 'm', new Uint8Array(0))).rejects.toBeInstanceOf(TtrpcClosedError);
    await new Promise((r) => raw.close(r));
  });

  it('close() rejects pending calls with "ttrpc: closed"', async () => {
    const c = await connect(await listenUnix());
    const p = c.call('test.Echo', 'Gate', utf8('x')).catch((e) => e);
    await waitFor(() => seenCtx.length === 1);
    c.close();
    const e = await p;
    expect(e).toBeInstanceOf(TtrpcClosedError);
    expect(e.message).toBe('ttrpc: closed');
    // The server aborts the handler of a vanished client.
    const reason = (await aborted(seenCtx[0]!.signal)) as TtrpcError;
    expect(reason.code).toBe(Code.CANCELLED);
  });

  it('fails to connect with TtrpcConnectError naming the address', async () => {
    const e = await TtrpcClient.connect({ path: join(dir, 'missing.sock') }).catch((x) => x);
    expect(e).toBeInstanceOf(TtrpcConnectError);
    expect(e.message).toContain(`unix://${join(dir, 'missing.sock')}`);
  });
});

describe('unix socket listening', () => {
  it('creates the parent directory and sets the socket mode (default 0600)', async () => {
    const { path } = await listenUnix('deep/er/x.sock');
    expect((await lstat(path)).isSocket()).toBe(true);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    const other = new TtrpcServer();
    const p2 = join(dir, 'y.sock');
    await other.listen({ path: p2, mode: 0o660 });
    expect((await stat(p2)).mode & 0o777).toBe(0o660);
    await other.close();
  });

  it('replaces a stale socket file but refuses to replace a regular file', async () => {
    const path = join(dir, 'stale.sock');
    const old = net.createServer();
    await new Promise<void>((r) => old.listen(path, r));
    // Simulate a crashed owner: the file stays while nobody serves it.
    const s = new TtrpcServer();
    s.register('test.Echo', { Echo: async (r) => r });
    await s.listen({ path });
    const c = await connect({ path });
    expect(text(await c.call('test.Echo', 'Echo', utf8('fresh')))).toBe('fresh');
    c.close();
    await s.close();
    old.close();

    const file = join(dir, 'regular');
    await writeFile(file, 'data');
    await expect(server.listen({ path: file })).rejects.toThrow(/not a socket/);
    expect((await stat(file)).isFile()).toBe(true);
  });

  it('removes its socket file on close', async () => {
    const { path } = await listenUnix();
    await server.close();
    await expect(lstat(path)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('graceful close', () => {
  it('lets in-flight calls finish, refuses new ones, then closes connections', async () => {
    const target = await listenUnix();
    const c = await connect(target);
    const inflight = c.call('test.Echo', 'Gate', utf8('g'));
    await waitFor(() => seenCtx.length === 1);
    const closing = server.close({ graceMs: 60_000 });
    // A new call on the open connection is refused with Go's ErrServerClosed text.
    const refused = await c.call('test.Echo', 'Echo', new Uint8Array(0)).catch((e) => e);
    expect([refused.code, refused.message]).toEqual([Code.UNAVAILABLE, 'ttrpc: server closed']);
    // New connections are refused.
    await expect(TtrpcClient.connect(target)).rejects.toBeInstanceOf(TtrpcConnectError);
    openGate('g');
    expect(text(await inflight)).toBe('opened g');
    await closing;
    await waitFor(() => c.closed);
  });

  it('aborts calls still running when the grace period ends', async () => {
    const c = await connect(await listenUnix());
    const p = c.call('test.Echo', 'Hang', new Uint8Array(0)).catch((e) => e);
    await waitFor(() => seenCtx.length === 1);
    await server.close({ graceMs: 10 });
    expect((await p).constructor).toBe(TtrpcClosedError);
    expect(seenCtx[0]!.signal.aborted).toBe(true);
    await expect(server.listen({ path: join(dir, 'again.sock') })).rejects.toThrow('ttrpc: server closed');
  });

  it('rejects duplicate service registration', () => {
    expect(() => server.register('test.Echo', {})).toThrow('duplicate service test.Echo registered');
  });
});
