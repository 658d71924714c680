import { open } from 'node:fs/promises';
import { Socket } from 'node:net';
import { HEADER_SIZE } from './command.js';
import { TpmTransportError, TpmUsageError } from './errors.js';

/** Sends one TPM command and returns the TPM's response bytes. */
export interface TpmTransport {
  send(command: Uint8Array): Promise<Uint8Array>;
  close(): Promise<void>;
}

/** Real TPMs answer in at most 4 KiB (TPM_PT_MAX_RESPONSE_SIZE); allow headroom for vTPMs. */
export const DEFAULT_MAX_RESPONSE_SIZE = 16 * 1024;

export interface TransportOptions {
  /** Responses whose header declares more bytes than this fail. */
  readonly maxResponseSize?: number;
}

function responseSizeOf(header: Uint8Array, max: number): number {
  const size = new DataView(header.buffer, header.byteOffset, HEADER_SIZE).getUint32(2);
  if (size < HEADER_SIZE)
    throw new TpmTransportError(`TPM response declares ${size} bytes, less than its header`);
  if (size > max)
    throw new TpmTransportError(`TPM response declares ${size} bytes, more than the limit of ${max}`);
  return size;
}

/** Runs tasks one after another: a TPM handles a single command at a time. */
class Serializer {
  #tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(task, task);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}

/** What the device transport needs from an open file (node's FileHandle fits). */
export interface TpmDeviceFile {
  write(
    buffer: Uint8Array,
    offset: number,
    length: number,
    position: null,
  ): Promise<{ bytesWritten: number }>;
  read(buffer: Uint8Array, offset: number, length: number, position: null): Promise<{ bytesRead: number }>;
  close(): Promise<void>;
}

export interface DeviceTransportOptions extends TransportOptions {
  /** Opens the device; tests substitute a fake. Defaults to `fs.open(path, 'r+')`. */
  readonly openDevice?: (path: string) => Promise<TpmDeviceFile>;
}

/**
 * A TPM character device (`/dev/tpmrm0`, `/dev/tpm0`): the command is one
 * write, the response one or more reads (kernels allow partial reads).
 * One command is in flight at a time. The device is opened on first use;
 * after a failed exchange it is closed and reopened, so a half-read
 * response never leaks into the next command.
 */
export class TpmDeviceTransport implements TpmTransport {
  readonly path: string;
  readonly #max: number;
  readonly #open: (path: string) => Promise<TpmDeviceFile>;
  readonly #serial = new Serializer();
  #file: TpmDeviceFile | undefined;
  #closed = false;

  constructor(path = '/dev/tpmrm0', options: DeviceTransportOptions = {}) {
    this.path = path;
    this.#max = options.maxResponseSize ?? DEFAULT_MAX_RESPONSE_SIZE;
    this.#open = options.openDevice ?? ((p) => open(p, 'r+'));
  }

  send(command: Uint8Array): Promise<Uint8Array> {
    return this.#serial.run(async () => {
      if (this.#closed) throw new TpmTransportError(`TPM device ${this.path} is closed`);
      if (this.#file === undefined) {
        try {
          this.#file = await this.#open(this.path);
        } catch (cause) {
          throw new TpmTransportError(`cannot open TPM device ${this.path}: ${(cause as Error).message}`, {
            cause,
          });
        }
      }
      const file = this.#file;
      try {
        return await this.#exchange(file, command);
      } catch (err) {
        this.#file = undefined;
        await file.close().catch(() => undefined);
        if (err instanceof TpmTransportError) throw err;
        throw new TpmTransportError(`TPM device ${this.path}: ${(err as Error).message}`, { cause: err });
      }
    });
  }

  async #exchange(file: TpmDeviceFile, command: Uint8Array): Promise<Uint8Array> {
    const { bytesWritten } = await file.write(command, 0, command.length, null);
    if (bytesWritten !== command.length) {
      throw new TpmTransportError(
        `TPM device ${this.path} took ${bytesWritten} of ${command.length} command bytes`,
      );
    }
    const buf = new Uint8Array(this.#max);
    let have = 0;
    let want = HEADER_SIZE;
    while (have < want) {
      const { bytesRead } = await file.read(buf, have, this.#max - have, null);
      if (bytesRead === 0) {
        throw new TpmTransportError(`TPM device ${this.path} returned ${have} bytes, expected ${want}`);
      }
      have += bytesRead;
      if (want === HEADER_SIZE && have >= HEADER_SIZE) want = responseSizeOf(buf, this.#max);
    }
    if (have > want)
      throw new TpmTransportError(`TPM device ${this.path} returned ${have - want} bytes past the response`);
    return buf.slice(0, want);
  }

  async close(): Promise<void> {
    await this.#serial.run(async () => {
      this.#closed = true;
      const file = this.#file;
      this.#file = undefined;
      await file?.close();
    });
  }
}

export interface SwtpmSocketOptions extends TransportOptions {
  readonly host?: string;
  readonly port: number;
  /** Fails a command with no complete answer after this long; default 120 s (key generation is slow). */
  readonly timeoutMs?: number;
}

/**
 * swtpm's TCP data channel (`--server type=tcp`): raw command bytes in,
 * raw response bytes out, on one connection. swtpm serves one connection
 * at a time, so close the transport before another client (tpm2-tools)
 * needs the TPM.
 */
export class SwtpmSocketTransport implements TpmTransport {
  readonly host: string;
  readonly port: number;
  readonly #max: number;
  readonly #timeoutMs: number;
  readonly #serial = new Serializer();
  #socket: Socket | undefined;
  #closed = false;

  constructor(options: SwtpmSocketOptions) {
    if (!Number.isInteger(options.port) || options.port <= 0 || options.port > 65535) {
      throw new TpmUsageError(`invalid swtpm port ${options.port}`);
    }
    this.host = options.host ?? '127.0.0.1';
    this.port = options.port;
    this.#max = options.maxResponseSize ?? DEFAULT_MAX_RESPONSE_SIZE;
    this.#timeoutMs = options.timeoutMs ?? 120_000;
  }

  get #where(): string {
    return `swtpm at ${this.host}:${this.port}`;
  }

  #connect(): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const socket = new Socket();
      const onError = (err: Error) => {
        socket.destroy();
        reject(new TpmTransportError(`cannot connect to ${this.#where}: ${err.message}`, { cause: err }));
      };
      socket.once('error', onError);
      socket.connect(this.port, this.host, () => {
        socket.off('error', onError);
        socket.setNoDelay(true);
        // Errors and hang-ups between commands: forget the connection, reconnect on the next send.
        socket.on('error', () => undefined);
        socket.on('close', () => {
          if (this.#socket === socket) this.#socket = undefined;
        });
        resolve(socket);
      });
    });
  }

  send(command: Uint8Array): Promise<Uint8Array> {
    return this.#serial.run(async () => {
      if (this.#closed) throw new TpmTransportError(`connection to ${this.#where} is closed`);
      this.#socket ??= await this.#connect();
      const socket = this.#socket;
      try {
        return await this.#exchange(socket, command);
      } catch (err) {
        // The stream position is unknown now: drop the connection.
        this.#socket = undefined;
        socket.destroy();
        throw err;
      }
    });
  }

  #exchange(socket: Socket, command: Uint8Array): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let have = 0;
      let want = HEADER_SIZE;
      const finish = (err: Error | undefined, value?: Uint8Array) => {
        clearTimeout(timer);
        socket.off('data', onData);
        socket.off('error', onError);
        socket.off('close', onClose);
        if (err) reject(err);
        else resolve(value!);
      };
      const onData = (chunk: Buffer) => {
        chunks.push(chunk);
        have += chunk.length;
        try {
          if (want === HEADER_SIZE && have >= HEADER_SIZE)
            want = responseSizeOf(Buffer.concat(chunks), this.#max);
        } catch (err) {
          finish(err as Error);
          return;
        }
        if (have > want) {
          finish(new TpmTransportError(`${this.#where} sent ${have - want} bytes past the response`));
        } else if (have === want) {
          finish(undefined, new Uint8Array(Buffer.concat(chunks, have)));
        }
      };
      const onError = (err: Error) =>
        finish(new TpmTransportError(`${this.#where}: ${err.message}`, { cause: err }));
      const onClose = () =>
        finish(new TpmTransportError(`${this.#where} closed the connection after ${have} response bytes`));
      const timer = setTimeout(
        () => finish(new TpmTransportError(`${this.#where} did not answer within ${this.#timeoutMs} ms`)),
        this.#timeoutMs,
      );
      socket.on('data', onData);
      socket.on('error', onError);
      socket.on('close', onClose);
      socket.write(command);
    });
  }

  async close(): Promise<void> {
    await this.#serial.run(async () => {
      this.#closed = true;
      const socket = this.#socket;
      this.#socket = undefined;
      if (socket === undefined || socket.destroyed) return;
      await new Promise<void>((resolve) => {
        socket.once('close', () => resolve());
        socket.end();
      });
    });
  }
}

/**
 * Where the TPM is: `device:/dev/tpmrm0` (or a bare absolute path) for a
 * character device, `swtpm:HOST:PORT` for swtpm's TCP data channel.
 */
export type TpmAddress =
  | { readonly kind: 'device'; readonly path: string }
  | { readonly kind: 'swtpm'; readonly host: string; readonly port: number };

export function parseTpmAddress(text: string): TpmAddress {
  const t = text.trim();
  if (t.startsWith('/')) return { kind: 'device', path: t };
  if (t.startsWith('device:')) {
    const path = t.slice('device:'.length);
    if (!path.startsWith('/'))
      throw new TpmUsageError(`TPM device path must be absolute: ${JSON.stringify(text)}`);
    return { kind: 'device', path };
  }
  if (t.startsWith('swtpm:')) {
    const rest = t.slice('swtpm:'.length);
    const colon = rest.lastIndexOf(':');
    const host = (colon > 0 ? rest.slice(0, colon) : '').replace(/^\[(.*)\]$/, '$1');
    const portText = colon > 0 ? rest.slice(colon + 1) : '';
    const port = /^\d{1,5}$/.test(portText) ? Number(portText) : Number.NaN;
    if (host === '' || !(port > 0 && port <= 65535)) {
      throw new TpmUsageError(`swtpm address must be swtpm:HOST:PORT, got ${JSON.stringify(text)}`);
    }
    return { kind: 'swtpm', host, port };
  }
  throw new TpmUsageError(
    `TPM address must be device:/path, /path or swtpm:HOST:PORT, got ${JSON.stringify(text)}`,
  );
}

export function formatTpmAddress(a: TpmAddress): string {
  return a.kind === 'device'
    ? `device:${a.path}`
    : `swtpm:${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;
}

/** A transport for an address (string forms as in `parseTpmAddress`). */
export function openTpmTransport(address: TpmAddress | string, options: TransportOptions = {}): TpmTransport {
  const a = typeof address === 'string' ? parseTpmAddress(address) : address;
  return a.kind === 'device'
    ? new TpmDeviceTransport(a.path, options)
    : new SwtpmSocketTransport({ ...options, host: a.host, port: a.port });
}
