/**
 * A small KBS for the client's tests: a real node:http server speaking the
 * RCAR protocol with the sample TEE, checking what a real KBS checks (body
 * shapes, cookie, nonce, report-data binding) and recording every request so
 * tests can assert exact wire content. Behaviour can be overridden per request.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import {
  jweEncrypt,
  KBS_ERROR_TYPE_PREFIX,
  type KbsErrorKind,
  parseAttestation,
  parseKbsRequest,
  parseReportDataHashAlgorithm,
  runtimeDataDigest,
  type TeePubKey,
} from '@broker/protocol';

export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

export interface FakeResponse {
  readonly status: number;
  readonly body?: string | Buffer;
  readonly headers?: Record<string, string | string[]>;
}

export type Override = (req: RecordedRequest, index: number) => FakeResponse | undefined;

interface Session {
  nonce: string;
  alg: string;
  token?: string;
  pubkey?: TeePubKey;
}

export function errorBody(kind: KbsErrorKind, detail: string): string {
  return JSON.stringify({ type: `${KBS_ERROR_TYPE_PREFIX}/${kind}`, detail });
}

export function fakeToken(claims: Record<string, unknown>): string {
  const b = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${b({ alg: 'ES256', typ: 'JWT' })}.${b(claims)}.${Buffer.from('sig').toString('base64url')}`;
}

export class FakeKbs {
  readonly requests: RecordedRequest[] = [];
  readonly resources = new Map<string, Buffer>();
  readonly sessions = new Map<string, Session>();
  readonly tokens = new Map<string, TeePubKey>();
  /** Extra-params of the challenge; "" as trustee sends for every TEE but SE. */
  challengeExtraParams: unknown = '';
  /** Token lifetime in seconds. */
  tokenLifetime = 300;
  now: () => number = Date.now;
  override: Override | undefined;
  /** TCP connections accepted so far. */
  connections = 0;
  /** For an https server: whether each TLS connection resumed an earlier session. */
  readonly tlsResumed: boolean[] = [];
  #server: http.Server;
  url = '';

  constructor(server?: (handler: http.RequestListener) => http.Server) {
    const handler: http.RequestListener = (req, res) => this.#handle(req, res);
    this.#server = server !== undefined ? server(handler) : http.createServer(handler);
    this.#server.on('connection', () => this.connections++);
    this.#server.on('secureConnection', (socket: TLSSocket) =>
      this.tlsResumed.push(socket.isSessionReused()),
    );
  }

  /** Closes the kept-alive connections not serving a request, so a client has to connect again. */
  dropIdleConnections(): void {
    this.#server.closeIdleConnections();
  }

  async start(protocol: 'http' | 'https' = 'http'): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    const { port } = this.#server.address() as AddressInfo;
    this.url = `${protocol}://127.0.0.1:${port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections?.();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** Requests whose URL path equals `path`. */
  hits(path: string): RecordedRequest[] {
    return this.requests.filter((r) => r.url.split('?')[0] === path);
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec: RecordedRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
      };
      const index = this.requests.push(rec) - 1;
      let out: FakeResponse;
      try {
        out = this.override?.(rec, index) ?? this.#route(rec);
      } catch (err) {
        out = {
          status: 401,
          body: errorBody('AttestationError', err instanceof Error ? err.message : String(err)),
        };
      }
      res.writeHead(out.status, out.headers ?? {});
      res.end(out.body);
    });
  }

  #session(rec: RecordedRequest): Session | undefined {
    const m = /(?:^|;\s*)kbs-session-id=([0-9a-f]+)/.exec(rec.headers.cookie ?? '');
    return m?.[1] !== undefined ? this.sessions.get(m[1]) : undefined;
  }

  #route(rec: RecordedRequest): FakeResponse {
    const path = rec.url.split('?')[0] ?? '';
    if (rec.method === 'POST' && path === '/kbs/v0/auth') {
      const request = parseKbsRequest(JSON.parse(rec.body.toString('utf8')));
      const id = randomBytes(16).toString('hex');
      const nonce = randomBytes(32).toString('base64');
      const extra = this.challengeExtraParams;
      const selected =
        typeof extra === 'object' && extra !== null
          ? (extra as Record<string, unknown>)['selected-hash-algorithm']
          : undefined;
      const alg = parseReportDataHashAlgorithm(selected) ?? 'sha384';
      this.sessions.set(id, { nonce, alg });
      void request;
      const expires = new Date(this.now() + 5 * 60_000).toUTCString();
      return {
        status: 200,
        headers: {
          'content-type': 'application/json',
          'set-cookie': `kbs-session-id=${id}; Expires=${expires}`,
        },
        body: JSON.stringify({ nonce, 'extra-params': extra }),
      };
    }
    if (rec.method === 'POST' && path === '/kbs/v0/attest') {
      const session = this.#session(rec);
      if (session === undefined) return { status: 401, body: errorBody('AttestationError', 'no session') };
      if (session.token !== undefined) return { status: 200, body: JSON.stringify({ token: session.token }) };
      const att = parseAttestation(JSON.parse(rec.body.toString('utf8')));
      if (att['runtime-data'].nonce !== session.nonce) {
        return { status: 401, body: errorBody('AttestationError', 'nonce mismatch') };
      }
      const expected = runtimeDataDigest(
        { ...att['runtime-data'], 'additional-evidence': att['tee-evidence'].additional_evidence },
        session.alg as 'sha384',
      );
      const ev = att['tee-evidence'].primary_evidence as { report_data?: string };
      if (ev.report_data !== expected.toString('base64')) {
        return {
          status: 401,
          body: errorBody('AttestationError', 'REPORT_DATA is different from that in Sample Quote'),
        };
      }
      const iat = Math.floor(this.now() / 1000);
      const token = fakeToken({ iat, exp: iat + this.tokenLifetime, jti: randomBytes(8).toString('hex') });
      session.token = token;
      session.pubkey = att['runtime-data']['tee-pubkey'];
      this.tokens.set(token, session.pubkey);
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token }),
      };
    }
    const m = /^\/kbs\/v0\/resource\/([^/]+\/[^/]+\/[^/]+)$/.exec(path);
    if (m?.[1] !== undefined) {
      const key = m[1];
      if (rec.method === 'GET') {
        const session = this.#session(rec);
        let pubkey = session?.pubkey;
        const auth = rec.headers.authorization;
        if (pubkey === undefined && auth?.startsWith('Bearer ')) pubkey = this.tokens.get(auth.slice(7));
        if (pubkey === undefined)
          return { status: 401, body: errorBody('TokenNotFound', 'Attestation Token not found') };
        const data = this.resources.get(key);
        if (data === undefined)
          return { status: 401, body: errorBody('PluginInternalError', 'Plugin internal error') };
        return {
          status: 200,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(jweEncrypt(data, pubkey)),
        };
      }
      if (rec.method === 'POST') {
        this.resources.set(key, rec.body);
        return { status: 200 };
      }
      if (rec.method === 'DELETE') {
        this.resources.delete(key);
        return { status: 200 };
      }
    }
    if (
      rec.method === 'POST' &&
      ['/kbs/v0/attestation-policy', '/kbs/v0/resource-policy', '/kbs/v0/reference-value'].includes(path)
    ) {
      return { status: 200 };
    }
    if (rec.method === 'GET' && path === '/kbs/v0/resource-policy') {
      return { status: 200, body: JSON.stringify(['resource-policy']) };
    }
    if (rec.method === 'GET' && path.startsWith('/kbs/v0/reference-value/')) {
      return { status: 200, body: JSON.stringify(['1.0.0', 'a"b']) };
    }
    return { status: 404, body: errorBody('PluginNotFound', `Plugin ${path} not found`) };
  }
}
