// gRPC and a few plain HTTP/1.1 GET routes on one port, as trustee's grpc-as serves its
// `/.well-known/jwks.json` beside the gRPC services (tonic with `accept_http1`). Our own listener
// decides per connection: in plaintext by the first bytes (HTTP/2's client preface is gRPC, anything
// else HTTP/1.1), under TLS by the ALPN protocol agreed. gRPC connections go to grpc-js through a
// connection injector; HTTP/1.1 ones to a node:http server that answers only the routes given, reads
// no request body, bounds the header size and closes connections that do not finish in time.
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Server as NetServer, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import type { Logger } from '@broker/cli';
import { type Server, ServerCredentials } from '@grpc/grpc-js';
import { RvpsConfigError } from './errors.js';
import type { ServerTls } from './tls.js';

/** What every HTTP/2 connection opens with (RFC 9113 section 3.4). */
export const HTTP2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
/** Largest HTTP/1.1 request head (request line and headers) read; a larger one is answered 431. */
export const MAX_HTTP1_HEAD_BYTES = 8 * 1024;
/**
 * How long a connection has to show its protocol (plaintext), finish its TLS handshake, or send a
 * whole HTTP/1.1 request head before it is closed.
 */
export const SHARED_PORT_TIMEOUT_MS = 10_000;

/** A JSON document served at a path to `GET` (and `HEAD`). */
export type JsonRoute = () => unknown;

export interface Http1Options {
  /** Path → the JSON document it answers; every other path is 404. */
  readonly routes: ReadonlyMap<string, JsonRoute>;
  /** Overrides SHARED_PORT_TIMEOUT_MS. */
  readonly timeoutMs?: number;
}

/**
 * The protocol a plaintext connection speaks, from its first bytes: `h2` once the whole HTTP/2 preface
 * arrived, `http1` at the first byte that differs from it, undefined while the bytes are still a prefix.
 */
export function sniffProtocol(head: Buffer): 'h2' | 'http1' | undefined {
  const n = Math.min(head.length, HTTP2_PREFACE.length);
  if (head.subarray(0, n).compare(HTTP2_PREFACE, 0, n) !== 0) return 'http1';
  return n === HTTP2_PREFACE.length ? 'h2' : undefined;
}

/**
 * ALPN under TLS: `http/1.1` whenever the client offers it (curl, browsers), else `h2` (gRPC clients
 * offer only h2); a client offering neither is refused, as a TLS server without a common protocol does.
 */
export function chooseAlpn(offered: readonly string[]): string | undefined {
  if (offered.includes('http/1.1')) return 'http/1.1';
  if (offered.includes('h2')) return 'h2';
  return undefined;
}

export interface SharedListener {
  readonly port: number;
  /** Stops accepting, closes HTTP/1.1 and undecided connections; gRPC ones are grpc-js's to drain. */
  close(): void;
}

/** `host:port` or `[v6]:port`, as grpc-js's bindAsync takes it. */
export function splitHostPort(address: string): { host: string; port: number } {
  const m = /^(?:\[([0-9A-Fa-f:.%\w-]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(address);
  const port = Number(m?.[3]);
  if (m === null || port > 65535)
    throw new RvpsConfigError(`cannot listen on ${address}: expected HOST:PORT`);
  return { host: (m[1] ?? m[2]) as string, port };
}

/** Listens on `address`, handing gRPC connections to `grpc` and HTTP/1.1 ones to `http1.routes`. */
export async function listenShared(
  grpc: Server,
  address: string,
  http1: Http1Options,
  tls: ServerTls | undefined,
  logger?: Logger,
): Promise<SharedListener> {
  const { host, port } = splitHostPort(address);
  const timeoutMs = http1.timeoutMs ?? SHARED_PORT_TIMEOUT_MS;
  // Sessions injected here are grpc-js's: its tryShutdown drains them with the rest.
  const injector = grpc.createConnectionInjector(ServerCredentials.createInsecure());
  // Plaintext connections not yet handed on, and HTTP/1.1 ones: closed on close().
  const undecided = new Set<Socket>();
  const httpSockets = new Set<Socket>();
  const deadlines = new WeakMap<Socket, NodeJS.Timeout>();
  const httpServer = createHttpServer({ maxHeaderSize: MAX_HTTP1_HEAD_BYTES }, (req, res) =>
    answer(req, res, http1.routes, logger),
  );
  httpServer.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    logger?.debug({ err: err.code ?? err.message }, 'HTTP/1.1 request refused');
    if (!socket.writable) return socket.destroy();
    const status =
      err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
    socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
  });
  // The request head arrived in time: the answer follows at once and closes the connection.
  httpServer.on('request', (req: IncomingMessage) => clearTimeout(deadlines.get(req.socket)));

  /** `socket` has `timeoutMs` to show its protocol and, for HTTP/1.1, to send its request head. */
  const startDeadline = (socket: Socket) => {
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    timer.unref();
    deadlines.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  };
  const toHttp1 = (socket: Socket) => {
    undecided.delete(socket);
    httpSockets.add(socket);
    socket.once('close', () => httpSockets.delete(socket));
    httpServer.emit('connection', socket);
  };
  const toGrpc = (socket: Socket) => {
    clearTimeout(deadlines.get(socket));
    undecided.delete(socket);
    injector.injectConnection(socket);
  };
  const onError = (err: Error) => logger?.debug({ err: err.message }, 'connection error');

  /** Reads a plaintext connection's first bytes until they tell HTTP/2 from HTTP/1.1, then hands it on. */
  const sniff = (socket: Socket) => {
    let head = Buffer.alloc(0);
    const onReadable = () => {
      for (
        let chunk = socket.read() as Buffer | null;
        chunk !== null;
        chunk = socket.read() as Buffer | null
      ) {
        head = Buffer.concat([head, chunk]);
      }
      const protocol = sniffProtocol(head);
      if (protocol === undefined) return;
      socket.off('readable', onReadable);
      socket.unshift(head);
      if (protocol === 'h2') toGrpc(socket);
      else toHttp1(socket);
    };
    socket.on('readable', onReadable);
  };

  let listener: NetServer;
  if (tls === undefined) {
    listener = createTcpServer((socket) => {
      socket.on('error', onError);
      undecided.add(socket);
      socket.once('close', () => undecided.delete(socket));
      startDeadline(socket);
      sniff(socket);
    });
  } else {
    const server = createTlsServer(
      {
        cert: tls.certChain,
        key: tls.privateKey,
        ...(tls.clientCa !== undefined && { ca: tls.clientCa, requestCert: true, rejectUnauthorized: false }),
        ALPNCallback: ({ protocols }) => chooseAlpn(protocols),
        handshakeTimeout: timeoutMs,
      },
      (socket: TLSSocket) => {
        socket.on('error', onError);
        if (socket.alpnProtocol === 'h2') return toGrpc(socket);
        startDeadline(socket);
        toHttp1(socket);
      },
    );
    // With a listener, a failed or timed-out handshake no longer destroys the socket by itself.
    server.on('tlsClientError', (err, socket) => {
      logger?.debug({ err: err.message }, 'TLS handshake failed');
      socket.destroy();
    });
    listener = server;
  }
  const bound = await new Promise<number>((resolve, reject) => {
    listener.once('error', (err) => reject(new Error(`cannot listen on ${address}: ${err.message}`)));
    listener.listen({ host, port }, () => {
      const a = listener.address();
      resolve(typeof a === 'object' && a !== null ? a.port : port);
    });
  });
  listener.on('error', (err) => logger?.error({ err: err.message }, 'listener error'));
  return {
    port: bound,
    close: () => {
      listener.close();
      // Undecided and HTTP/1.1 connections: an answer is immediate, nothing to wait for. TLS handshakes
      // under way end within their timeout.
      for (const socket of [...undecided, ...httpSockets]) socket.destroy();
      httpServer.close();
    },
  };
}

function answer(
  req: IncomingMessage,
  res: ServerResponse,
  routes: ReadonlyMap<string, JsonRoute>,
  logger: Logger | undefined,
): void {
  const { status, body, headers } = respond(req, routes, logger);
  // One request per connection, whose body is never read.
  res.writeHead(status, {
    connection: 'close',
    'content-type': body === '' ? 'text/plain' : 'application/json',
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}

function respond(
  req: IncomingMessage,
  routes: ReadonlyMap<string, JsonRoute>,
  logger: Logger | undefined,
): { status: number; body: string; headers?: Record<string, string> } {
  const path = (req.url ?? '').split('?')[0] as string;
  const route = routes.get(path);
  if (route === undefined) return { status: 404, body: '' };
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    return { status: 405, body: '', headers: { allow: 'GET, HEAD' } };
  }
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')) {
    return { status: 413, body: '' };
  }
  try {
    const body = JSON.stringify(route());
    logger?.debug({ path }, 'HTTP/1.1 route answered');
    return { status: 200, body };
  } catch (e) {
    logger?.warn({ path, err: (e as Error).message }, 'HTTP/1.1 route failed');
    return { status: 500, body: '' };
  }
}
