/**
 * The HTTP side of api-server-rest on node:http: limits on what a client may
 * send, the access log, graceful shutdown, and the wiring of the router to the
 * CDH/AA backends.
 */

import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { accessRecord } from '@broker/cli';
import pino, { type Logger } from 'pino';
import type { AttestationBackend, ResourceBackend } from './backends.js';
import { ConnectionTable } from './connections.js';
import { ApiServerError, type ApiServerErrorCode } from './errors.js';
import { checkPluginNames, PluginListError } from './plugins.js';
import { BodyTooLargeError, type Feature, type Reply, Router } from './router.js';
import { parseRequestTarget } from './target.js';
import { attestationAgentBackend, dataHubBackend, type TtrpcBackendOptions } from './ttrpc-backends.js';
import { API_SERVER_REST_VERSION } from './version.js';

/** Upstream's `--bind` default. */
export const DEFAULT_BIND = '127.0.0.1:8006';

export interface ApiServerLimits {
  /** Largest request body read (only `POST /aa/aael` reads one); default 64 KiB. Larger gets 413. */
  readonly maxBodyBytes?: number;
  /** Largest request line plus headers; default 16 KiB. Larger gets 431. */
  readonly maxHeaderBytes?: number;
  /** Most header fields in a request; default 64. More gets 431. */
  readonly maxHeaders?: number;
  /** Time allowed to send the headers; default 5 s (clients are local: they send them at once). */
  readonly headersTimeoutMs?: number;
  /** Time allowed to send the whole request; default 10 s. Does not bound the CDH/AA call. */
  readonly requestTimeoutMs?: number;
  /** Idle time before a keep-alive connection is closed; default 5 s. */
  readonly keepAliveTimeoutMs?: number;
  /**
   * Most simultaneous connections; default 1024. A new connection past it closes the one that has
   * been idle (or sending its headers) longest, never one whose request is being answered.
   */
  readonly maxConnections?: number;
  /** Most simultaneous connections from one peer address, with the same rule; default 64. */
  readonly maxConnectionsPerPeer?: number;
}

export interface ApiServerOptions {
  /** Which half of the API is served: `resource` (CDH), `attestation` (AA) or `all`. */
  readonly features: Feature;
  /** `IPv4:port` or `[IPv6]:port`; default `127.0.0.1:8006`. Port 0 picks a free port. */
  readonly bind?: string;
  /** CDH ttrpc address; default `unix:///run/confidential-containers/cdh.sock`. */
  readonly cdhAddr?: string;
  /** AA ttrpc address; default `unix:///run/confidential-containers/attestation-agent/attestation-agent.sock`. */
  readonly aaAddr?: string;
  /** Replaces the CDH ttrpc client (tests, embedding). Used only when the feature includes `resource`. */
  readonly resourceBackend?: ResourceBackend;
  /** Replaces the AA ttrpc client. Used only when the feature includes `attestation`. */
  readonly attestationBackend?: AttestationBackend;
  /** Deadlines of the ttrpc clients. */
  readonly ttrpc?: TtrpcBackendOptions;
  readonly limits?: ApiServerLimits;
  /**
   * KBS plugins reachable at `GET /cdh/plugin/<plugin>/<path>?<query>`; default none, as upstream (only
   * `kbs:///` resources). Needs the `resource` feature; `resource` itself cannot be one.
   */
  readonly plugins?: readonly string[];
  /** Which peers may call the API; default loopback only (others get 403). */
  readonly allowPeer?: (address: string | undefined) => boolean;
  /** `version` reported by `/info`. */
  readonly version?: string;
  /** Access and error log; default silent. */
  readonly logger?: Logger;
}

export interface ApiServer {
  /** The bound address (with the real port when `bind` asked for port 0). */
  readonly address: { readonly host: string; readonly port: number };
  /** `http://host:port`, for clients. */
  readonly url: string;
  /**
   * Stops accepting connections, lets requests in flight finish for up to
   * `graceMs` (default 5 s), then cuts what is left and closes the ttrpc clients.
   */
  close(options?: { graceMs?: number }): Promise<void>;
  /** Client connections open now. */
  readonly connections: number;
}

/** `--bind` is not an `IP:port` socket address. */
export class InvalidBindAddress extends ApiServerError {
  override readonly code: ApiServerErrorCode = 'BIND_ADDRESS_INVALID';
  override readonly name: string = 'InvalidBindAddress';
}

/** Parses `IPv4:port` or `[IPv6]:port`, as Rust's `SocketAddr` parser accepts them (no host names). */
export function parseBindAddress(bind: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(bind);
  const host = m?.[1] ?? m?.[2];
  const family = host === undefined ? 0 : net.isIP(host);
  const v6 = m?.[1] !== undefined;
  if (m === null || host === undefined || family === 0 || (family === 6) !== v6 || host.includes('%')) {
    throw new InvalidBindAddress(
      `invalid bind address ${JSON.stringify(bind.slice(0, 100))}: expected IP:port`,
    );
  }
  const port = Number(m[3]);
  if (port > 65535)
    throw new InvalidBindAddress(`invalid bind address ${JSON.stringify(bind)}: port out of range`);
  return { host, port };
}

const DEFAULT_LIMITS = {
  maxBodyBytes: 64 * 1024,
  maxHeaderBytes: 16 * 1024,
  maxHeaders: 64,
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 1024,
  maxConnectionsPerPeer: 64,
} satisfies Required<ApiServerLimits>;

const includesResource = (f: Feature) => f === 'resource' || f === 'all';
const includesAttestation = (f: Feature) => f === 'attestation' || f === 'all';

/** Reads the whole request body, failing fast (without reading) when it is declared too large. */
function readBody(req: http.IncomingMessage, limit: number): Promise<Uint8Array> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(new BodyTooLargeError(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(new BodyTooLargeError(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(new Error(`reading the request body failed: ${err.message}`));
    };
    const onClose = () => {
      cleanup();
      reject(new Error('reading the request body failed: connection closed'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/** The path for logs: no query (runtime data), bounded length, control characters escaped by pino's JSON. */
function logPath(target: string): string {
  const { path } = parseRequestTarget(target);
  return path.length > 256 ? `${path.slice(0, 256)}…` : path;
}

function rawReply(socket: Duplex, status: number, reason: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(reason)}\r\n\r\n${reason}`,
  );
}

/** Starts api-server-rest; resolves once it is listening. */
export async function startApiServer(options: ApiServerOptions): Promise<ApiServer> {
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const logger = options.logger ?? pino({ level: 'silent' });
  const { host, port } = parseBindAddress(options.bind ?? DEFAULT_BIND);
  const plugins = checkPluginNames(options.plugins ?? []);
  if (plugins.length > 0 && !includesResource(options.features)) {
    throw new PluginListError(
      `KBS plugins are served under /cdh, which needs the resource feature (--features resource or all), not ${options.features}`,
    );
  }

  const resource = includesResource(options.features)
    ? (options.resourceBackend ?? dataHubBackend(options.cdhAddr, options.ttrpc))
    : undefined;
  let attestation: AttestationBackend | undefined;
  try {
    attestation = includesAttestation(options.features)
      ? (options.attestationBackend ?? attestationAgentBackend(options.aaAddr, options.ttrpc))
      : undefined;
  } catch (err) {
    await resource?.close();
    throw err;
  }
  const closeBackends = async () => {
    await Promise.all([resource?.close(), attestation?.close()]);
  };

  const router = new Router({
    feature: options.features,
    version: options.version ?? API_SERVER_REST_VERSION,
    resource,
    attestation,
    allowPeer: options.allowPeer,
    plugins,
  });

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const started = process.hrtime.bigint();
    const method = req.method ?? '';
    const target = req.url ?? '';
    let reply: Reply;
    if (req.rawHeaders.length / 2 > limits.maxHeaders) {
      reply = {
        status: 431,
        contentType: 'text/plain; charset=utf-8',
        body: 'Request Header Fields Too Large',
        route: 'limits',
        close: true,
      };
    } else {
      try {
        reply = await router.route({
          method,
          target,
          peerAddress: req.socket.remoteAddress,
          readBody: () => readBody(req, limits.maxBodyBytes),
        });
      } catch (err) {
        // The router answers every expected failure itself; this is a bug, still answered, not a crash.
        const message = err instanceof Error ? err.message : String(err);
        logger.error({ err }, 'unexpected error while routing');
        reply = {
          status: 500,
          contentType: 'text/plain; charset=utf-8',
          body: message,
          route: 'error',
          error: message,
        };
      }
    }
    const body = typeof reply.body === 'string' ? Buffer.from(reply.body, 'utf8') : reply.body;
    // The access record shared with the KBS, plus which route answered and the failure text.
    const record = (status: number) => ({
      ...accessRecord({
        method,
        path: logPath(target),
        status,
        bytes: body.length,
        ms: elapsedMs(started),
        peer: req.socket.remoteAddress,
        ua: req.headers['user-agent'],
      }),
      route: reply.route,
      ...(reply.error === undefined ? {} : { error: reply.error.slice(0, 1024) }),
    });
    if (res.destroyed || res.writableEnded) {
      // 499: the client went away before the reply.
      logger.info(record(499), 'access');
      return;
    }
    res.statusCode = reply.status;
    res.setHeader('Content-Type', reply.contentType);
    res.setHeader('Content-Length', body.length);
    if (reply.close === true) res.setHeader('Connection', 'close');
    res.end(body);
    if (reply.status >= 500) logger.warn(record(reply.status), 'access');
    else logger.info(record(reply.status), 'access');
  };

  const server = http.createServer(
    {
      maxHeaderSize: limits.maxHeaderBytes,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // node checks the header and request timeouts at this interval (30 s by default), so a slow
      // client would otherwise keep its connection up to 30 s past its deadline.
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
      // hyper does not insist on a Host header; neither do we.
      requireHostHeader: false,
    },
    (req, res) => {
      handle(req, res).catch((err) => {
        logger.error({ err }, 'failed to send a reply');
        res.destroy();
      });
    },
  );
  // One more than the limit so an over-limit request is seen (node drops headers past the count silently).
  server.maxHeadersCount = limits.maxHeaders + 1;
  const table = new ConnectionTable(limits, (peer, cap) =>
    logger.debug({ peer, cap }, 'connection closed to make room for a new one'),
  );
  server.on('connection', (socket: net.Socket) => table.admit(socket));
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    table.requestStarted(req.socket);
    res.once('close', () => table.requestEnded(req.socket));
  });
  // A backstop only: the table keeps within maxConnections, but closed sockets are counted by node
  // until their close event, so a burst may briefly pass it.
  server.maxConnections = 2 * limits.maxConnections;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const code = err.code ?? '';
    logger.debug({ code }, 'malformed request');
    if (code === 'ECONNRESET' || code === 'EPIPE') {
      socket.destroy();
      return;
    }
    if (code === 'HPE_HEADER_OVERFLOW') rawReply(socket, 431, 'Request Header Fields Too Large');
    else if (code === 'ERR_HTTP_REQUEST_TIMEOUT') rawReply(socket, 408, 'Request Timeout');
    else rawReply(socket, 400, 'Bad Request');
  });

  try {
    await new Promise<void>((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      server.once('error', onError);
      server.listen({ host, port, exclusive: true }, () => {
        server.off('error', onError);
        resolve();
      });
    });
  } catch (err) {
    await closeBackends();
    throw new ApiServerError(`cannot listen on ${options.bind ?? DEFAULT_BIND}: ${(err as Error).message}`, {
      cause: err,
      code: 'LISTEN_FAILED',
    });
  }
  server.on('error', (err) => logger.error({ err }, 'HTTP server error'));

  const bound = server.address() as net.AddressInfo;
  const address = { host: bound.address, port: bound.port };
  const url = `http://${net.isIPv6(address.host) ? `[${address.host}]` : address.host}:${address.port}`;
  logger.info({ url, features: options.features }, `API Server listening on ${url}`);
  if (plugins.length > 0) {
    logger.info({ plugins }, `KBS plugins reachable at ${url}/cdh/plugin/<plugin>/…: ${plugins.join(', ')}`);
  }

  let closing: Promise<void> | null = null;
  return {
    address,
    url,
    get connections() {
      return table.size;
    },
    close(closeOptions = {}) {
      closing ??= (async () => {
        const graceMs = closeOptions.graceMs ?? 5_000;
        const done = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const timer = setTimeout(() => server.closeAllConnections(), graceMs);
        await done;
        clearTimeout(timer);
        await closeBackends();
      })();
      return closing;
    },
  };
}

function elapsedMs(started: bigint): number {
  return Number(process.hrtime.bigint() - started) / 1e6;
}
