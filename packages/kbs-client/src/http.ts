/**
 * The HTTP layer under the KBS clients: one undici `Agent` per client, so
 * connections and TLS sessions to the KBS are kept and reused; extra trusted
 * roots from a PEM (added to the system roots, as reqwest's
 * `add_root_certificate` does) built into one TLS context up front; a fixed
 * user agent, an optional cookie jar, a whole-request timeout and a response
 * size cap. Redirects are not followed (reqwest's KBS client follows none
 * either: a 3xx is an error answer). The KBS is untrusted input like any
 * other peer.
 *
 * A kept connection can be closed by the KBS (a restart, a load balancer's
 * idle timeout) while a request is already on its way over it; the request
 * then fails with a reset or "other side closed" and no answer. A request
 * that is safe to repeat is sent once more on a new connection, as hyper
 * (reqwest's pool) does for a request its pooled connection dropped.
 */

import { createSecureContext, rootCertificates, type SecureContext, TLSSocket } from 'node:tls';
import { isCertificateFailureCode, messageOf } from '@broker/cli';
import type { CookieJar } from './cookies.js';
import { KbsBadResponse, KbsUnreachable, KbsUntrustedCertificate } from './errors.js';
import {
  Agent,
  type AgentOptions,
  buildConnector,
  Client,
  type Connector,
  type ConnectorOptions,
  type Dispatcher,
  errors,
  request,
} from './undici.js';

/** reqwest timeout upstream uses for every KBS request. */
export const DEFAULT_TIMEOUT_MS = 60_000;
/** Default cap on a response body; callers lower it per request where the payload is small. */
export const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
/** How long an idle connection to the KBS is kept (a server's `Keep-Alive: timeout` hint lowers it). */
const KEEP_ALIVE_MS = 30_000;

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
  /**
   * Whether the request may be sent a second time, on a new connection, when
   * the connection it went out on was closed before any answer arrived. Only
   * for requests whose repetition changes nothing at the KBS (a GET, a new
   * `/auth` challenge); never `/attest` (its nonce is single-use) nor an admin
   * write. Default: true for GET, false for POST and DELETE.
   */
  readonly retryOnStaleConnection?: boolean;
}

/** Response headers with lower-case names; repeated ones (`set-cookie`) as arrays. */
export type HttpHeaders = Readonly<Record<string, string | string[] | undefined>>;

export interface HttpResponse {
  readonly status: number;
  readonly headers: HttpHeaders;
  readonly body: Buffer;
}

/**
 * The trust of an `https` KBS: the system roots plus `certs`, as one context
 * made once (not per connection). A certificate that does not load is an
 * error of every request, as it was when each connection loaded it.
 */
function trustContext(certs: readonly string[]): SecureContext | Error | undefined {
  if (certs.length === 0) return undefined; // Node's default context: the system roots
  try {
    return createSecureContext({ ca: [...rootCertificates, ...certs] });
  } catch (e) {
    return e instanceof Error ? e : new Error(String(e));
  }
}

/**
 * A connector that keeps the KBS's latest TLS session and offers it on the
 * next connection, so reconnecting after the KBS closed an idle connection is
 * an abbreviated handshake. (undici's own session cache holds sessions
 * weakly, and a collected one costs a full handshake.) Trust is unchanged: a
 * session exists only after a handshake verified under the same context.
 */
function resumingConnector(options: ConnectorOptions): Connector {
  let session: Buffer | undefined;
  return (target, callback) => {
    const connect = buildConnector({
      ...options,
      maxCachedSessions: 0,
      ...(session !== undefined ? { session } : {}),
    });
    connect(target, (...args) => {
      const socket = args[1];
      if (socket instanceof TLSSocket) {
        session = socket.getSession() ?? session;
        socket.on('session', (next: Buffer) => {
          session = next;
        });
      }
      callback(...args);
    });
  };
}

/**
 * Whether a request failed because its connection was closed under it: a
 * reset (ECONNRESET; EPIPE when it came while the request was being
 * written) or the peer's FIN before an answer (undici's "other side
 * closed"). Not a refused connection (the KBS is down: the caller's own
 * retries handle that), a timeout, a TLS failure or a malformed answer.
 */
function isClosedConnection(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ECONNRESET' || code === 'EPIPE') return true;
  return e instanceof errors.SocketError && e.message === 'other side closed';
}

/** The verification failure in `e` or its causes, if it is one. */
function certificateFailure(e: unknown): Error | undefined {
  for (let c = e, depth = 0; c instanceof Error && depth < 8; c = c.cause, depth++) {
    const code = (c as NodeJS.ErrnoException).code;
    if (isCertificateFailureCode(code)) return c;
  }
  return undefined;
}

export class HttpTransport {
  readonly baseUrl: string;
  readonly #origin: string;
  readonly #prefix: string;
  readonly #agent: Agent;
  readonly #dispatcherOptions: AgentOptions;
  readonly #trustError: Error | undefined;
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
    this.baseUrl = trimmed;
    this.#origin = url.origin;
    this.#prefix = url.pathname.replace(/\/+$/, '');
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
    const trust = url.protocol === 'https:' ? trustContext(certs) : undefined;
    this.#trustError = trust instanceof Error ? trust : undefined;
    const secureContext = trust instanceof Error ? undefined : trust;
    this.#dispatcherOptions = {
      keepAliveTimeout: KEEP_ALIVE_MS,
      keepAliveMaxTimeout: KEEP_ALIVE_MS,
      // The whole-request timer below is the one that counts; these only must not fire first.
      headersTimeout: 0,
      bodyTimeout: 0,
      ...(url.protocol === 'https:'
        ? { connect: resumingConnector(secureContext !== undefined ? { secureContext } : {}) }
        : {}),
    };
    this.#agent = new Agent(this.#dispatcherOptions);
  }

  /** The full URL of a path below the root, for messages. */
  urlOf(path: string): string {
    return this.baseUrl + path;
  }

  async request(req: HttpRequest): Promise<HttpResponse> {
    const limit = req.maxResponseBytes ?? this.#maxResponseBytes;
    const target = this.urlOf(req.path);
    const what = `${req.method} ${target}`;
    if (this.#trustError !== undefined) {
      throw new KbsUnreachable(`${what}: ${this.#trustError.message}`, { cause: this.#trustError });
    }
    const headers: Record<string, string> = { 'user-agent': this.#userAgent, accept: '*/*' };
    const cookie = this.#jar?.header();
    if (cookie !== undefined) headers.cookie = cookie;
    if (req.bearer !== undefined) headers.authorization = `Bearer ${req.bearer}`;
    let body: Buffer | undefined;
    if (req.body !== undefined) {
      body = typeof req.body === 'string' ? Buffer.from(req.body, 'utf8') : Buffer.from(req.body);
      if (req.contentType !== undefined) headers['content-type'] = req.contentType;
    } else if (req.method !== 'GET') {
      body = Buffer.alloc(0); // sends content-length: 0
    }

    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), this.#timeoutMs);
    timer.unref();
    const options: Dispatcher.RequestOptions = {
      origin: this.#origin,
      path: this.#prefix + req.path,
      method: req.method,
      headers,
      ...(body !== undefined ? { body } : {}),
      signal: abort.signal,
    };
    const mayRepeat = req.retryOnStaleConnection ?? req.method === 'GET';
    let res: Dispatcher.ResponseData | undefined;
    let retry: Client | undefined;
    try {
      try {
        res = await request(this.#agent, options);
      } catch (err) {
        // No complete response head arrived (`request` settles when the headers do); part of one may
        // have, which is why only a request whose repetition changes nothing is sent again.
        if (!mayRepeat || abort.signal.aborted || !isClosedConnection(err)) throw err;
        // Not through the pool: the event that closed this connection (a KBS restart) may have
        // closed its idle siblings too, and the client may not have noticed that yet either.
        retry = new Client(this.#origin, this.#dispatcherOptions);
        try {
          res = await request(retry, options);
        } catch (again) {
          if (abort.signal.aborted) throw again;
          throw new KbsUnreachable(
            `${what}: ${messageOf(again)} (on a new connection, after ${messageOf(err)} on a kept one)`,
            { cause: again },
          );
        }
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > limit) {
        throw new KbsBadResponse(`${what}: response larger than ${limit} bytes`);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > limit) throw new KbsBadResponse(`${what}: response larger than ${limit} bytes`);
        chunks.push(chunk);
      }
      this.#jar?.store(res.headers['set-cookie']);
      return { status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks, size) };
    } catch (err) {
      // An unread or partly read body must not keep the connection (or the memory).
      res?.body.destroy();
      if (abort.signal.aborted) {
        throw new KbsUnreachable(`${what}: no complete response within ${this.#timeoutMs} ms`);
      }
      if (err instanceof KbsBadResponse || err instanceof KbsUnreachable) throw err;
      const untrusted = certificateFailure(err);
      if (untrusted !== undefined) {
        throw new KbsUntrustedCertificate(
          // Node adds advice about its own command-line flags after a `;`: not for our users.
          `${what}: the KBS's TLS certificate is not trusted (${untrusted.message.split(';')[0]})`,
          { cause: err },
        );
      }
      throw new KbsUnreachable(`${what}: ${messageOf(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
      // A one-off connection: closed once its answer is read (or dropped with it).
      retry?.close().catch(() => undefined);
    }
  }

  /**
   * Closes the kept connections once requests in flight have finished (a
   * graceful close: destroying would fail the idle sockets with an error
   * each, whose stack is then formatted for nobody).
   */
  close(): void {
    this.#agent.close().catch(() => undefined);
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
