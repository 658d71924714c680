// Helpers shared by this package's tests (not exported from index.ts).
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ResponseMessage, requestCodec, responseCodec } from '../envelope.js';
import { encodeFrame, FrameDecoder, type FrameEvent, MessageType } from '../frame.js';

export async function tempDir(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'ttrpc-test-'));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export function requestFrame(
  streamId: number,
  req: { service: string; method: string; payload?: Uint8Array; timeout_nano?: bigint },
): Buffer {
  const bytes = requestCodec.encode({
    service: req.service,
    method: req.method,
    payload: req.payload ?? new Uint8Array(0),
    timeout_nano: req.timeout_nano ?? 0n,
    metadata: [],
  });
  return encodeFrame(streamId, MessageType.REQUEST, 0, bytes);
}

/** A raw socket speaking bytes to a server, collecting the frames it answers. */
export class RawPeer {
  readonly events: FrameEvent[] = [];
  private readonly decoder = new FrameDecoder();
  private waiters: (() => void)[] = [];
  closed = false;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.events.push(...this.decoder.push(chunk));
      this.wake();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  static connect(target: { path: string } | { host: string; port: number }): Promise<RawPeer> {
    return new Promise((resolve, reject) => {
      const s = net.createConnection(target as net.NetConnectOpts);
      s.once('error', reject);
      s.once('connect', () => resolve(new RawPeer(s)));
    });
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  write(bytes: Uint8Array): Promise<void> {
    return new Promise((resolve, reject) =>
      this.socket.write(bytes, (err) => (err ? reject(err) : resolve())),
    );
  }

  /** Waits until `n` frames arrived (or the socket closed) and returns them. */
  async frames(n: number): Promise<FrameEvent[]> {
    while (this.events.length < n && !this.closed) {
      await new Promise<void>((r) => this.waiters.push(r));
    }
    return this.events.slice(0, n);
  }

  async waitClosed(): Promise<void> {
    while (!this.closed) await new Promise<void>((r) => this.waiters.push(r));
  }

  /** Decodes the i-th frame as a ttrpc Response. */
  async response(i: number): Promise<{ streamId: number; type: number; response: ResponseMessage }> {
    const evs = await this.frames(i + 1);
    const ev = evs[i];
    if (!ev) throw new Error(`connection closed before frame ${i}`);
    if (ev.kind !== 'frame') throw new Error('oversize frame');
    return { streamId: ev.header.streamId, type: ev.header.type, response: responseCodec.decode(ev.data) };
  }

  end(): void {
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }
}

export const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
export const text = (b: Uint8Array): string => new TextDecoder().decode(b);
