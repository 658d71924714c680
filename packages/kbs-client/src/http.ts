/**
 * The HTTP layer under the KBS clients: node:http/https with a keep-alive
 * agent, extra trusted roots from a PEM (added to the system roots, as
 * reqwest's `add_root_certificate` does), a fixed user agent, an optional
 * cookie jar, a whole-request timeout and a response size cap. The KBS is
 * untrusted input like any other peer.
 */
import http from 'node:http';
import https from 'node:https';
import { rootCertificates } from 'node:tls';
import type { CookieJar } from './cookies.js';
import { KbsBadResponse, KbsUnreachable } from './errors.js';

/** reqwest timeout upstream uses for every KBS request. */
export const DEFAULT_TIMEOUT_MS = 60_000;
/** Default cap on a response body; callers lower it per request where the payload is small. */
export const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

export interface HttpTransportOptions {
  /** KBS root URL, e.g. `https://kbs.example:8080`; a path prefix is kept, a trailing `/` dropped. */
  readonly url: string;
  /** PEM certificate(s) trusted in addition to the system roots, for an `https` URL. */
  readonly certPem?: string | readonly string[];
  readonly userAgent: string;
  readonly cookieJar?: CookieJar;
  readonly timeoutMs?: number;
  readonly maxResponseBytes?: number;
}

export interface HttpRequest {
  readonly method: 'GET' | 'POST' | 'DELETE';
  /** Path below the root URL, starting with `/`. */
  readonly path: string;
  readonly body?: string | Uint8Array;
  readonly contentType?: string;
  readonly bearer?: string;
  readonly maxResponseBytes?: number;
}

export interface HttpResponse {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

export class HttpTransport {
  readonly baseUrl: string;
  readonly #url: URL;
  readonly #agent: http.Agent;
  readonly #userAgent: string;
  readonly #jar: CookieJar | undefined;
  readonly #timeoutMs: number;
  readonly #maxResponseBytes: number;

  constructor(options: HttpTransportOptions) {
    const trimmed = options.url.replace(/\/+$/, '');
    let url: URL;
    try {
      url = new URL(trimmed);
    } catch {
      throw new TypeError(`invalid KBS URL ${JSON.stringify(options.url)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`KBS URL must be http or https, got ${JSON.stringify(url.protocol)}`);
    }
    if (url.search !== '' || url.hash !== '')
      throw new TypeError('KBS URL must not carry a query or fragment');
    this.#url = url;
    this.baseUrl = trimmed;
    this.#userAgent = options.userAgent;
    this.#jar = options.cookieJar;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const certs =
      options.certPem === undefined
        ? []
        : typeof options.certPem === 'string'
          ? [options.certPem]
          : [...options.certPem];
    this.#agent =
      url.protocol === 'https:'
        ? new https.Agent({
            keepAlive: true,
            ...(certs.length > 0 ? { ca: [...rootCertificates, ...certs] } : {}),
          })
        : new http.Agent({ keepAlive: true });
  }

  /** The full URL of a path below the root, for messages. */
  urlOf(path: string): string {
    return this.baseUrl + path;
  }

  request(req: HttpRequest): Promise<HttpResponse> {
    const limit = req.maxResponseBytes ?? this.#maxResponseBytes;
    const headers: Record<string, string | number> = { 'user-agent': this.#userAgent, accept: '*/*' };
    const cookie = this.#jar?.header();
    if (cookie !== undefined) headers.cookie = cookie;
    if (req.bearer !== undefined) headers.authorization = `Bearer ${req.bearer}`;
    let body: Buffer | undefined;
    if (req.body !== undefined) {
      body = typeof req.body === 'string' ? Buffer.from(req.body, 'utf8') : Buffer.from(req.body);
      headers['content-length'] = body.length;
      if (req.contentType !== undefined) headers['content-type'] = req.contentType;
    } else if (req.method !== 'GET') {
      headers['content-length'] = 0;
    }
    const target = this.urlOf(req.path);
    const mod = this.#url.protocol === 'https:' ? https : http;

    return new Promise<HttpResponse>((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        request.destroy();
        reject(err);
      };
      const request = mod.request(target, { method: req.method, headers, agent: this.#agent }, (res) => {
        const declared = Number(res.headers['content-length']);
        if (Number.isFinite(declared) && declared > limit) {
          fail(new KbsBadResponse(`${req.method} ${target}: response larger than ${limit} bytes`));
          res.destroy();
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          if (settled) return;
          size += chunk.length;
          if (size > limit) {
            fail(new KbsBadResponse(`${req.method} ${target}: response larger than ${limit} bytes`));
            res.destroy();
            return;
          }
          chunks.push(chunk);
        });
        res.on('error', (err) =>
          fail(new KbsUnreachable(`${req.method} ${target}: ${err.message}`, { cause: err })),
        );
        res.on('aborted', () => fail(new KbsUnreachable(`${req.method} ${target}: response aborted`)));
        res.on('end', () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this.#jar?.store(res.headers['set-cookie']);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks, size) });
        });
      });
      timer = setTimeout(
        () =>
          fail(
            new KbsUnreachable(`${req.method} ${target}: no complete response within ${this.#timeoutMs} ms`),
          ),
        this.#timeoutMs,
      );
      timer.unref();
      request.on('error', (err) =>
        fail(new KbsUnreachable(`${req.method} ${target}: ${err.message}`, { cause: err })),
      );
      request.end(body);
    });
  }

  /** Closes idle keep-alive sockets. */
  close(): void {
    this.#agent.destroy();
  }
}

/** Short, printable excerpt of a body for error messages (bodies are untrusted). */
export function bodyExcerpt(body: Buffer, max = 512): string {
  const text = body
    .subarray(0, max)
    .toString('utf8')
    .replace(/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g, '?');
  return body.length > max ? `${text}…` : text;
}
