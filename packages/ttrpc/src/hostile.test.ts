// Hostile peers: every malformed input gets containerd/ttrpc's answer (or is
// ignored as Go ttrpc ignores it), and the server keeps serving.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TtrpcClient } from './client.js';
import { Code } from './codes.js';
import { responseCodec } from './envelope.js';
import { TtrpcError, TtrpcProtocolError } from './errors.js';
import { encodeFrame, FrameDecoder, MessageType } from './frame.js';
import type { TtrpcLogger } from './logger.js';
import { TtrpcServer } from './server.js';
import { RawPeer, requestFrame, tempDir, text, utf8 } from './testing/helpers.js';

let dir: string;
let cleanup: () => Promise<void>;
let server: TtrpcServer;
let path: string;
let calls: number;
let logs: { level: string; msg: string }[];
const peers: RawPeer[] = [];

const echo = (id: number, body = 'ping') =>
  requestFrame(id, { service: 'test.Echo', method: 'Echo', payload: utf8(body) });

beforeEach(async () => {
  ({ dir, cleanup } = await tempDir());
  calls = 0;
  logs = [];
  const logger: TtrpcLogger = {
    debug: (_o, msg) => logs.push({ level: 'debug', msg }),
    warn: (_o, msg) => logs.push({ level: 'warn', msg }),
    error: (_o, msg) => logs.push({ level: 'error', msg }),
  };
  server = new TtrpcServer({ maxMessageSize: 1024, logger });
  server.register('test.Echo', {
    Echo: async (req) => {
      calls++;
      return req;
    },
  });
  path = join(dir, 's.sock');
  await server.listen({ path });
});

afterEach(async () => {
  for (const p of peers.splice(0)) p.destroy();
  await server.close({ graceMs: 0 });
  await cleanup();
});

async function peer(): Promise<RawPeer> {
  const p = await RawPeer.connect({ path });
  peers.push(p);
  return p;
}

/** The server still answers a well-formed call on a fresh connection. */
async function stillServing(): Promise<void> {
  const c = await TtrpcClient.connect({ path });
  try {
    expect(text(await c.call('test.Echo', 'Echo', utf8('alive')))).toBe('alive');
  } finally {
    c.close();
  }
}

describe('server against hostile frames', () => {
  it('answers an oversize frame with RESOURCE_EXHAUSTED on its stream after discarding the data', async () => {
    const p = await peer();
    const big = encodeFrame(5, MessageType.REQUEST, 0, new Uint8Array(1025));
    await p.write(Buffer.concat([big, echo(7)]));
    const first = await p.response(0);
    expect(first.streamId).toBe(5);
    expect(first.type).toBe(MessageType.RESPONSE);
    expect(first.response.status).toMatchObject({
      code: Code.RESOURCE_EXHAUSTED,
      message: 'message length 1025 exceed maximum message size of 1024',
    });
    // The discarded bytes did not desynchronise the stream: the next request is served.
    const second = await p.response(1);
    expect(second.streamId).toBe(7);
    expect(text(second.response.payload)).toBe('ping');
    expect(calls).toBe(1);
  });

  it('survives a header announcing 4 GiB followed by a drop mid-discard', async () => {
    const p = await peer();
    await p.write(Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 1, 0]));
    await p.write(randomBytes(64 * 1024));
    p.destroy();
    await stillServing();
  });

  it('ignores messages of unknown or server-only types, as Go ttrpc does', async () => {
    const p = await peer();
    await p.write(encodeFrame(1, 0x09, 0, utf8('future')));
    await p.write(encodeFrame(3, MessageType.RESPONSE, 0, new Uint8Array(0)));
    await p.write(echo(5));
    const r = await p.response(0);
    expect(r.streamId).toBe(5);
    expect(calls).toBe(1);
    expect(logs.filter((l) => l.msg.includes('unexpected type'))).toHaveLength(2);
  });

  it('refuses even stream ids with INVALID_ARGUMENT', async () => {
    const p = await peer();
    await p.write(echo(2));
    await p.write(echo(0));
    const [a, b] = [await p.response(0), await p.response(1)];
    expect(a.streamId).toBe(2);
    expect(a.response.status).toMatchObject({
      code: Code.INVALID_ARGUMENT,
      message: 'StreamID must be odd for client initiated streams',
    });
    expect(b.streamId).toBe(0);
    expect(b.response.status?.code).toBe(Code.INVALID_ARGUMENT);
    expect(calls).toBe(0);
  });

  it('refuses re-used or decreasing stream ids', async () => {
    const p = await peer();
    await p.write(echo(5));
    await p.write(echo(5));
    await p.write(echo(3));
    await p.write(echo(7));
    const rs = await Promise.all([0, 1, 2, 3].map((i) => p.response(i)));
    const byId = rs.map((r) => [r.streamId, r.response.status?.code ?? 0, r.response.status?.message ?? '']);
    expect(byId).toContainEqual([5, Code.INVALID_ARGUMENT, 'StreamID cannot be re-used and must increment']);
    expect(byId).toContainEqual([3, Code.INVALID_ARGUMENT, 'StreamID cannot be re-used and must increment']);
    expect(byId.filter((r) => r[1] === 0).map((r) => r[0])).toEqual([5, 7]);
    expect(calls).toBe(2);
  });

  it('answers garbage protobuf in the request with INVALID_ARGUMENT "unmarshal request error"', async () => {
    const p = await peer();
    await p.write(encodeFrame(1, MessageType.REQUEST, 0, Buffer.from('0aff', 'hex')));
    await p.write(encodeFrame(3, MessageType.REQUEST, 0, Buffer.from('0f0f0f0f', 'hex')));
    await p.write(echo(5));
    const a = await p.response(0);
    expect(a.streamId).toBe(1);
    expect(a.response.status?.code).toBe(Code.INVALID_ARGUMENT);
    expect(a.response.status?.message).toMatch(/^unmarshal request error: ttrpc\.Request: /);
    expect((await p.response(1)).response.status?.code).toBe(Code.INVALID_ARGUMENT);
    expect(text((await p.response(2)).response.payload)).toBe('ping');
  });

  it('answers data on an unknown stream with "StreamID is no longer active"', async () => {
    const p = await peer();
    await p.write(encodeFrame(9, MessageType.DATA, 0, utf8('x')));
    const r = await p.response(0);
    expect(r.streamId).toBe(9);
    expect(r.response.status).toMatchObject({
      code: Code.INVALID_ARGUMENT,
      message: 'StreamID is no longer active',
    });
  });

  it('answers data sent on a unary stream that is still running, and cancels that call', async () => {
    const gate = new Promise<void>(() => {});
    let signal: AbortSignal | undefined;
    server.register('test.Slow', {
      Wait: async (_req, ctx) => {
        signal = ctx.signal;
        await Promise.race([gate, new Promise((r) => ctx.signal.addEventListener('abort', r))]);
        return new Uint8Array(0);
      },
    });
    const p = await peer();
    await p.write(requestFrame(1, { service: 'test.Slow', method: 'Wait' }));
    while (!signal) await new Promise((r) => setTimeout(r, 1));
    await p.write(encodeFrame(1, MessageType.DATA, 0, utf8('x')));
    const r = await p.response(0);
    expect(r.response.status).toMatchObject({
      code: Code.INVALID_ARGUMENT,
      message: 'data message on a unary stream',
    });
    expect(signal.aborted).toBe(true);
    // Exactly one response for stream 1: the cancelled handler's result is dropped.
    await p.write(echo(3));
    expect((await p.response(1)).streamId).toBe(3);
    expect(p.events).toHaveLength(2);
  });

  it('drops a connection closed mid-frame without running anything, and keeps serving', async () => {
    const p = await peer();
    const f = echo(1);
    await p.write(f.subarray(0, f.length - 3));
    p.end();
    await p.waitClosed();
    expect(calls).toBe(0);
    await stillServing();
    expect(logs.some((l) => l.msg.includes('middle of a frame'))).toBe(true);
  });

  it('holds a slowloris partial header without blocking other connections, and close() cuts it', async () => {
    const slow = await peer();
    await slow.write(Buffer.from([0, 0, 0]));
    await stillServing();
    await slow.write(Buffer.from([0x10]));
    await stillServing();
    await server.close({ graceMs: 20 });
    await slow.waitClosed();
    expect(slow.events).toHaveLength(0);
  });

  it('assembles a request delivered one byte at a time', async () => {
    const p = await peer();
    for (const byte of echo(1, 'drip')) await p.write(Uint8Array.of(byte));
    expect(text((await p.response(0)).response.payload)).toBe('drip');
  });

  it('survives random bytes on many connections', async () => {
    for (let i = 0; i < 20; i++) {
      const p = await peer();
      // Keep lengths under the cap sometimes, so the garbage also reaches the protobuf decoder.
      const junk = randomBytes(2048);
      if (i % 2 === 0) junk.writeUInt32BE(junk.readUInt32BE(0) % 1500, 0);
      await p.write(junk).catch(() => {});
      p.destroy();
    }
    await stillServing();
  });

  it('keeps reading no further while the client does not read its responses (back-pressure)', async () => {
    const small = new TtrpcServer({ maxConcurrentCalls: 2 });
    let running = 0;
    let peak = 0;
    small.register('test.Count', {
      Run: async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise((r) => setTimeout(r, 2));
        running--;
        return new Uint8Array(0);
      },
    });
    const sp = join(dir, 'small.sock');
    await small.listen({ path: sp });
    const p = await RawPeer.connect({ path: sp });
    const frames = [];
    for (let i = 0; i < 20; i++)
      frames.push(requestFrame(2 * i + 1, { service: 'test.Count', method: 'Run' }));
    // Separate writes so the limit applies between chunks.
    for (const f of frames) await p.write(f);
    const all = await p.frames(20);
    expect(all).toHaveLength(20);
    expect(peak).toBeLessThanOrEqual(2);
    p.destroy();
    await small.close({ graceMs: 0 });
  });
});

describe('client against a hostile server', () => {
  async function fakeServer(
    onRequest: (sock: net.Socket, streamId: number) => void,
  ): Promise<{ client: TtrpcClient; close: () => Promise<void> }> {
    const fp = join(dir, `fake-${Math.random().toString(36).slice(2)}.sock`);
    const srv = net.createServer((sock) => {
      const d = new FrameDecoder();
      sock.on('data', (chunk) => {
        for (const ev of d.push(chunk)) onRequest(sock, ev.header.streamId);
      });
      sock.on('error', () => {});
    });
    await new Promise<void>((r) => srv.listen(fp, r));
    const client = await TtrpcClient.connect({ path: fp }, { maxMessageSize: 1024 });
    return {
      client,
      close: async () => {
        client.close();
        await new Promise((r) => srv.close(r));
      },
    };
  }

  it('fails one call with RESOURCE_EXHAUSTED on an oversize response and keeps the connection', async () => {
    let n = 0;
    const f = await fakeServer((sock, id) => {
      n++;
      const payload =
        n === 1 ? new Uint8Array(2000) : responseCodec.encode({ status: null, payload: utf8('small') });
      sock.write(encodeFrame(id, MessageType.RESPONSE, 0, payload));
    });
    const e = await f.client.call('s', 'm', new Uint8Array(0)).catch((x) => x);
    expect([e.code, e.message]).toEqual([
      Code.RESOURCE_EXHAUSTED,
      'message length 2000 exceed maximum message size of 1024',
    ]);
    expect(text(await f.client.call('s', 'm', new Uint8Array(0)))).toBe('small');
    await f.close();
  });

  it('fails a call whose response does not decode, or arrives as data', async () => {
    let n = 0;
    const f = await fakeServer((sock, id) => {
      n++;
      if (n === 1) sock.write(encodeFrame(id, MessageType.RESPONSE, 0, Buffer.from('0aff', 'hex')));
      else sock.write(encodeFrame(id, MessageType.DATA, 0, utf8('x')));
    });
    const a = await f.client.call('s', 'm', new Uint8Array(0)).catch((x) => x);
    expect(a).toBeInstanceOf(TtrpcProtocolError);
    expect(a.message).toMatch(/^ttrpc: undecodable response: /);
    const b = await f.client.call('s', 'm', new Uint8Array(0)).catch((x) => x);
    expect(b).toBeInstanceOf(TtrpcProtocolError);
    await f.close();
  });

  it('ignores responses for streams it never opened', async () => {
    const f = await fakeServer((sock, id) => {
      sock.write(encodeFrame(id + 100, MessageType.RESPONSE, 0, new Uint8Array(0)));
      sock.write(encodeFrame(2, MessageType.RESPONSE, 0, new Uint8Array(0)));
      sock.write(
        encodeFrame(
          id,
          MessageType.RESPONSE,
          0,
          responseCodec.encode({ status: null, payload: utf8('mine') }),
        ),
      );
    });
    expect(text(await f.client.call('s', 'm', new Uint8Array(0)))).toBe('mine');
    await f.close();
  });

  it('reports a non-OK status with an unknown code number as is', async () => {
    const f = await fakeServer((sock, id) => {
      const body = responseCodec.encode({
        status: { code: 99, message: 'odd', details: [] },
        payload: utf8('p'),
      });
      sock.write(encodeFrame(id, MessageType.RESPONSE, 0, body));
    });
    const e = await f.client.call('s', 'm', new Uint8Array(0)).catch((x) => x);
    expect(e).toBeInstanceOf(TtrpcError);
    expect([e.code, e.codeName, e.message]).toEqual([99, 'CODE(99)', 'odd']);
    await f.close();
  });

  it('rejects pending calls with a clear message when the server drops mid-message', async () => {
    const f = await fakeServer((sock) => {
      sock.write(Buffer.from([0, 0, 0, 9, 0, 0]));
      sock.destroy();
    });
    const e = await f.client.call('s', 'm', new Uint8Array(0)).catch((x) => x);
    expect(e.message).toBe('ttrpc: closed: connection lost in the middle of a message');
    await f.close();
  });
});
