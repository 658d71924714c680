/**
 * ttrpc message framing: a 10-byte big-endian header (data length u32,
 * stream id u32, type u8, flags u8) followed by the data.
 */

export const HEADER_LENGTH = 10;
/** containerd/ttrpc's `messageLengthMax` (4 MiB); ttrpc-rust uses the same cap. */
export const DEFAULT_MAX_MESSAGE_SIZE = 4 << 20;

export const MessageType = {
  REQUEST: 0x01,
  RESPONSE: 0x02,
  DATA: 0x03,
} as const;

export const Flag = {
  /** Request/Data: the sender will send no more data on this stream. */
  REMOTE_CLOSED: 0x01,
  /** Request: non-unary, the sender is still sending data. */
  REMOTE_OPEN: 0x02,
  /** Data: the frame carries no data (distinct from an empty message). */
  NO_DATA: 0x04,
} as const;

export interface FrameHeader {
  readonly length: number;
  readonly streamId: number;
  readonly type: number;
  readonly flags: number;
}

export type FrameEvent =
  | { readonly kind: 'frame'; readonly header: FrameHeader; readonly data: Uint8Array }
  /**
   * The header announced more than the cap. Its data has been read and
   * thrown away (as the Go channel does), so the stream stays in sync and
   * the receiver can answer RESOURCE_EXHAUSTED on `header.streamId`.
   */
  | { readonly kind: 'oversize'; readonly header: FrameHeader };

/** Encodes one frame into a single buffer (one write, one syscall). */
export function encodeFrame(streamId: number, type: number, flags: number, data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(HEADER_LENGTH + data.length);
  out.writeUInt32BE(data.length, 0);
  out.writeUInt32BE(streamId, 4);
  out[8] = type;
  out[9] = flags;
  out.set(data, HEADER_LENGTH);
  return out;
}

export function oversizeMessage(length: number, max: number): string {
  // Same wording as containerd/ttrpc so peers and tests can match it.
  return `message length ${length} exceed maximum message size of ${max}`;
}

/**
 * Incremental frame parser. Feed it socket chunks of any size; it returns
 * the frames completed by each chunk. Memory held is bounded by the cap:
 * an oversize frame's data is counted down, never buffered.
 */
export class FrameDecoder {
  readonly maxMessageSize: number;
  private readonly headerBuf = Buffer.alloc(HEADER_LENGTH);
  private headerFill = 0;
  private header: FrameHeader | null = null;
  private data: Buffer | null = null;
  private dataFill = 0;
  private discardLeft = 0;

  constructor(maxMessageSize: number = DEFAULT_MAX_MESSAGE_SIZE) {
    if (!Number.isInteger(maxMessageSize) || maxMessageSize < 0 || maxMessageSize > 0xffffffff) {
      throw new RangeError(`maxMessageSize must be an integer in [0, 2^32): ${maxMessageSize}`);
    }
    this.maxMessageSize = maxMessageSize;
  }

  /** True while part of a frame has been received; EOF now means a truncated frame. */
  get midFrame(): boolean {
    return this.headerFill > 0 || this.header !== null;
  }

  push(chunk: Uint8Array): FrameEvent[] {
    const events: FrameEvent[] = [];
    const buf = Buffer.isBuffer(chunk)
      ? chunk
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let pos = 0;
    while (pos < buf.length) {
      const header = this.header;
      if (header === null) {
        const take = Math.min(HEADER_LENGTH - this.headerFill, buf.length - pos);
        buf.copy(this.headerBuf, this.headerFill, pos, pos + take);
        this.headerFill += take;
        pos += take;
        if (this.headerFill < HEADER_LENGTH) break;
        this.headerFill = 0;
        const h: FrameHeader = {
          length: this.headerBuf.readUInt32BE(0),
          streamId: this.headerBuf.readUInt32BE(4),
          type: this.headerBuf[8]!,
          flags: this.headerBuf[9]!,
        };
        if (h.length > this.maxMessageSize) {
          this.header = h;
          this.discardLeft = h.length;
        } else if (h.length === 0) {
          events.push({ kind: 'frame', header: h, data: Buffer.alloc(0) });
        } else if (buf.length - pos >= h.length) {
          // Whole data in this chunk: hand out a view, no copy. Node never
          // reuses a socket read buffer, so the view stays valid.
          events.push({ kind: 'frame', header: h, data: buf.subarray(pos, pos + h.length) });
          pos += h.length;
        } else {
          this.header = h;
          this.data = Buffer.allocUnsafe(h.length);
          this.dataFill = 0;
        }
        continue;
      }
      if (this.data === null) {
        const take = Math.min(this.discardLeft, buf.length - pos);
        this.discardLeft -= take;
        pos += take;
        if (this.discardLeft === 0) {
          this.header = null;
          events.push({ kind: 'oversize', header });
        }
        continue;
      }
      const take = Math.min(header.length - this.dataFill, buf.length - pos);
      buf.copy(this.data, this.dataFill, pos, pos + take);
      this.dataFill += take;
      pos += take;
      if (this.dataFill === header.length) {
        events.push({ kind: 'frame', header, data: this.data });
        this.header = null;
        this.data = null;
        this.dataFill = 0;
      }
    }
    return events;
  }
}
