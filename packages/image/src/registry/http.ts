/**
 * HTTP for the registry client: an undici `Agent` (kept connections, at most
 * 16 per origin, TLS sessions reused), an idle timeout, bounded bodies, and
 * redirects that never carry credentials to another origin and never
 * downgrade https to http. Bodies stream: nothing here holds more than
 * undici's socket buffers.
 */

import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { createSecureContext, rootCertificates } from 'node:tls';
import { ImageError, type ImageErrorCode } from '../errors.js';
import { type ProxySettings, type ResolvedProxies, resolveProxies } from './proxy.js';
import {
  Agent,
  type Dispatcher,
  newProxyAgent,
  type ProxyAgent,
  request,
  errors as undiciErrors,
} from './undici.js';

/** Redirects followed for one request. */
export const MAX_REDIRECTS = 10;
/** Idle time (no bytes either way) after which a request fails. */
export const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
/** Connections kept per registry (or blob store) origin. */
const CONNECTIONS_PER_ORIGIN = 16;
/** How long an idle connection is kept (a server's `Keep-Alive: timeout` hint lowers it). */
const KEEP_ALIVE_MS = 30_000;

export interface HttpResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** The body; transport failures while it is read are `HttpError`s. */
  readonly body: Readable;
  /** The URL that answered (after redirects). */
  readonly url: URL;
}

export interface HttpRequest {
  readonly method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  readonly url: URL;
  readonly headers?: Readonly<Record<string, string>>;
  /** A body, or a factory (so that a retried request can send it again). */
  readonly body?: Uint8Array | (() => Readable);
  readonly signal?: AbortSignal;
  /** Follow 3xx answers of GET and HEAD (default true). */
  readonly followRedirects?: boolean;
}

/** A transport-level failure (connection, TLS, timeout, refused redirect). */
export class HttpError extends ImageError {
  override readonly code: ImageErrorCode = 'HTTP_FAILED';
  override readonly name: string = 'HttpError';
}

export interface HttpClientOptions {
  /** Extra PEM certificates trusted besides the system roots. */
  readonly ca?: readonly string[];
  readonly idleTimeoutMs?: number;
  readonly userAgent?: string;
  /**
   * Proxies (`https_proxy` for https URLs through CONNECT, `http_proxy` for
   * http URLs in absolute form, `no_proxy` hosts direct); see `./proxy.ts`.
   */
  readonly proxy?: ProxySettings;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Headers Node's HTTP client keeps once (the first value) when a server repeats them. */
const SINGLE_VALUED = new Set([
  'age',
  'authorization',
  'content-length',
  'content-type',
  'etag',
  'expires',
  'from',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'referer',
  'retry-after',
  'server',
  'user-agent',
]);

/** undici's header record in the shape of node:http's `IncomingHttpHeaders`. */
function nodeHeaders(raw: Record<string, string | string[] | undefined>): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    if (name === 'set-cookie') out[name] = Array.isArray(value) ? value : [value];
    else if (!Array.isArray(value)) out[name] = value;
    else out[name] = SINGLE_VALUED.has(name) ? value[0] : value.join(', ');
  }
  return out;
}

export class HttpClient {
  readonly #agent: Agent;
  readonly #idleTimeoutMs: number;
  readonly #userAgent: string;
  readonly #proxies: ResolvedProxies | undefined;
  /** One agent per proxy URL, made on first use. */
  readonly #proxyAgents = new Map<string, ProxyAgent>();
  readonly #secureContext: ReturnType<typeof createSecureContext> | undefined;

  constructor(options: HttpClientOptions = {}) {
    this.#idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.#userAgent = options.userAgent ?? 'broker-image/0.1.0';
    this.#proxies = options.proxy !== undefined ? resolveProxies(options.proxy) : undefined;
    const ca = options.ca ?? [];
    // The roots and the extra CAs made into one TLS context once, not at every connection.
    this.#secureContext =
      ca.length > 0 ? createSecureContext({ ca: [...rootCertificates, ...ca] }) : undefined;
    this.#agent = new Agent({
      ...this.#agentOptions(),
      ...(this.#secureContext !== undefined ? { connect: { secureContext: this.#secureContext } } : {}),
    });
  }

  #agentOptions() {
    return {
      connections: CONNECTIONS_PER_ORIGIN,
      keepAliveTimeout: KEEP_ALIVE_MS,
      keepAliveMaxTimeout: KEEP_ALIVE_MS,
      // undici's two timers are exactly "no answer" and "no data" for this long.
      headersTimeout: this.#idleTimeoutMs,
      bodyTimeout: this.#idleTimeoutMs,
    };
  }

  /** The agent for `url`: direct, or through the proxy its scheme and host call for. */
  #dispatcher(url: URL): Dispatcher {
    const proxy = this.#proxies?.proxyFor(url);
    if (proxy === undefined) return this.#agent;
    let agent = this.#proxyAgents.get(proxy.href);
    if (agent === undefined) {
      agent = newProxyAgent({
        ...this.#agentOptions(),
        uri: proxy.href,
        // https targets: CONNECT, then TLS with the registry; http targets: absolute-form requests.
        proxyTunnel: false,
        ...(this.#secureContext !== undefined ? { requestTls: { secureContext: this.#secureContext } } : {}),
        // An https proxy's own certificate is checked against the same roots.
        ...(this.#secureContext !== undefined && proxy.protocol === 'https:'
          ? { proxyTls: { secureContext: this.#secureContext } }
          : {}),
      });
      this.#proxyAgents.set(proxy.href, agent);
    }
    return agent;
  }

  close(): void {
    this.#agent.destroy().catch(() => undefined);
    for (const a of this.#proxyAgents.values()) a.destroy().catch(() => undefined);
    this.#proxyAgents.clear();
  }

  /**
   * Sends a request and resolves once the status line and headers are in;
   * the caller reads (or discards) the body. Redirects of GET/HEAD are
   * followed; `Authorization` is dropped when the redirect leaves the origin.
   */
  async request(req: HttpRequest): Promise<HttpResponse> {
    let url = req.url;
    let headers: Record<string, string> = { 'user-agent': this.#userAgent, ...req.headers };
    for (let hop = 0; ; hop++) {
      const res = await this.#once(req.method, url, headers, req.body, req.signal);
      const location = res.headers.location;
      const follow = (req.followRedirects ?? true) && (req.method === 'GET' || req.method === 'HEAD');
      if (!follow || !REDIRECT_STATUSES.has(res.status) || location === undefined) return res;
      res.body.resume();
      if (hop >= MAX_REDIRECTS)
        throw new HttpError(`${req.method} ${req.url.href}: more than ${MAX_REDIRECTS} redirects`);
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new HttpError(`${req.method} ${url.href}: invalid redirect location`);
      }
      if (next.protocol !== 'https:' && next.protocol !== 'http:') {
        throw new HttpError(`${req.method} ${url.href}: redirect to unsupported scheme ${next.protocol}`);
      }
      if (url.protocol === 'https:' && next.protocol === 'http:') {
        throw new HttpError(
          `${req.method} ${url.href}: refusing redirect from https to http (${next.origin})`,
        );
      }
      if (next.origin !== url.origin) {
        // Registry credentials are for the registry; a CDN or any other host gets none.
        const { authorization: _dropped, ...rest } = headers;
        headers = rest;
      }
      url = next;
    }
  }

  async #once(
    method: string,
    url: URL,
    headers: Record<string, string>,
    body: HttpRequest['body'],
    signal: AbortSignal | undefined,
  ): Promise<HttpResponse> {
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw new HttpError(`unsupported URL scheme ${url.protocol}`);
    }
    const what = `${method} ${redact(url)}`;
    const stream = typeof body === 'function' ? body() : undefined;
    let res: Dispatcher.ResponseData;
    try {
      res = await request(this.#dispatcher(url), {
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: method as 'GET',
        headers,
        ...(body instanceof Uint8Array ? { body } : stream !== undefined ? { body: stream } : {}),
        ...(signal !== undefined ? { signal } : {}),
      });
    } catch (e) {
      stream?.destroy();
      throw this.#transportError(what, e);
    }
    // A stalled or broken body reads as this client's HttpError, like a failed request.
    const forward = res.body.emit.bind(res.body);
    res.body.emit = (event: string | symbol, ...args: unknown[]) =>
      event === 'error' ? forward('error', this.#transportError(what, args[0])) : forward(event, ...args);
    return { status: res.statusCode, headers: nodeHeaders(res.headers), body: res.body, url };
  }

  #transportError(what: string, e: unknown): Error {
    if (e instanceof HttpError) return e;
    if (e instanceof undiciErrors.HeadersTimeoutError) {
      return new HttpError(`${what}: no answer for ${this.#idleTimeoutMs} ms`, { cause: e });
    }
    if (e instanceof undiciErrors.BodyTimeoutError) {
      return new HttpError(`${what}: no data for ${this.#idleTimeoutMs} ms`, { cause: e });
    }
    // An abort from the caller's signal stays what the caller aborted with.
    if (isAbort(e)) return e;
    return new HttpError(`${what}: ${(e as Error | undefined)?.message ?? String(e)}`, { cause: e });
  }
}

/** An abort: the caller's signal (a DOMException), undici's, or Node's (`ABORT_ERR`); told by code or class. */
function isAbort(e: unknown): e is Error {
  if (e instanceof DOMException) return e.code === DOMException.ABORT_ERR;
  if (e instanceof undiciErrors.RequestAbortedError) return true;
  return e instanceof Error && (e as { code?: unknown }).code === 'ABORT_ERR';
}

/** A URL without credentials or query (tokens may travel in the query of upload URLs). */
export function redact(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

/** Reads a whole body, failing once it passes `limit` bytes. */
export async function readBody(body: Readable, limit: number, what = 'response body'): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body) {
    const b = chunk as Buffer;
    total += b.byteLength;
    if (total > limit) {
      body.destroy();
      throw new HttpError(`${what} larger than ${limit} bytes`);
    }
    chunks.push(b);
  }
  return Buffer.concat(chunks, total);
}

/** Drains and discards a body (so the connection can be reused), reading at most `limit` bytes. */
export async function discardBody(body: Readable, limit = 64 * 1024): Promise<void> {
  try {
    await readBody(body, limit);
  } catch {
    body.destroy();
  }
}
