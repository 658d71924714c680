// A small HTTPS server for tests that stands in for a collateral service: answers come from a
// handler, every request is recorded (to count cache use), and a test can replace answers to make
// the service fail (an HTTP status), hang (no answer at all) or lie (a tampered body or header).
import { createServer, type Server } from 'node:https';
import type { Socket } from 'node:net';
import type { TestTlsIdentity } from './tls.js';

export interface MockAnswer {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body: string | Uint8Array;
}

/** `hang` accepts the request and never answers. */
export type MockReply = MockAnswer | 'hang';

/** Rewrites the handler's answer (undefined: 404) for one request; return it unchanged to pass. */
export type MockOverride = (url: URL, answer: MockAnswer | undefined) => MockReply | undefined;

export class MockHttpsService {
  /** `https://127.0.0.1:<port>`. */
  readonly url: string;
  /** Path and query of every request, in order. */
  readonly requests: string[] = [];
  override: MockOverride | undefined;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();

  private constructor(server: Server, url: string) {
    this.#server = server;
    this.url = url;
    server.on('connection', (s: Socket) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
  }

  static async start(
    tls: TestTlsIdentity,
    handler: (url: URL) => MockAnswer | undefined,
  ): Promise<MockHttpsService> {
    let self: MockHttpsService | undefined;
    const server = createServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) => {
      const url = new URL(req.url ?? '/', 'https://127.0.0.1');
      self!.requests.push(`${url.pathname}${url.search}`);
      const answer0 = req.method === 'GET' ? handler(url) : { status: 405, body: '' };
      const reply: MockReply | undefined =
        self!.override !== undefined ? self!.override(url, answer0) : answer0;
      if (reply === 'hang') return;
      const answer = reply ?? { status: 404, body: 'not found' };
      res.writeHead(answer.status, { ...answer.headers, 'content-length': Buffer.byteLength(answer.body) });
      res.end(answer.body);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const addr = server.address();
    if (addr === null || typeof addr === 'string') throw new Error('mock service has no TCP address');
    self = new MockHttpsService(server, `https://127.0.0.1:${addr.port}`);
    return self;
  }

  /** Requests whose path is `pathname` (any query). */
  count(pathname: string): number {
    return this.requests.filter((r) => r === pathname || r.startsWith(`${pathname}?`)).length;
  }

  resetRequests(): void {
    this.requests.length = 0;
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
