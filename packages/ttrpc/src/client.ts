/**
 * ttrpc client: multiplexed unary calls on one connection, odd stream ids
 * 1, 3, 5, … as containerd/ttrpc's client uses.
 */
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { formatTtrpcAddress, isUnixAddress, type TtrpcAddress } from './address.js';
import { Code } from './codes.js';
import { type KeyValue, type ResponseMessage, requestCodec, responseCodec } from './envelope.js';
import { TtrpcClosedError, TtrpcConnectError, TtrpcError, TtrpcProtocolError } from './errors.js';
import {
  DEFAULT_MAX_MESSAGE_SIZE,
  encodeFrame,
  FrameDecoder,
  type FrameEvent,
  MessageType,
  oversizeMessage,
} from './frame.js';
import { silentLogger, type TtrpcLogger } from './logger.js';

export interface TtrpcClientOptions {
  /** Largest frame data sent or accepted; default 4 MiB, as containerd/ttrpc. */
  maxMessageSize?: number;
  logger?: TtrpcLogger;
}

export interface ConnectOptions extends TtrpcClientOptions {
  /** Give up connecting after this long; default 10 000 ms. */
  connectTimeoutMs?: number;
}

export interface CallOptions {
  /**
   * Deadline for this call. It is sent as `timeout_nano` so the server can
   * stop early, and enforced locally: the call rejects with
   * DEADLINE_EXCEEDED "context deadline exceeded".
   */
  timeoutMs?: number;
  /** Sent as ttrpc metadata, keys verbatim; an array sends one pair per value. */
  metadata?: Readonly<Record<string, string | readonly string[]>>;
  /** Abandons the call with CANCELLED "context canceled" (ttrpc cannot tell the server). */
  signal?: AbortSignal;
}

interface Pending {
  readonly resolve: (payload: Uint8Array) => void;
  readonly reject: (err: TtrpcError) => void;
  readonly cleanup: () => void;
}

const MAX_STREAM_ID = 0xffffffff;

export class TtrpcClient {
  private readonly socket: Duplex;
  private readonly decoder: FrameDecoder;
  private readonly logger: TtrpcLogger;
  private readonly pending = new Map<number, Pending>();
  private nextStreamId = 1;
  private closeError: TtrpcClosedError | null = null;
  private readonly closeListeners: ((err: TtrpcClosedError) => void)[] = [];

  /** Connects to a unix socket or TCP address. Rejects with `TtrpcConnectError`. */
  static connect(address: TtrpcAddress, options: ConnectOptions = {}): Promise<TtrpcClient> {
    const timeoutMs = options.connectTimeoutMs ?? 10_000;
    const where = formatTtrpcAddress(address);
    return new Promise((resolve, reject) => {
      const socket = isUnixAddress(address)
        ? net.createConnection({ path: address.path })
        : net.createConnection({ host: address.host, port: address.port, noDelay: true });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new TtrpcConnectError(`ttrpc: connecting to ${where} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(new TtrpcConnectError(`ttrpc: cannot connect to ${where}: ${err.message}`, { cause: err }));
      });
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new TtrpcClient(socket, options));
      });
    });
  }

  /** Wraps an already-connected stream (TLS, hybrid vsock after `CONNECT`, a test pair). */
  constructor(socket: Duplex, options: TtrpcClientOptions = {}) {
    this.socket = socket;
    this.decoder = new FrameDecoder(options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE);
    this.logger = options.logger ?? silentLogger;
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) =>
      this.shutdown(new TtrpcClosedError(`ttrpc: closed: ${err.message}`, { cause: err })),
    );
    socket.on('close', () =>
      this.shutdown(
        new TtrpcClosedError(
          this.decoder.midFrame
            ? 'ttrpc: closed: connection lost in the middle of a message'
            : 'ttrpc: closed',
        ),
      ),
    );
  }

  /** True once the connection is closed; every call then rejects with `TtrpcClosedError`. */
  get closed(): boolean {
    return this.closeError !== null;
  }

  /** Number of calls waiting for a response. */
  get pendingCalls(): number {
    return this.pending.size;
  }

  /** Runs `listener` once when the connection closes (at once if it already has). */
  onClose(listener: (err: TtrpcClosedError) => void): void {
    if (this.closeError) listener(this.closeError);
    else this.closeListeners.push(listener);
  }

  /**
   * Unary call. Resolves with the response message bytes; rejects with a
   * `TtrpcError` carrying the server's status, DEADLINE_EXCEEDED or
   * CANCELLED from the options, RESOURCE_EXHAUSTED for an oversize message,
   * `TtrpcProtocolError` for a broken response, `TtrpcClosedError` when the
   * connection is lost.
   */
  call(service: string, method: string, payload: Uint8Array, options: CallOptions = {}): Promise<Uint8Array> {
    if (this.closeError) return Promise.reject(this.closeError);
    const { timeoutMs, signal } = options;
    if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
      return Promise.reject(new RangeError(`timeoutMs must be a positive number: ${timeoutMs}`));
    }
    if (signal?.aborted) return Promise.reject(new TtrpcError(Code.CANCELLED, 'context canceled'));
    if (this.nextStreamId > MAX_STREAM_ID) {
      return Promise.reject(new TtrpcError(Code.UNAVAILABLE, 'ttrpc: stream ids exhausted, reconnect'));
    }
    const bytes = requestCodec.encode({
      service,
      method,
      payload,
      timeout_nano: timeoutMs === undefined ? 0n : BigInt(Math.round(timeoutMs * 1e6)),
      metadata: toPairs(options.metadata),
    });
    if (bytes.length > this.decoder.maxMessageSize) {
      return Promise.reject(
        new TtrpcError(Code.RESOURCE_EXHAUSTED, oversizeMessage(bytes.length, this.decoder.maxMessageSize)),
      );
    }
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    return new Promise<Uint8Array>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => {
        this.settle(id)?.reject(new TtrpcError(Code.CANCELLED, 'context canceled'));
      };
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      this.pending.set(id, { resolve, reject, cleanup });
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.settle(id)?.reject(new TtrpcError(Code.DEADLINE_EXCEEDED, 'context deadline exceeded'));
        }, timeoutMs);
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.socket.write(encodeFrame(id, MessageType.REQUEST, 0, bytes));
    });
  }

  /** Closes the connection; pending calls reject with `TtrpcClosedError` "ttrpc: closed". */
  close(): void {
    this.shutdown(new TtrpcClosedError('ttrpc: closed'));
    this.socket.destroy();
  }

  /** Removes a pending call and returns it, or undefined if it already settled. */
  private settle(id: number): Pending | undefined {
    const p = this.pending.get(id);
    if (!p) return undefined;
    this.pending.delete(id);
    p.cleanup();
    return p;
  }

  private shutdown(err: TtrpcClosedError): void {
    if (this.closeError) return;
    this.closeError = err;
    for (const id of [...this.pending.keys()]) this.settle(id)?.reject(err);
    for (const l of this.closeListeners.splice(0)) l(err);
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    let events: FrameEvent[];
    try {
      events = this.decoder.push(chunk);
    } catch (err) {
      this.shutdown(new TtrpcClosedError(`ttrpc: closed: ${(err as Error).message}`, { cause: err }));
      return;
    }
    for (const ev of events) this.onEvent(ev);
  }

  private onEvent(ev: FrameEvent): void {
    const id = ev.header.streamId;
    const call = this.pending.get(id);
    if (!call) {
      // A late answer to a call that timed out or was cancelled, or a peer bug.
      this.logger.debug({ streamId: id, type: ev.header.type }, 'ttrpc: message for an inactive stream');
      return;
    }
    this.settle(id);
    if (ev.kind === 'oversize') {
      call.reject(
        new TtrpcError(
          Code.RESOURCE_EXHAUSTED,
          oversizeMessage(ev.header.length, this.decoder.maxMessageSize),
        ),
      );
      return;
    }
    if (ev.header.type !== MessageType.RESPONSE) {
      call.reject(new TtrpcProtocolError(`ttrpc: unexpected message type ${ev.header.type} on a unary call`));
      return;
    }
    let response: ResponseMessage;
    try {
      response = responseCodec.decode(ev.data);
    } catch (err) {
      call.reject(
        new TtrpcProtocolError(`ttrpc: undecodable response: ${(err as Error).message}`, { cause: err }),
      );
      return;
    }
    const status = response.status;
    if (status && status.code !== Code.OK) {
      call.reject(new TtrpcError(status.code, status.message, { details: status.details }));
      return;
    }
    call.resolve(response.payload);
  }
}

function toPairs(md: CallOptions['metadata']): KeyValue[] {
  const pairs: KeyValue[] = [];
  if (!md) return pairs;
  for (const [key, value] of Object.entries(md)) {
    if (typeof value === 'string') pairs.push({ key, value });
    else for (const v of value) pairs.push({ key, value: v });
  }
  return pairs;
}
