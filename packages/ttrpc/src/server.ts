/**
 * ttrpc server: unary methods over unix sockets, TCP, or any connected
 * duplex stream (TLS, hybrid vsock), with containerd/ttrpc's answers to
 * protocol violations so Go and Rust clients see the errors they expect.
 */
import { chmod, lstat, unlink } from 'node:fs/promises';
import net from 'node:net';
import { dirname } from 'node:path';
import type { Duplex } from 'node:stream';
import { makeDirectory } from '@broker/cli';
import { isUnixAddress, type TcpAddress, type TtrpcAddress, type UnixAddress } from './address.js';
import { Code } from './codes.js';
import {
  type KeyValue,
  type RequestMessage,
  requestCodec,
  responseCodec,
  type StatusMessage,
} from './envelope.js';
import { ProtoDecodeError, type StatusDetail, TtrpcError, TtrpcLibraryError } from './errors.js';
import {
  DEFAULT_MAX_MESSAGE_SIZE,
  encodeFrame,
  FrameDecoder,
  type FrameEvent,
  type FrameHeader,
  MessageType,
  oversizeMessage,
} from './frame.js';
import { silentLogger, type TtrpcLogger } from './logger.js';

/** Request metadata: keys as sent (ttrpc does not normalise case), values in arrival order. */
export type Metadata = ReadonlyMap<string, readonly string[]>;

export interface CallContext {
  readonly service: string;
  readonly method: string;
  readonly metadata: Metadata;
  /**
   * Aborted when the caller's deadline (`timeout_nano`) passes, the
   * connection closes, or the server is force-closed. `signal.reason` is a
   * `TtrpcError` (DEADLINE_EXCEEDED or CANCELLED).
   */
  readonly signal: AbortSignal;
  /** Deadline as a `Date.now()` timestamp, if the caller set one. */
  readonly deadline: number | undefined;
}

/** Handles one unary call: request message bytes in, response message bytes out. */
export type UnaryHandler = (request: Uint8Array, ctx: CallContext) => Promise<Uint8Array>;

export type ServiceMethods = Readonly<Record<string, UnaryHandler>>;

export interface TtrpcServerOptions {
  /** Largest frame data accepted or sent; default 4 MiB, as containerd/ttrpc. */
  maxMessageSize?: number;
  /**
   * Calls one connection may have in flight before the server stops reading
   * from it (back-pressure, not an error). Default 256.
   */
  maxConcurrentCalls?: number;
  logger?: TtrpcLogger;
  /**
   * Serves calls to services or methods that are not registered, instead of answering UNIMPLEMENTED:
   * for interposers that forward or deny whatever they do not know.
   */
  fallback?: UnaryHandler;
}

export interface UnixListenOptions extends UnixAddress {
  /** File mode of the socket, default 0o600. */
  readonly mode?: number;
}
export type ListenOptions = UnixListenOptions | TcpAddress;

export interface CloseOptions {
  /**
   * How long in-flight calls may run before their connections are cut and
   * their handlers aborted; default 5000 ms. 0 closes at once.
   */
  graceMs?: number;
}

const DEADLINE_MESSAGE = 'context deadline exceeded';
const SERVER_CLOSED_MESSAGE = 'ttrpc: server closed';
// setTimeout's ceiling; a longer deadline cannot fire before the process restarts anyway.
const MAX_TIMER_MS = 0x7fffffff;

/** Status sent for a handler's failure, following containerd/ttrpc's mapping. */
export function statusFromError(err: unknown): StatusMessage {
  if (err instanceof TtrpcError) {
    return { code: err.code, message: err.message, details: [...err.details] };
  }
  if (err instanceof ProtoDecodeError) {
    // Go's protoUnmarshal turns a bad payload into INTERNAL with this prefix.
    return {
      code: Code.INTERNAL,
      message: `ttrpc: error unmarshalling payload: ${err.message}`,
      details: [],
    };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { code: Code.UNKNOWN, message, details: [] };
}

function statusOf(code: number, message: string, details: StatusDetail[] = []): StatusMessage {
  return { code, message, details };
}

interface InFlight {
  readonly controller: AbortController;
  timer: NodeJS.Timeout | undefined;
}

export class TtrpcServer {
  readonly maxMessageSize: number;
  private readonly maxConcurrentCalls: number;
  private readonly logger: TtrpcLogger;
  private readonly fallback: UnaryHandler | undefined;
  private readonly services = new Map<string, Map<string, UnaryHandler>>();
  private readonly listeners = new Set<net.Server>();
  private readonly connections = new Set<ServerConnection>();
  private closing: Promise<void> | null = null;

  constructor(options: TtrpcServerOptions = {}) {
    this.maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
    new FrameDecoder(this.maxMessageSize); // validates the bound early
    this.maxConcurrentCalls = options.maxConcurrentCalls ?? 256;
    if (!Number.isInteger(this.maxConcurrentCalls) || this.maxConcurrentCalls < 1) {
      throw new RangeError(`maxConcurrentCalls must be a positive integer: ${options.maxConcurrentCalls}`);
    }
    this.logger = options.logger ?? silentLogger;
    this.fallback = options.fallback;
  }

  /** Adds a service. Method names are matched exactly; registering a service twice throws. */
  register(service: string, methods: ServiceMethods): void {
    if (this.services.has(service))
      throw new TtrpcLibraryError('SERVICE_DUPLICATE', `duplicate service ${service} registered`);
    const table = new Map<string, UnaryHandler>();
    for (const [name, handler] of Object.entries(methods)) {
      if (typeof handler !== 'function') throw new TypeError(`${service}/${name}: handler is not a function`);
      table.set(name, handler);
    }
    this.services.set(service, table);
  }

  /**
   * Starts accepting connections. A unix socket's parent directory is
   * created; a stale socket file is replaced, any other file is left alone
   * and the call fails. Resolves with the bound address (TCP port 0 picks one).
   */
  async listen(options: ListenOptions): Promise<TtrpcAddress> {
    if (this.closing) throw new TtrpcLibraryError('SERVER_CLOSED', SERVER_CLOSED_MESSAGE);
    const server = net.createServer({ noDelay: true }, (socket) => this.serveSocket(socket));
    server.on('error', (err) => this.logger.error({ err: err.message }, 'ttrpc: listener failed'));
    if (isUnixAddress(options)) {
      const path = options.path;
      await makeDirectory(dirname(path));
      await removeStaleSocket(path);
      await listenOn(server, { path });
      try {
        await chmod(path, options.mode ?? 0o600);
      } catch (err) {
        server.close();
        throw err;
      }
      this.adopt(server);
      return { path };
    }
    await listenOn(server, { host: options.host, port: options.port });
    this.adopt(server);
    const bound = server.address() as net.AddressInfo;
    return { host: bound.address, port: bound.port };
  }

  /** Keeps a bound listener, unless close() started while it was being bound. */
  private adopt(server: net.Server): void {
    if (this.closing) {
      server.close();
      throw new TtrpcLibraryError('SERVER_CLOSED', SERVER_CLOSED_MESSAGE);
    }
    this.listeners.add(server);
  }

  /** Serves an already-connected stream (a TLS socket, a hybrid-vsock socket after its handshake, …). */
  serveSocket(socket: Duplex): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    const conn = new ServerConnection(this, socket);
    this.connections.add(conn);
    socket.once('close', () => {
      this.connections.delete(conn);
      conn.dispose();
    });
  }

  /**
   * Stops listening, lets in-flight calls finish (new calls get UNAVAILABLE
   * "ttrpc: server closed"), then closes connections; unix socket files go
   * with their listeners. After `graceMs`, remaining calls are aborted and connections cut.
   */
  close(options: CloseOptions = {}): Promise<void> {
    this.closing ??= this.shutdown(options.graceMs ?? 5000);
    return this.closing;
  }

  private async shutdown(graceMs: number): Promise<void> {
    const listenersClosed = [...this.listeners].map(
      (l) => new Promise<void>((resolve) => l.close(() => resolve())),
    );
    const connectionsClosed = [...this.connections].map((c) => c.drain());
    const timer = setTimeout(() => {
      for (const c of this.connections) c.destroy();
    }, graceMs);
    try {
      await Promise.all([...listenersClosed, ...connectionsClosed]);
    } finally {
      clearTimeout(timer);
    }
    // libuv unlinks a unix socket's path when its listener closes.
    this.listeners.clear();
  }

  /** @internal */
  get isClosing(): boolean {
    return this.closing !== null;
  }

  /** @internal */
  lookup(service: string, method: string): UnaryHandler | StatusMessage {
    const table = this.services.get(service);
    const handler = table?.get(method) ?? this.fallback;
    if (handler) return handler;
    return table
      ? statusOf(Code.UNIMPLEMENTED, `method ${method}`)
      : statusOf(Code.UNIMPLEMENTED, `service ${service}`);
  }

  /** @internal */
  get options(): { maxMessageSize: number; maxConcurrentCalls: number; logger: TtrpcLogger } {
    return {
      maxMessageSize: this.maxMessageSize,
      maxConcurrentCalls: this.maxConcurrentCalls,
      logger: this.logger,
    };
  }
}

/** One accepted connection: parses frames, runs calls concurrently, writes responses. */
class ServerConnection {
  private readonly decoder: FrameDecoder;
  private readonly calls = new Map<number, InFlight>();
  /** Frames parsed but not yet handled (held back by the concurrency limit). */
  private readonly backlog: FrameEvent[] = [];
  private readonly logger: TtrpcLogger;
  private readonly maxConcurrentCalls: number;
  private lastStreamId = 0;
  private waitingForDrain = false;
  private paused = false;
  private draining: (() => void) | null = null;
  private closed = false;
  private readonly closedPromise: Promise<void>;

  constructor(
    private readonly server: TtrpcServer,
    private readonly socket: Duplex,
  ) {
    const opts = server.options;
    this.decoder = new FrameDecoder(opts.maxMessageSize);
    this.logger = opts.logger;
    this.maxConcurrentCalls = opts.maxConcurrentCalls;
    this.closedPromise = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.logger.debug({ err: err.message }, 'ttrpc: connection error'));
    socket.on('end', () => {
      if (this.decoder.midFrame) this.logger.debug({}, 'ttrpc: connection closed in the middle of a frame');
    });
    socket.on('drain', () => {
      this.waitingForDrain = false;
      this.processBacklog();
    });
  }

  /** Waits for in-flight calls, then closes. */
  drain(): Promise<void> {
    if (this.calls.size === 0) this.socket.end();
    else this.draining = () => this.socket.end();
    return this.closedPromise;
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** Called once the socket is closed: abort whatever is still running. */
  dispose(): void {
    this.closed = true;
    this.backlog.length = 0;
    const reason = new TtrpcError(Code.CANCELLED, 'context canceled');
    for (const call of this.calls.values()) {
      clearTimeout(call.timer);
      call.controller.abort(reason);
    }
    this.calls.clear();
  }

  private onData(chunk: Buffer): void {
    try {
      for (const ev of this.decoder.push(chunk)) this.backlog.push(ev);
    } catch (err) {
      // The decoder does not throw on any input; this guards the process anyway.
      this.logger.error({ err: (err as Error).message }, 'ttrpc: frame decoder failed');
      this.socket.destroy();
      return;
    }
    this.processBacklog();
  }

  /**
   * Handles parsed frames while under the concurrency limit. One socket
   * chunk can hold many frames, so the limit is applied here, frame by
   * frame, not only by pausing the socket.
   */
  private processBacklog(): void {
    while (this.backlog.length > 0 && !this.closed && !this.mustPause()) {
      const ev = this.backlog.shift()!;
      if (ev.kind === 'oversize') {
        this.logger.warn(
          { streamId: ev.header.streamId, length: ev.header.length },
          'ttrpc: oversize message',
        );
        this.sendStatus(
          ev.header.streamId,
          statusOf(Code.RESOURCE_EXHAUSTED, oversizeMessage(ev.header.length, this.decoder.maxMessageSize)),
        );
        continue;
      }
      this.onFrame(ev.header, ev.data);
    }
    this.updateFlow();
  }

  private onFrame(header: FrameHeader, data: Uint8Array): void {
    const id = header.streamId;
    if (id % 2 !== 1) {
      this.sendStatus(
        id,
        statusOf(Code.INVALID_ARGUMENT, 'StreamID must be odd for client initiated streams'),
      );
      return;
    }
    if (header.type === MessageType.DATA) {
      const call = this.calls.get(id);
      if (!call) {
        this.sendStatus(id, statusOf(Code.INVALID_ARGUMENT, 'StreamID is no longer active'));
        return;
      }
      // Only unary methods exist here, and the protocol forbids data on a unary stream.
      this.finish(id, call);
      call.controller.abort(new TtrpcError(Code.CANCELLED, 'context canceled'));
      this.sendStatus(id, statusOf(Code.INVALID_ARGUMENT, 'data message on a unary stream'));
      return;
    }
    if (header.type !== MessageType.REQUEST) {
      // containerd/ttrpc ignores other types for forward compatibility.
      this.logger.debug({ streamId: id, type: header.type }, 'ttrpc: ignoring message of unexpected type');
      return;
    }
    if (id <= this.lastStreamId) {
      this.sendStatus(id, statusOf(Code.INVALID_ARGUMENT, 'StreamID cannot be re-used and must increment'));
      return;
    }
    this.lastStreamId = id;
    let request: RequestMessage;
    try {
      request = requestCodec.decode(data);
    } catch (err) {
      this.sendStatus(
        id,
        statusOf(Code.INVALID_ARGUMENT, `unmarshal request error: ${(err as Error).message}`),
      );
      return;
    }
    this.startCall(id, request);
  }

  private startCall(id: number, request: RequestMessage): void {
    if (this.server.isClosing) {
      this.sendStatus(id, statusOf(Code.UNAVAILABLE, SERVER_CLOSED_MESSAGE));
      return;
    }
    const handler = this.server.lookup(request.service, request.method);
    if (typeof handler !== 'function') {
      this.sendStatus(id, handler);
      return;
    }
    const timeoutNano = BigInt(request.timeout_nano);
    let deadline: number | undefined;
    let delayMs: number | undefined;
    if (timeoutNano !== 0n) {
      if (timeoutNano < 0n) {
        this.sendStatus(id, statusOf(Code.DEADLINE_EXCEEDED, DEADLINE_MESSAGE));
        return;
      }
      const ms = Number((timeoutNano + 999_999n) / 1_000_000n);
      if (ms <= MAX_TIMER_MS) {
        delayMs = ms;
        deadline = Date.now() + ms;
      }
    }
    const call: InFlight = { controller: new AbortController(), timer: undefined };
    this.calls.set(id, call);
    this.updateFlow();
    if (delayMs !== undefined) {
      call.timer = setTimeout(() => {
        if (this.calls.get(id) !== call) return;
        this.finish(id, call);
        call.controller.abort(new TtrpcError(Code.DEADLINE_EXCEEDED, DEADLINE_MESSAGE));
        this.sendStatus(id, statusOf(Code.DEADLINE_EXCEEDED, DEADLINE_MESSAGE));
      }, delayMs);
    }
    const ctx: CallContext = {
      service: request.service,
      method: request.method,
      metadata: toMetadata(request.metadata),
      signal: call.controller.signal,
      deadline,
    };
    let pending: Promise<Uint8Array>;
    try {
      pending = Promise.resolve(handler(request.payload, ctx));
    } catch (err) {
      pending = Promise.reject(err);
    }
    pending.then(
      (payload) => {
        if (this.calls.get(id) !== call) return;
        this.finish(id, call);
        if (!(payload instanceof Uint8Array)) {
          this.sendStatus(id, statusOf(Code.UNKNOWN, 'ttrpc: marshal called with nil'));
          return;
        }
        this.send(id, { status: statusOf(Code.OK, ''), payload });
      },
      (err: unknown) => {
        if (this.calls.get(id) !== call) return;
        this.finish(id, call);
        const status = statusFromError(err);
        if (!(err instanceof TtrpcError)) {
          this.logger.warn(
            { service: request.service, method: request.method, err: status.message },
            'ttrpc: handler failed',
          );
        }
        this.sendStatus(id, status);
      },
    );
  }

  private finish(id: number, call: InFlight): void {
    clearTimeout(call.timer);
    this.calls.delete(id);
    // Not from inside processBacklog's loop: a synchronous finish there must not recurse.
    if (this.backlog.length > 0) queueMicrotask(() => this.processBacklog());
    else this.updateFlow();
    if (this.calls.size === 0 && this.draining) {
      const end = this.draining;
      this.draining = null;
      // Let the final response reach the socket before ending it.
      queueMicrotask(end);
    }
  }

  private sendStatus(id: number, status: StatusMessage): void {
    this.send(id, { status, payload: new Uint8Array(0) });
  }

  private send(id: number, response: { status: StatusMessage; payload: Uint8Array }): void {
    if (this.closed || this.socket.destroyed || !this.socket.writable) return;
    let bytes = responseCodec.encode(response);
    const max = this.decoder.maxMessageSize;
    if (bytes.length > max) {
      // containerd/ttrpc drops the connection here; answering the one call is kinder and as safe.
      this.logger.warn(
        { streamId: id, length: bytes.length },
        'ttrpc: response exceeds the message size cap',
      );
      bytes = responseCodec.encode({
        status: statusOf(Code.RESOURCE_EXHAUSTED, oversizeMessage(bytes.length, max)),
        payload: new Uint8Array(0),
      });
    }
    if (!this.socket.write(encodeFrame(id, MessageType.RESPONSE, 0, bytes))) {
      this.waitingForDrain = true;
      this.updateFlow();
    }
  }

  /** Stops reading while the peer is not reading our responses or too many calls run. */
  private mustPause(): boolean {
    return this.waitingForDrain || this.calls.size >= this.maxConcurrentCalls;
  }

  private updateFlow(): void {
    const pause = this.mustPause() || this.backlog.length > 0;
    if (pause && !this.paused) {
      this.paused = true;
      this.socket.pause();
    } else if (!pause && this.paused) {
      this.paused = false;
      this.socket.resume();
    }
  }
}

function toMetadata(pairs: readonly KeyValue[]): Metadata {
  const md = new Map<string, string[]>();
  for (const { key, value } of pairs) {
    const list = md.get(key);
    if (list) list.push(value);
    else md.set(key, [value]);
  }
  return md;
}

function listenOn(server: net.Server, options: net.ListenOptions): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(options, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** Removes `path` if it is a socket; refuses to touch any other kind of file. */
async function removeStaleSocket(path: string): Promise<void> {
  let st: Awaited<ReturnType<typeof lstat>>;
  try {
    st = await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!st.isSocket())
    throw new TtrpcLibraryError(
      'SOCKET_PATH_TAKEN',
      `refusing to replace ${path}: it exists and is not a socket`,
    );
  await unlink(path);
}
