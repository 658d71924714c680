import { createServer } from 'node:net';
import { Server } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { serveGrpc } from './grpc.js';
import { chooseAlpn, HTTP2_PREFACE, sniffProtocol, splitHostPort } from './shared-port.js';

describe('sniffProtocol', () => {
  it('is h2 only once the whole preface arrived, http1 at the first differing byte', () => {
    expect(sniffProtocol(Buffer.alloc(0))).toBeUndefined();
    expect(sniffProtocol(HTTP2_PREFACE.subarray(0, 23))).toBeUndefined();
    expect(sniffProtocol(HTTP2_PREFACE)).toBe('h2');
    expect(sniffProtocol(Buffer.concat([HTTP2_PREFACE, Buffer.from([0, 0, 0, 4])]))).toBe('h2');
    expect(sniffProtocol(Buffer.from('P'))).toBeUndefined();
    expect(sniffProtocol(Buffer.from('POST / HTTP/1.1'))).toBe('http1');
    expect(sniffProtocol(Buffer.from('PRI * HTTP/1.1\r\n'))).toBe('http1');
    expect(sniffProtocol(Buffer.from([0x16, 0x03, 0x01]))).toBe('http1');
  });
});

describe('chooseAlpn', () => {
  it('prefers http/1.1 when offered (curl offers both), h2 for gRPC clients, nothing else', () => {
    expect(chooseAlpn(['h2', 'http/1.1'])).toBe('http/1.1');
    expect(chooseAlpn(['grpc-exp', 'h2'])).toBe('h2');
    expect(chooseAlpn(['spdy/3'])).toBeUndefined();
    expect(chooseAlpn([])).toBeUndefined();
  });
});

describe('splitHostPort', () => {
  it('takes host:port and [v6]:port as grpc-js does, and refuses the rest', () => {
    expect(splitHostPort('0.0.0.0:50004')).toEqual({ host: '0.0.0.0', port: 50004 });
    expect(splitHostPort('[::]:0')).toEqual({ host: '::', port: 0 });
    expect(splitHostPort('localhost:8080')).toEqual({ host: 'localhost', port: 8080 });
    for (const bad of ['50004', ':50004', 'host:', 'host:70000', 'a:b:1', '[::1]', 'http://x:1']) {
      expect(() => splitHostPort(bad), bad).toThrow(/expected HOST:PORT/);
    }
  });
});

describe('serveGrpc with HTTP/1.1 routes', () => {
  it('frees the port on close', async () => {
    const running = await serveGrpc(new Server(), {
      address: '127.0.0.1:0',
      healthServices: [],
      http1: { routes: new Map() },
    });
    const { port } = running;
    await running.close();
    await new Promise<void>((resolve, reject) => {
      const s = createServer()
        .once('error', reject)
        .listen(port, '127.0.0.1', () => s.close(() => resolve()));
    });
  });

  it('names the address it cannot listen on', async () => {
    await expect(
      serveGrpc(new Server(), {
        address: '127.0.0.1:99999',
        healthServices: [],
        http1: { routes: new Map() },
      }),
    ).rejects.toThrow(/cannot listen on 127\.0\.0\.1:99999/);
  });
});
