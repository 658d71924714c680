/**
 * HTTP for the registry client: node:http(s) with keep-alive, an idle
 * timeout, bounded bodies, and redirects that never carry credentials to
 * another origin and never downgrade https to http.
 */
import {
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { rootCertificates } from 'node:tls';

/** Redirects followed for one request. */
export const MAX_REDIRECTS = 10;
/** Idle time (no bytes either way) after which a request fails. */
export const DEFAULT_IDLE_TIMEOUT_MS = 60_000;

export interface HttpResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: IncomingMessage;
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
export class HttpError extends Error {
  override readonly name = 'HttpError';
}

export interface HttpClientOptions {
  /** Extra PEM certificates trusted besides the system roots. */
  readonly ca?: readonly string[];
  readonly idleTimeoutMs?: number;
  readonly userAgent?: string;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

export class HttpClient {
  readonly #http = new HttpAgent({ keepAlive: true, maxSockets: 16 });
  readonly #https: HttpsAgent;
  readonly #idleTimeoutMs: number;
  readonly #userAgent: string;

  constructor(options: HttpClientOptions = {}) {
    this.#https = new HttpsAgent({
      keepAlive: true,
      maxSockets: 16,
      ...(options.ca !== undefined && options.ca.length > 0
        ? { ca: [...rootCertificates, ...options.ca] }
        : {}),
    });
    this.#idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.#userAgent = options.userAgent ?? 'broker-image/0.1.0';
  }

  close(): void {
    this.#http.destroy();
    this.#https.destroy();
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

  #once(
    method: string,
    url: URL,
    headers: Record<string, string>,
    body: HttpRequest['body'],
    signal: AbortSignal | undefined,
  ): Promise<HttpResponse> {
    return new Promise((resolve, reject) => {
      const isHttps = url.protocol === 'https:';
      if (!isHttps && url.protocol !== 'http:') {
        reject(new HttpError(`unsupported URL scheme ${url.protocol}`));
        return;
      }
      const h: Record<string, string> = { ...headers };
      if (body instanceof Uint8Array) h['content-length'] = String(body.byteLength);
      const options = {
        method,
        headers: h,
        agent: isHttps ? this.#https : this.#http,
        ...(signal !== undefined ? { signal } : {}),
      };
      const onError = (e: Error) =>
        reject(new HttpError(`${method} ${redact(url)}: ${e.message}`, { cause: e }));
      const req = (isHttps ? httpsRequest : httpRequest)(url, options, (res) => {
        res.setTimeout(this.#idleTimeoutMs, () =>
          res.destroy(new HttpError(`${method} ${redact(url)}: no data for ${this.#idleTimeoutMs} ms`)),
        );
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res, url });
      });
      req.setTimeout(this.#idleTimeoutMs, () =>
        req.destroy(new HttpError(`${method} ${redact(url)}: no answer for ${this.#idleTimeoutMs} ms`)),
      );
      req.on('error', onError);
      if (body === undefined) req.end();
      else if (body instanceof Uint8Array) req.end(body);
      else {
        const stream = body();
        stream.on('error', (e) => req.destroy(e));
        stream.pipe(req);
      }
    });
  }
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
