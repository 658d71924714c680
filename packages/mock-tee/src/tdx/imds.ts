// Azure's TD quote service on the instance metadata address, as the az-tdx-vtpm attester calls
// it: `POST /acc/tdquote` with `{"report": base64url(TDREPORT)}` answers `{"quote": base64url}`.
// The mock turns the TD report's fields into a quote from its test quoting enclave, on loopback.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { TD_REPORT_SIZE } from '@broker/verifier';
import { quoteFromTdReport } from '@broker/verifier/testing';
import { MockTeeError } from '../errors.js';
import type { TdxHardware } from './hardware.js';

export const TD_QUOTE_PATH = '/acc/tdquote';
/** A base64url TD report is 1366 characters; requests are small. */
const MAX_REQUEST_BYTES = 16 * 1024;

export interface TdQuoteServerOptions {
  readonly host?: string;
  /** 0 (default) picks a free port. */
  readonly port?: number;
  readonly hardware: TdxHardware;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export class TdQuoteServer {
  readonly #server: Server;
  readonly #host: string;
  readonly #requestedPort: number;
  readonly #hardware: TdxHardware;
  #port = 0;
  /** Quotes issued so far. */
  quotes = 0;

  constructor(options: TdQuoteServerOptions) {
    this.#host = options.host ?? '127.0.0.1';
    this.#requestedPort = options.port ?? 0;
    this.#hardware = options.hardware;
    this.#server = createServer((req, res) => this.#route(req, res));
    this.#server.requestTimeout = 10_000;
  }

  /** `http://HOST:PORT`, what the attester takes as its IMDS base URL. */
  get url(): string {
    return `http://${this.#host}:${this.#port}`;
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#requestedPort, this.#host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const addr = this.#server.address();
    if (addr !== null && typeof addr === 'object') this.#port = addr.port;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #route(req: IncomingMessage, res: ServerResponse): void {
    if (req.url !== TD_QUOTE_PATH) {
      send(res, 404, { error: 'not found' });
      return;
    }
    if (req.method !== 'POST') {
      send(res, 405, { error: 'method not allowed' });
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_REQUEST_BYTES) {
        send(res, 413, { error: 'request too large' });
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (res.headersSent) return;
      let report: Buffer;
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { report?: unknown };
        if (typeof body.report !== 'string' || !/^[A-Za-z0-9_-]+=*$/.test(body.report))
          throw new MockTeeError('REQUEST_INVALID', 'no report');
        report = Buffer.from(body.report, 'base64url');
      } catch {
        send(res, 400, { error: 'body must be {"report": base64url}' });
        return;
      }
      if (report.length !== TD_REPORT_SIZE || report[0] !== 0x81) {
        send(res, 400, { error: `report must be a ${TD_REPORT_SIZE}-byte TD report` });
        return;
      }
      this.quotes++;
      send(res, 200, { quote: quoteFromTdReport(this.#hardware.qe, report).toString('base64url') });
    });
  }
}
