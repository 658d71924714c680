// A stand-in for Intel's TD quote generation service (QGS), which a TD reaches over vsock (the
// port in /etc/tdx-attest.conf) or through the legacy GetQuote hypercall. Messages are
// qgs_msg_lib's: a 16-byte little-endian header {u16 major, u16 minor, u32 type, u32 size (whole
// message), u32 error_code}; GET_QUOTE_REQ (0) carries {u32 report_size, u32 id_list_size, TD
// report, id list}, GET_QUOTE_RESP (1) {u32 selected_id_size, u32 quote_size, id, quote}. On the
// socket each message follows a 4-byte big-endian length. Tests serve it on loopback TCP, since
// vsock needs a hypervisor; the quote comes from the mock TDX device's quoting enclave.
import { createServer, type Server, type Socket } from 'node:net';

export const QGS_MSG = Object.freeze({
  major: 1,
  minor: 1,
  getQuoteReq: 0,
  getQuoteResp: 1,
  headerSize: 16,
  /** qgs_msg_lib's error codes (QGS_MSG_MK_ERROR). */
  errors: Object.freeze({
    unexpected: 0x12001,
    invalidParameter: 0x12003,
    invalidVersion: 0x12004,
    invalidType: 0x12005,
    invalidSize: 0x12006,
    invalidCode: 0x12007,
  }),
});

/** tdx-attest reads at most its 16 KiB buffer less headers; requests are about 1 KiB. */
const MAX_MESSAGE = 16 * 1024;

/** A GET_QUOTE_RESP: the quote, or an error code with no quote. */
export function encodeQgsQuoteResponse(answer: { quote?: Uint8Array; errorCode?: number }): Buffer {
  const quote = answer.errorCode ? Buffer.alloc(0) : Buffer.from(answer.quote ?? []);
  const m = Buffer.alloc(QGS_MSG.headerSize + 8 + quote.length);
  m.writeUInt16LE(QGS_MSG.major, 0);
  m.writeUInt16LE(QGS_MSG.minor, 2);
  m.writeUInt32LE(QGS_MSG.getQuoteResp, 4);
  m.writeUInt32LE(m.length, 8);
  m.writeUInt32LE(answer.errorCode ?? 0, 12);
  m.writeUInt32LE(0, 16);
  m.writeUInt32LE(quote.length, 20);
  quote.copy(m, 24);
  return m;
}

/**
 * The QGS's answer to one message, checked as qgs_msg_inflate_get_quote_req checks it; anything
 * wrong gets an error response, never a quote.
 */
export function answerQgsMessage(msg: Uint8Array, quote: (tdReport: Buffer) => Buffer): Buffer {
  const m = Buffer.from(msg);
  const e = QGS_MSG.errors;
  if (m.length < QGS_MSG.headerSize + 8) return encodeQgsQuoteResponse({ errorCode: e.invalidParameter });
  if (m.readUInt16LE(0) !== QGS_MSG.major) return encodeQgsQuoteResponse({ errorCode: e.invalidVersion });
  if (m.readUInt32LE(4) !== QGS_MSG.getQuoteReq) return encodeQgsQuoteResponse({ errorCode: e.invalidType });
  if (m.readUInt32LE(8) !== m.length) return encodeQgsQuoteResponse({ errorCode: e.invalidSize });
  if (m.readUInt32LE(12) !== 0) return encodeQgsQuoteResponse({ errorCode: e.invalidCode });
  const reportSize = m.readUInt32LE(16);
  const idListSize = m.readUInt32LE(20);
  if (reportSize === 0) return encodeQgsQuoteResponse({ errorCode: e.invalidCode });
  if (24 + reportSize + idListSize !== m.length) return encodeQgsQuoteResponse({ errorCode: e.invalidSize });
  try {
    return encodeQgsQuoteResponse({ quote: quote(m.subarray(24, 24 + reportSize)) });
  } catch {
    return encodeQgsQuoteResponse({ errorCode: e.unexpected });
  }
}

/**
 * Replaces the service's next answer: the request message in, the raw bytes to send out (length
 * prefix included), `{ thenHangUp }` to send those bytes and close, or `'hang-up'` to close the
 * connection unanswered.
 */
export type QgsHook = (
  request: Buffer,
  answer: Buffer,
) => Buffer | { readonly thenHangUp: Buffer } | 'hang-up';

export interface QgsServerOptions {
  /** The quoting enclave's work: TD report in, quote out (`MockTdxDevice.quoteTdReport`). */
  readonly quote: (tdReport: Buffer) => Buffer;
  readonly host?: string;
  readonly port?: number;
}

export class QgsServer {
  readonly #server: Server;
  readonly #quote: (tdReport: Buffer) => Buffer;
  readonly #hooks: QgsHook[] = [];
  readonly #sockets = new Set<Socket>();
  #host = '127.0.0.1';
  #port = 0;
  /** Messages answered so far. */
  requests = 0;

  private constructor(options: QgsServerOptions) {
    this.#quote = options.quote;
    this.#server = createServer((socket) => this.#serve(socket));
  }

  static async start(options: QgsServerOptions): Promise<QgsServer> {
    const qgs = new QgsServer(options);
    const host = options.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      qgs.#server.once('error', reject);
      qgs.#server.listen(options.port ?? 0, host, () => resolve());
    });
    const addr = qgs.#server.address();
    if (addr !== null && typeof addr === 'object') qgs.#port = addr.port;
    qgs.#host = host;
    return qgs;
  }

  /** The address as the TDX shim's `--qgs` takes it: `tcp:HOST:PORT`. */
  get address(): string {
    return `tcp:${this.#host}:${this.#port}`;
  }

  /** Lets the next request be answered by `hook` instead. */
  once(hook: QgsHook): void {
    this.#hooks.push(hook);
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #serve(socket: Socket): void {
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
    socket.on('error', () => undefined);
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4) {
        const size = pending.readUInt32BE(0);
        if (size > MAX_MESSAGE) {
          socket.destroy();
          return;
        }
        if (pending.length < 4 + size) return;
        const msg = pending.subarray(4, 4 + size);
        pending = pending.subarray(4 + size);
        this.requests++;
        const response = answerQgsMessage(msg, this.#quote);
        const framed = Buffer.concat([Buffer.alloc(4), response]);
        framed.writeUInt32BE(response.length, 0);
        const hook = this.#hooks.shift();
        const out = hook === undefined ? framed : hook(Buffer.from(msg), framed);
        if (out === 'hang-up') {
          socket.destroy();
          return;
        }
        if (!Buffer.isBuffer(out)) {
          socket.end(out.thenHangUp);
          return;
        }
        socket.write(out);
      }
    });
  }
}
