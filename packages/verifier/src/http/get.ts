// One bounded HTTP(S) GET for collateral services (Intel PCS/PCCS, AMD KDS): a whole-request
// deadline (connect, headers and body), a body size limit enforced while reading, and errors that
// name the URL. TLS trust is Node's default store (plus NODE_EXTRA_CA_CERTS, how an operator trusts
// a private PCCS); `ca` replaces it and exists only for in-process tests of mock services.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { VerifierError } from '../errors.js';

export interface HttpAnswer {
  readonly url: string;
  readonly status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

export interface HttpGetOptions {
  /** The whole request (connect, headers, body) must finish within this. */
  readonly timeoutMs: number;
  /** A larger body is refused while it is read. */
  readonly maxBytes: number;
}

export type HttpGet = (url: string, options: HttpGetOptions) => Promise<HttpAnswer>;

/** The request did not produce a complete answer: connection, TLS, timeout or size. */
export class HttpGetError extends VerifierError {
  override readonly name: string = 'HttpGetError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('HTTP_GET_FAILED', message, options);
  }
}

export interface HttpClientTls {
  /** PEM CA certificates that replace the default trust store (tests only). */
  readonly ca?: string | readonly string[];
}

/** Node's HTTP(S) client as an HttpGet. */
export function createHttpGet(tls: HttpClientTls = {}): HttpGet {
  return (url, options) =>
    new Promise<HttpAnswer>((resolve, reject) => {
      let u: URL;
      try {
        u = new URL(url);
      } catch {
        reject(new HttpGetError(`${url} is not a URL`));
        return;
      }
      if (u.protocol !== 'https:' && u.protocol !== 'http:') {
        reject(new HttpGetError(`${url}: only http and https are supported`));
        return;
      }
      let settled = false;
      const fail = (msg: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.destroy();
        reject(new HttpGetError(`GET ${url} failed: ${msg}`));
      };
      const ca = tls.ca === undefined ? undefined : typeof tls.ca === 'string' ? tls.ca : [...tls.ca];
      const req = (u.protocol === 'https:' ? httpsRequest : httpRequest)(u, {
        method: 'GET',
        headers: { accept: '*/*' },
        ...(ca !== undefined && u.protocol === 'https:' ? { ca } : {}),
      });
      const timer = setTimeout(
        () => fail(`no complete answer within ${options.timeoutMs} ms`),
        options.timeoutMs,
      );
      req.on('error', (e) => fail(e.message));
      req.on('response', (res: IncomingMessage) => {
        const declared = Number(res.headers['content-length'] ?? '0');
        if (declared > options.maxBytes) {
          fail(`the answer is larger than ${options.maxBytes} bytes`);
          return;
        }
        const chunks: Buffer[] = [];
        let total = 0;
        res.on('data', (c: Buffer) => {
          total += c.length;
          if (total > options.maxBytes) fail(`the answer is larger than ${options.maxBytes} bytes`);
          else chunks.push(c);
        });
        res.on('error', (e) => fail(e.message));
        res.on('aborted', () => fail('the connection closed during the answer'));
        res.on('end', () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) {
            if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
          }
          resolve({ url, status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks) });
        });
      });
      req.end();
    });
}

let shared: HttpGet | undefined;

/** The process's default client (system trust store). */
export function defaultHttpGet(): HttpGet {
  shared ??= createHttpGet();
  return shared;
}

/**
 * Which collateral service a request goes to, by the API path it asks: `pcs` for Intel's PCS API
 * (`/sgx/certification/`, `/tdx/certification/`, which a PCCS serves too), `kds` for AMD's Key
 * Distribution Service (`/vcek/v1/`, `/vlek/v1/`), `other` for anything else. The path, not the
 * host, because a PCCS or a KDS mirror can live at any address.
 */
export type CollateralSource = 'pcs' | 'kds' | 'other';

export function collateralSourceOf(url: string): CollateralSource {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    return 'other';
  }
  if (/\/(sgx|tdx)\/certification\//.test(path)) return 'pcs';
  if (/\/(vcek|vlek)\/v1\//.test(path)) return 'kds';
  return 'other';
}

/**
 * `get` that also tells `onFailure` about every request that brought no usable answer: no complete
 * answer (connection, TLS, timeout, size) or a status other than 200, which every collateral client
 * here refuses. Cached collateral is not requested, so only real fetches are seen. A throwing
 * `onFailure` does not change the answer.
 */
export function observedHttpGet(
  get: HttpGet,
  onFailure: (source: CollateralSource, url: string) => void,
): HttpGet {
  const report = (url: string) => {
    try {
      onFailure(collateralSourceOf(url), url);
    } catch {
      // An observer's failure must not turn into a verification failure.
    }
  };
  return async (url, options) => {
    let a: HttpAnswer;
    try {
      a = await get(url, options);
    } catch (e) {
      report(url);
      throw e;
    }
    if (a.status !== 200) report(url);
    return a;
  };
}
