// HTTP(S) front: routing of `/kbs/v0/*`, `/metrics` and `/healthz` as trustee's actix app does, body and
// head limits, error bodies that never carry a stack trace, metrics and one access-log line per request.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import {
  createServer as createHttpServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer, type ServerOptions as HttpsServerOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { SecureVersion } from 'node:tls';
import { accessRecord } from '@broker/cli';
import { StorageUnavailable, storageFault } from '@broker/kv-storage';
import { KbsError } from '@broker/protocol';
import type { Logger } from 'pino';
import type { Api } from './api.js';
import type { HttpServerConfig, SocketAddress, TlsConfig } from './config.js';
import { KbsServiceError } from './errors.js';
import { methodLabel, routeOf } from './http-route.js';
import type { KbsMetrics } from './metrics.js';
import { errorReply, type Reply } from './reply.js';
import type { ApiRequest } from './request.js';
import { sessionIdFromCookieHeader } from './session.js';

const KBS_PREFIX = '/kbs/v0/';
/** actix-web's request head limit; large Bearer tokens must fit. */
export const MAX_HEADER_BYTES = 128 * 1024;

export class HttpStartupError extends KbsServiceError {
  override readonly name: string = 'HttpStartupError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('HTTP_STARTUP_FAILED', message, options);
  }
}

interface ServerDeps {
  readonly api: Api;
  readonly metrics: KbsMetrics;
  readonly logger: Logger;
  readonly bodyLimit: number;
  /**
   * Runs before the admin API: answers this KBS's own endpoints (`/kbs/v0/admin/...`: the verdict log,
   * the console's), or hands on the request (a console session's turned into its admin JWT).
   */
  readonly preRoute?: (req: ApiRequest, headers: IncomingHttpHeaders) => Promise<Reply | ApiRequest>;
  /** The operator console's static files under `/console/`, when enabled. */
  readonly consolePage?: (method: string, path: string) => Reply;
  /** Whether `/metrics` is served here; false when `[http_server] metrics_socket` serves it. Default true. */
  readonly serveMetrics?: boolean;
}

class PayloadTooLarge extends KbsServiceError {
  override readonly name: string = 'PayloadTooLarge';
  constructor() {
    super('PAYLOAD_TOO_LARGE');
  }
}

export const REQUEST_ID_HEADER = 'x-request-id';
/** A client's `x-request-id` is kept when it is this short and printable ASCII without spaces. */
const CLIENT_REQUEST_ID = /^[\x21-\x7e]{1,64}$/;

/**
 * The id of a request: the client's `x-request-id` when it is short and printable (a proxy's or a
 * guest's id then runs through), else a new random UUID. It goes back in the answer's `x-request-id`,
 * into the access-log line and into the request's verdict.
 */
export function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === 'string' && CLIENT_REQUEST_ID.test(header) ? header : randomUUID();
}

/** The whole body, or PayloadTooLarge once it passes `limit` bytes. */
const EMPTY = Buffer.alloc(0);

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if ((declared === undefined || declared === '0') && req.headers['transfer-encoding'] === undefined) {
    // No body (the usual GET): nothing to wait for.
    req.resume();
    return Promise.resolve(EMPTY);
  }
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(new PayloadTooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.off('data', onData);
        req.pause();
        reject(new PayloadTooLarge());
        return;
      }
      chunks.push(c);
    };
    req.on('data', onData);
    req.once('end', () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size)));
    req.once('error', reject);
    req.once('aborted', () => reject(new Error('request aborted')));
  });
}

/** A separator or terminator that a decoded segment must not hold (`%2F`, `%5C`, `%00`). */
const FORBIDDEN_IN_SEGMENT = /[/\\\0]/;

/**
 * The percent-decoded segments of the path after `/kbs/v0/`, or undefined when the encoding is invalid or
 * a segment decodes to something holding `/`, `\` or NUL. The resource policy sees these segments and the
 * repository joins them with `/`: an encoded slash inside one would make the policy judge
 * `["default","app-secret/key"]` while `default/app-secret/key` is served, so such paths are refused.
 */
export function decodeSegments(rest: string): string[] | undefined {
  const out: string[] = [];
  for (const raw of rest.split('/')) {
    let s: string;
    try {
      s = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    if (FORBIDDEN_IN_SEGMENT.test(s)) return undefined;
    out.push(s);
  }
  return out;
}

/** When a handler throws something unexpected, the variant its endpoint would have used upstream. */
function fallbackError(plugin: string): KbsError {
  switch (plugin) {
    case 'auth':
      return new KbsError(
        'AttestationError',
        'Attestation error: RCAR handshake Auth failed: internal error',
      );
    case 'attest':
      return new KbsError('AttestationError', 'Attestation error: RCAR handshake Attest failed');
    case 'attestation-policy':
      return new KbsError('AttestationError', 'Attestation error: Set Attestation Policy failed');
    case 'reference-value':
      return new KbsError('RvpsError', 'RVPS configuration failed: internal error');
    case 'resource-policy':
      return new KbsError('PolicyEngineError', 'Policy engine error: internal error');
    default:
      return new KbsError('PluginInternalError');
  }
}

/** The query as the policy's `query` object; a repeated name keeps its last value, as serde does. */
export function queryObject(raw: string): Record<string, string> {
  // fromEntries defines own properties, so a `__proto__` parameter is kept as data like any other.
  return raw === '' ? {} : Object.fromEntries(new URLSearchParams(raw));
}

/** Whether a request is an operator's (admin API, resource writes): its answers may name the cause. */
function isAdminCall(req: ApiRequest): boolean {
  const plugin = req.segments[0];
  if (plugin === 'resource') return req.method === 'POST' || req.method === 'DELETE';
  if (plugin === 'reference-value' || plugin === 'resource-policy') return req.method === 'POST';
  return plugin === 'admin' || plugin === 'attestation-policy';
}

/** The StorageUnavailable in an error's cause chain, if any. */
function storageUnavailable(e: unknown): StorageUnavailable | undefined {
  let cur: unknown = e;
  for (let i = 0; i < 5 && cur instanceof Error; i++) {
    if (cur instanceof StorageUnavailable) return cur;
    cur = cur.cause;
  }
  return undefined;
}

function causeChain(e: unknown): string {
  const parts: string[] = [];
  let cur: unknown = e;
  for (let i = 0; i < 5 && cur instanceof Error; i++) {
    parts.push(cur.message);
    cur = cur.cause;
  }
  return parts.join(': ');
}

export function createRequestHandler(deps: ServerDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const { api, metrics, logger, bodyLimit } = deps;

  const send = (res: ServerResponse, reply: Reply): number => {
    const { body } = reply;
    const length = typeof body === 'string' ? Buffer.byteLength(body, 'utf8') : body.byteLength;
    res.writeHead(reply.status, { ...reply.headers, 'content-length': String(length) });
    // A string body goes out in the same socket write as the head (node:http joins them); a Buffer would
    // be a second chunk of a writev.
    res.end(body);
    return length;
  };

  const handleKbs = async (
    req: IncomingMessage,
    rawPath: string,
    rawQuery: string,
    requestId: string,
  ): Promise<Reply> => {
    const method = req.method ?? '';
    // actix routes GET, POST, PUT and DELETE on `/kbs/v0/{path:.*}`; other methods get 405.
    if (method !== 'GET' && method !== 'POST' && method !== 'PUT' && method !== 'DELETE') {
      req.resume();
      return { status: 405, headers: { connection: 'close' }, body: '' };
    }
    const rest = rawPath.slice(KBS_PREFIX.length);
    const segments = decodeSegments(rest);
    if (segments === undefined) {
      req.resume();
      return errorReply(new KbsError('InvalidRequestPath', `Request path ${rest.slice(0, 256)} is invalid`));
    }
    let body: Buffer;
    try {
      body = await readBody(req, bodyLimit);
    } catch (e) {
      if (e instanceof PayloadTooLarge) {
        // actix's PayloadConfig answer; the connection is closed so the rest of the body is never read.
        return {
          status: 413,
          headers: { 'content-type': 'text/plain; charset=utf-8', connection: 'close' },
          body: 'A payload reached size limit.',
        };
      }
      throw e;
    }
    const apiReq: ApiRequest = {
      method,
      uri: req.url ?? rawPath,
      segments,
      query: queryObject(rawQuery),
      authorization: req.headers.authorization,
      sessionId: sessionIdFromCookieHeader(req.headers.cookie),
      body,
      peer: req.socket.remoteAddress,
      requestId,
    };
    const reply = await answer(apiReq, req);
    // Admin answers (verdicts with claims, the console's CSRF token, policies) are never for a cache.
    return segments[0] === 'admin'
      ? { ...reply, headers: { ...reply.headers, 'cache-control': 'no-store' } }
      : reply;
  };

  const answer = async (apiReq: ApiRequest, req: IncomingMessage): Promise<Reply> => {
    const { segments } = apiReq;
    try {
      const routed = deps.preRoute === undefined ? apiReq : await deps.preRoute(apiReq, req.headers);
      if (!('segments' in routed)) return routed;
      return await api.handle(routed);
    } catch (e) {
      const plugin = segments[0] ?? '';
      const fault = storageFault(e);
      if (fault !== undefined) {
        // A full or read-only volume: the operator's to fix, so the log and an admin's answer name it.
        const err = e instanceof KbsError ? e : fallbackError(plugin);
        logger.error(
          { kind: err.kind, plugin, storage: fault.code, cause: causeChain(e), requestId: apiReq.requestId },
          `${err.detail}: ${fault.message}`,
        );
        return errorReply(
          isAdminCall(apiReq) ? new KbsError(err.kind, `${err.detail}: ${fault.message}`) : err,
        );
      }
      if (e instanceof KbsError) {
        logger.warn(
          { kind: e.kind, plugin, cause: causeChain(e.cause) || undefined, requestId: apiReq.requestId },
          e.detail,
        );
        return errorReply(e);
      }
      const down = storageUnavailable(e);
      if (down !== undefined) {
        // Expected while the store (Redis) is away: the client gets its 401 and retries later.
        logger.warn(
          { plugin, reason: down.message, requestId: apiReq.requestId },
          'storage backend unavailable',
        );
      } else
        logger.error(
          { plugin, err: e, requestId: apiReq.requestId },
          'unexpected failure while handling a request',
        );
      return errorReply(fallbackError(plugin));
    }
  };

  return (req, res) => {
    const started = process.hrtime.bigint();
    const uri = req.url ?? '/';
    const q = uri.indexOf('?');
    const rawPath = q < 0 ? uri : uri.slice(0, q);
    const rawQuery = q < 0 ? '' : uri.slice(q + 1);
    const isKbs = rawPath.startsWith('/kbs');
    const requestId = requestIdOf(req.headers[REQUEST_ID_HEADER]);
    res.setHeader(REQUEST_ID_HEADER, requestId);
    if (isKbs) {
      metrics.activeConnections.inc();
      const len = Number(req.headers['content-length'] ?? 0);
      metrics.httpRequestSize.observe(Number.isFinite(len) ? len : 0);
    }
    let size = 0;
    res.once('close', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (isKbs) {
        metrics.activeConnections.dec();
        metrics.httpResponseSize.observe(size);
      }
      metrics.countHttp(methodLabel(req.method), routeOf(rawPath), res.statusCode, seconds);
      // The access record shared with api-server-rest; the query is left out (it may carry data). The
      // request id comes last, after the shared fields.
      logger.info(
        {
          ...accessRecord({
            method: req.method ?? '',
            path: rawPath,
            status: res.statusCode,
            bytes: size,
            ms: seconds * 1e3,
            peer: req.socket.remoteAddress,
            ua: req.headers['user-agent'],
          }),
          requestId,
        },
        'access',
      );
    });

    const finish = (reply: Reply) => {
      if (!res.headersSent) size = send(res, reply);
    };
    // Only reading the request can fail outside the API's own error mapping (the client went away).
    const fail = (e: unknown) => {
      logger.warn({ reason: (e as Error).message, requestId }, 'request dropped');
      res.destroy();
    };

    if (rawPath.startsWith(KBS_PREFIX)) {
      handleKbs(req, rawPath, rawQuery, requestId).then(finish, fail);
      return;
    }
    req.resume();
    if (deps.consolePage !== undefined && (rawPath === '/console' || rawPath.startsWith('/console/'))) {
      finish(deps.consolePage(req.method ?? '', rawPath));
    } else if (rawPath === '/healthz') {
      finish(
        req.method === 'GET'
          ? { status: 200, headers: {}, body: '' }
          : { status: 405, headers: {}, body: '' },
      );
    } else if (rawPath === '/metrics' && deps.serveMetrics !== false) {
      metricsReply(metrics, logger, req.method).then(finish);
    } else {
      finish({ status: 404, headers: {}, body: '' });
    }
  };
}

/** `GET /metrics`: the registry's text. */
async function metricsReply(metrics: KbsMetrics, logger: Logger, method: string | undefined): Promise<Reply> {
  if (method !== 'GET') return { status: 405, headers: {}, body: '' };
  try {
    const text = await metrics.text();
    return { status: 200, headers: { 'content-type': metrics.registry.contentType }, body: text };
  } catch (e) {
    logger.error({ err: e }, 'metrics export failed');
    return errorReply(new KbsError('PrometheusError'));
  }
}

/**
 * The `[http_server] metrics_socket` listener's handler: `/metrics` and `/healthz` only, over plain HTTP,
 * for a scraper on the loopback or pod network; everything else is 404. Scrapes are logged at debug.
 */
export function createMetricsHandler(
  metrics: KbsMetrics,
  logger: Logger,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    req.resume();
    const path = (req.url ?? '/').split('?')[0];
    const reply: Promise<Reply> =
      path === '/metrics'
        ? metricsReply(metrics, logger, req.method)
        : Promise.resolve(
            path === '/healthz'
              ? { status: req.method === 'GET' ? 200 : 405, headers: {}, body: '' }
              : { status: 404, headers: {}, body: '' },
          );
    void reply.then((r) => {
      res.writeHead(r.status, { ...r.headers, 'content-length': String(Buffer.byteLength(r.body)) });
      res.end(r.body);
      logger.debug({ method: req.method, path, status: r.status }, 'metrics listener');
    });
  };
}

/** Starts the plain-HTTP metrics listener on `socket`. */
export async function listenMetrics(
  socket: SocketAddress,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ readonly server: Server; readonly address: AddressInfo; close(): Promise<void> }> {
  const server = createHttpServer(
    { maxHeaderSize: 16 * 1024, requestTimeout: 10_000, headersTimeout: 10_000, keepAliveTimeout: 5_000 },
    handler,
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) =>
      reject(new HttpStartupError(`cannot listen on ${formatSocket(socket)}: ${e.message}`)),
    );
    server.listen({ host: socket.host, port: socket.port }, () => resolve());
  });
  return { server, address: server.address() as AddressInfo, close: () => closeAll([server]) };
}

const TLS_VERSIONS: Record<string, SecureVersion> = { '1.2': 'TLSv1.2', '1.3': 'TLSv1.3' };

/** trustee's TLS profiles (Mozilla's), then any explicit settings on top, as trustee applies them. */
export function tlsOptions(
  tls: TlsConfig,
): Pick<HttpsServerOptions, 'minVersion' | 'maxVersion' | 'ciphers' | 'ecdhCurve'> {
  const out: Pick<HttpsServerOptions, 'minVersion' | 'maxVersion' | 'ciphers' | 'ecdhCurve'> = {
    minVersion: tls.profile === 'modern' ? 'TLSv1.3' : 'TLSv1.2',
  };
  if (tls.minVersion !== undefined) out.minVersion = TLS_VERSIONS[tls.minVersion];
  if (tls.maxVersion !== undefined) out.maxVersion = TLS_VERSIONS[tls.maxVersion];
  if (tls.ciphers !== undefined) out.ciphers = tls.ciphers;
  if (tls.groups !== undefined) out.ecdhCurve = tls.groups;
  return out;
}

function formatSocket(s: SocketAddress): string {
  return s.host.includes(':') ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`;
}

export interface Listening {
  readonly servers: readonly Server[];
  readonly addresses: readonly AddressInfo[];
  /** The key and certificate the HTTPS servers started with; absent for plain HTTP. */
  readonly tls?: { readonly key: Buffer; readonly cert: Buffer };
  close(): Promise<void>;
}

/** How long requests in flight may take to finish once the KBS is asked to stop. */
const SHUTDOWN_GRACE_MS = 5_000;

async function closeAll(servers: readonly Server[], graceMs = SHUTDOWN_GRACE_MS): Promise<void> {
  await Promise.all(
    servers.map(
      (s) =>
        new Promise<void>((resolve) => {
          // Stop accepting, drop idle keep-alive connections, let requests in flight finish.
          const force = setTimeout(() => s.closeAllConnections(), graceMs);
          force.unref();
          s.close(() => {
            clearTimeout(force);
            resolve();
          });
          s.closeIdleConnections();
        }),
    ),
  );
}

/** Starts one server per configured socket; all or none. */
export async function listen(
  config: HttpServerConfig,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<Listening> {
  const common = {
    maxHeaderSize: MAX_HEADER_BYTES,
    requestTimeout: 30_000,
    headersTimeout: 20_000,
    keepAliveTimeout: 5_000,
  };
  let https: HttpsServerOptions | undefined;
  let material: { key: Buffer; cert: Buffer } | undefined;
  if (!config.insecureHttp) {
    if (config.privateKey === undefined || config.certificate === undefined) {
      throw new HttpStartupError('HTTPS initialization failed: private_key and certificate are required');
    }
    let key: Buffer;
    let cert: Buffer;
    try {
      key = await readFile(config.privateKey);
      cert = await readFile(config.certificate);
    } catch (e) {
      throw new HttpStartupError(`HTTPS initialization failed: ${(e as Error).message}`);
    }
    https = { ...common, ...tlsOptions(config.tls), key, cert };
    material = { key, cert };
  }
  const servers: Server[] = [];
  try {
    for (const socket of config.sockets) {
      let server: Server;
      try {
        server = https ? createHttpsServer(https, handler) : createHttpServer(common, handler);
      } catch (e) {
        throw new HttpStartupError(`HTTPS initialization failed: ${(e as Error).message}`);
      }
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', (e) =>
          reject(
            new HttpStartupError(
              `HTTP${https ? 'S' : ''} initialization failed: cannot listen on ${formatSocket(socket)}: ${e.message}`,
            ),
          ),
        );
        server.listen({ host: socket.host, port: socket.port }, () => resolve());
      });
    }
  } catch (e) {
    await closeAll(servers, 0);
    throw e;
  }
  return {
    servers,
    addresses: servers.map((s) => s.address() as AddressInfo),
    ...(material !== undefined && { tls: material }),
    close: () => closeAll(servers),
  };
}
