// The guest-facing TPM endpoint: swtpm's TCP framing (raw TPM 2.0 commands in, responses out, the
// size taken from each command header) plus, at the next port, the little of swtpm's control
// channel that TPM stacks use (tpm2-tss's swtpm TCTI sets locality 0 when it opens). Every
// complete command goes to `handle`; framing errors are answered the way a TPM answers them and
// end the connection, since the stream position is lost.
import { createServer, type Server, type Socket } from 'node:net';
import type { Logger } from 'pino';

const HEADER_SIZE = 10;
const TPM_ST_NO_SESSIONS = 0x8001;
/** TPM_RC_COMMAND_SIZE: the command's size field disagrees with what was sent or is out of range. */
export const TPM_RC_COMMAND_SIZE = 0x142;
/** TPM_RC_FAILURE: the TPM could not execute the command. */
export const TPM_RC_FAILURE = 0x101;

/** swtpm control channel command codes (tpm_ioctl.h). */
const CTRL_SET_LOCALITY = 5;
/** Results on the control channel are TPM 1.2 style codes. */
const TPM_SUCCESS = 0;
const TPM_BAD_ORDINAL = 0x0a;
const TPM_BAD_LOCALITY = 0x3d;

export const DEFAULT_MAX_COMMAND_SIZE = 8192;
export const DEFAULT_MAX_CONNECTIONS = 32;
export const DEFAULT_PARTIAL_COMMAND_TIMEOUT_MS = 30_000;

/** A bare TPM error response (tag NO_SESSIONS, 10 bytes). */
export function errorResponse(rc: number): Buffer {
  const b = Buffer.alloc(HEADER_SIZE);
  b.writeUInt16BE(TPM_ST_NO_SESSIONS, 0);
  b.writeUInt32BE(HEADER_SIZE, 2);
  b.writeUInt32BE(rc >>> 0, 6);
  return b;
}

export interface TpmStreamServerOptions {
  readonly host: string;
  /** 0 picks a free port (and, with the control channel, a free pair). */
  readonly port: number;
  /** Also serve the control channel at port + 1, as swtpm's TCTI expects. */
  readonly controlChannel?: boolean;
  readonly maxCommandSize?: number;
  readonly maxConnections?: number;
  /** A connection holding half a command this long is closed. */
  readonly partialCommandTimeoutMs?: number;
  /** Executes one complete command; must not throw (an exception becomes TPM_RC_FAILURE). */
  readonly handle: (command: Buffer) => Promise<Uint8Array>;
  readonly logger: Logger;
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen({ port, host, exclusive: true }, () => {
      server.off('error', onError);
      const a = server.address();
      resolve(typeof a === 'object' && a !== null ? a.port : port);
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
  });
}

export class TpmStreamServer {
  readonly #opts: TpmStreamServerOptions;
  readonly #max: number;
  readonly #maxConnections: number;
  readonly #partialTimeout: number;
  readonly #sockets = new Set<Socket>();
  #data: Server | undefined;
  #ctrl: Server | undefined;
  #port = 0;

  constructor(options: TpmStreamServerOptions) {
    this.#opts = options;
    this.#max = options.maxCommandSize ?? DEFAULT_MAX_COMMAND_SIZE;
    this.#maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
    this.#partialTimeout = options.partialCommandTimeoutMs ?? DEFAULT_PARTIAL_COMMAND_TIMEOUT_MS;
  }

  get port(): number {
    return this.#port;
  }

  /** Starts listening; returns the data port (the control channel, if any, is at port + 1). */
  async start(): Promise<number> {
    const { host, port } = this.#opts;
    const attempts = port === 0 && this.#opts.controlChannel ? 20 : 1;
    let lastError: unknown;
    for (let i = 0; i < attempts; i++) {
      const data = createServer((s) => this.#serveData(s));
      let got: number;
      try {
        got = await listen(data, port, host);
      } catch (err) {
        lastError = err;
        continue;
      }
      if (this.#opts.controlChannel) {
        const ctrl = createServer((s) => this.#serveControl(s));
        try {
          await listen(ctrl, got + 1, host);
        } catch (err) {
          // The next port is taken: with a chosen port this is fatal, with port 0 try another pair.
          lastError = err;
          await closeServer(data);
          continue;
        }
        this.#ctrl = ctrl;
      }
      this.#data = data;
      this.#port = got;
      return got;
    }
    throw lastError instanceof Error ? lastError : new Error('cannot listen for TPM connections');
  }

  async close(): Promise<void> {
    const servers = [this.#data, this.#ctrl].filter((s): s is Server => s !== undefined);
    for (const s of servers) s.close();
    for (const s of this.#sockets) s.destroy();
    await Promise.all(servers.map(closeServer));
  }

  #track(socket: Socket): boolean {
    if (this.#sockets.size >= this.#maxConnections) {
      this.#opts.logger.warn({ limit: this.#maxConnections }, 'TPM connection refused: too many connections');
      socket.destroy();
      return false;
    }
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
    socket.on('error', () => undefined);
    return true;
  }

  #serveData(socket: Socket): void {
    if (!this.#track(socket)) return;
    socket.setNoDelay(true);
    let pending: Buffer = Buffer.alloc(0);
    let busy = false;
    let timer: NodeJS.Timeout | undefined;
    const log = this.#opts.logger;

    const armTimer = () => {
      clearTimeout(timer);
      timer = undefined;
      if (pending.length > 0 && !socket.destroyed) {
        timer = setTimeout(() => {
          log.warn({ bytes: pending.length }, 'TPM connection closed: incomplete command');
          socket.destroy();
        }, this.#partialTimeout);
        timer.unref();
      }
    };
    const refuse = (rc: number, why: string, size: number) => {
      log.warn({ size, limit: this.#max }, `TPM command refused: ${why}`);
      pending = Buffer.alloc(0);
      socket.end(errorResponse(rc));
    };

    const pump = async () => {
      if (busy) return;
      busy = true;
      try {
        while (!socket.destroyed && pending.length >= HEADER_SIZE) {
          const size = pending.readUInt32BE(2);
          if (size < HEADER_SIZE) return refuse(TPM_RC_COMMAND_SIZE, 'size smaller than its header', size);
          if (size > this.#max) return refuse(TPM_RC_COMMAND_SIZE, 'size over the limit', size);
          if (pending.length < size) break;
          const command = Buffer.from(pending.subarray(0, size));
          pending = pending.subarray(size);
          let response: Uint8Array;
          try {
            response = await this.#opts.handle(command);
          } catch (err) {
            log.error({ err: (err as Error).message }, 'TPM command failed in the interposer');
            response = errorResponse(TPM_RC_FAILURE);
          }
          if (socket.destroyed) return;
          socket.write(response);
        }
      } finally {
        busy = false;
        armTimer();
      }
    };

    socket.on('data', (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      // A client may send its next command before the answer; more than two commands' worth queued is abuse.
      if (pending.length > 2 * this.#max) {
        log.warn({ bytes: pending.length }, 'TPM connection closed: too much unanswered input');
        socket.destroy();
        return;
      }
      void pump();
    });
    socket.on('close', () => clearTimeout(timer));
  }

  #serveControl(socket: Socket): void {
    if (!this.#track(socket)) return;
    let pending: Buffer = Buffer.alloc(0);
    const reply = (result: number) => {
      const b = Buffer.alloc(4);
      b.writeUInt32BE(result, 0);
      socket.write(b);
    };
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && !socket.destroyed) {
        const cmd = pending.readUInt32BE(0);
        if (cmd !== CTRL_SET_LOCALITY) {
          // Power, state and reset commands would let a guest reboot the vTPM under the paravisor.
          this.#opts.logger.warn({ cmd }, 'TPM control command refused');
          reply(TPM_BAD_ORDINAL);
          socket.end();
          return;
        }
        if (pending.length < 5) return;
        const locality = pending[4]!;
        pending = pending.subarray(5);
        reply(locality === 0 ? TPM_SUCCESS : TPM_BAD_LOCALITY);
      }
      if (pending.length > 64) socket.destroy();
    });
  }
}
