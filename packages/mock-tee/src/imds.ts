// The part of Azure's instance metadata service (IMDS, 169.254.169.254) that an SNP CVM's
// attester uses: `GET /metadata/THIM/amd/certification` with the `Metadata: true` header answers
// the VCEK of the VM's host and the AMD chain above it (Trusted Hardware Identity Management):
//
//   {"vcekCert": "<PEM>", "tcbm": "<TCB as 16 upper-case hex digits>",
//    "certificateChain": "<PEM: ASK then ARK>", "cacheControl": "<seconds>"}
//
// The mock serves its own VCEK and test chain, on loopback.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { HardwareRoots } from './roots.js';
import { tcbToU64 } from './snp-report.js';

export const IMDS_CERTIFICATION_PATH = '/metadata/THIM/amd/certification';

export interface ImdsCertificationResponse {
  readonly vcekCert: string;
  readonly tcbm: string;
  readonly certificateChain: string;
  readonly cacheControl: string;
}

export function certificationResponse(
  roots: Pick<HardwareRoots, 'vcekPem' | 'askPem' | 'arkPem' | 'tcb'>,
): ImdsCertificationResponse {
  return {
    vcekCert: roots.vcekPem,
    tcbm: tcbToU64(roots.tcb).toString(16).toUpperCase().padStart(16, '0'),
    certificateChain: roots.askPem + roots.arkPem,
    cacheControl: '86400',
  };
}

export interface ImdsServerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly roots: Pick<HardwareRoots, 'vcekPem' | 'askPem' | 'arkPem' | 'tcb'>;
  readonly logger: Logger;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

export class ImdsServer {
  readonly #server: Server;
  readonly #opts: ImdsServerOptions;
  #port = 0;

  constructor(options: ImdsServerOptions) {
    this.#opts = options;
    const body = certificationResponse(options.roots);
    this.#server = createServer((req, res) => this.#route(req, res, body));
    // Requests are a line and a few headers; nothing slow or large is served.
    this.#server.headersTimeout = 10_000;
    this.#server.requestTimeout = 10_000;
    this.#server.maxHeadersCount = 64;
  }

  get port(): number {
    return this.#port;
  }

  /** `http://HOST:PORT`: the base URL, standing for http://169.254.169.254 (paths start with /metadata). */
  get url(): string {
    const host = this.#opts.host.includes(':') ? `[${this.#opts.host}]` : this.#opts.host;
    return `http://${host}:${this.#port}`;
  }

  #route(req: IncomingMessage, res: ServerResponse, certification: ImdsCertificationResponse): void {
    const path = (req.url ?? '').split('?')[0];
    if (path !== IMDS_CERTIFICATION_PATH) {
      send(res, 404, { error: 'Not found' });
      return;
    }
    if (req.method !== 'GET') {
      res.setHeader('allow', 'GET');
      send(res, 405, { error: 'Method not allowed' });
      return;
    }
    // IMDS refuses requests without the header, so that a server-side request forgery cannot reach it.
    const header = req.headers.metadata;
    if ((Array.isArray(header) ? header.join(',') : header)?.toLowerCase() !== 'true') {
      send(res, 400, { error: 'Bad request. Required metadata header not specified' });
      return;
    }
    this.#opts.logger.debug('IMDS served the VCEK certification');
    send(res, 200, certification);
  }

  start(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen({ port: this.#opts.port, host: this.#opts.host, exclusive: true }, () => {
        this.#server.off('error', reject);
        const a = this.#server.address();
        this.#port = typeof a === 'object' && a !== null ? a.port : this.#opts.port;
        resolve(this.#port);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.#server.listening) return resolve();
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }
}
