import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_MESSAGE_SIZE,
  encodeFrame,
  Flag,
  FrameDecoder,
  type FrameEvent,
  MessageType,
  oversizeMessage,
} from './frame.js';

describe('encodeFrame', () => {
  it('writes the 10-byte big-endian header then the data', () => {
    const f = encodeFrame(
      0x01020305,
      MessageType.DATA,
      Flag.REMOTE_CLOSED | Flag.NO_DATA,
      new Uint8Array([9, 8]),
    );
    expect([...f]).toEqual([0, 0, 0, 2, 1, 2, 3, 5, 3, 5, 9, 8]);
  });
});

describe('FrameDecoder', () => {
  const a = encodeFrame(1, MessageType.REQUEST, 0, new Uint8Array([1, 2, 3]));
  const b = encodeFrame(3, MessageType.REQUEST, 2, new Uint8Array(0));
  const c = encodeFrame(5, MessageType.RESPONSE, 0, new Uint8Array(1000).fill(7));
  const all = Buffer.concat([a, b, c]);

  it('parses several frames from one chunk', () => {
    const evs = new FrameDecoder().push(all);
    expect(
      evs.map((e) => (e.kind === 'frame' ? [e.header.streamId, e.header.flags, e.data.length] : e.kind)),
    ).toEqual([
      [1, 0, 3],
      [3, 2, 0],
      [5, 0, 1000],
    ]);
  });

  it('parses the same frames fed one byte at a time', () => {
    const d = new FrameDecoder();
    const evs = [];
    for (const byte of all) {
      evs.push(...d.push(Uint8Array.of(byte)));
    }
    expect(evs).toHaveLength(3);
    expect(d.midFrame).toBe(false);
    const last = evs[2]!;
    expect(last.kind === 'frame' && [...last.data].every((x) => x === 7)).toBe(true);
    const first = evs[0]!;
    expect(first.kind === 'frame' && [...first.data]).toEqual([1, 2, 3]);
  });

  it('yields the same frames however the bytes are split', () => {
    const big = encodeFrame(
      9,
      MessageType.REQUEST,
      0,
      new Uint8Array(70_000).map((_, i) => i % 251),
    );
    const stream = Buffer.concat([a, big, b, c, big]);
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 48271) % 2147483647; // Park–Miller: deterministic, exact in doubles
      return seed % n;
    };
    const digest = (e: FrameEvent) =>
      e.kind === 'frame'
        ? `${e.header.streamId}:${createHash('sha256').update(e.data).digest('hex')}`
        : e.kind;
    const expected = new FrameDecoder().push(stream).map(digest);
    for (let round = 0; round < 20; round++) {
      const d = new FrameDecoder();
      const got = [];
      let pos = 0;
      while (pos < stream.length) {
        const n = 1 + rand(round % 2 ? 16 : 9000);
        got.push(...d.push(stream.subarray(pos, pos + n)));
        pos += n;
      }
      expect(got.map(digest)).toEqual(expected);
    }
    expect(expected).toHaveLength(5);
  });

  it('reports a partial header and partial data as mid-frame', () => {
    const d = new FrameDecoder();
    expect(d.midFrame).toBe(false);
    d.push(a.subarray(0, 4));
    expect(d.midFrame).toBe(true);
    d.push(a.subarray(4, 11));
    expect(d.midFrame).toBe(true);
    expect(d.push(a.subarray(11))).toHaveLength(1);
    expect(d.midFrame).toBe(false);
  });

  it('discards an oversize frame without buffering it, then keeps parsing', () => {
    const d = new FrameDecoder(16);
    const big = encodeFrame(7, MessageType.REQUEST, 0, new Uint8Array(17));
    expect(d.push(big.subarray(0, 12))).toEqual([]);
    expect(d.midFrame).toBe(true);
    const evs = d.push(Buffer.concat([big.subarray(12), a]));
    expect(evs[0]).toEqual({ kind: 'oversize', header: { length: 17, streamId: 7, type: 1, flags: 0 } });
    expect(evs[1]?.kind).toBe('frame');
  });

  it('accepts exactly the cap', () => {
    const d = new FrameDecoder(16);
    const evs = d.push(encodeFrame(1, MessageType.REQUEST, 0, new Uint8Array(16)));
    expect(evs[0]?.kind).toBe('frame');
  });

  it('treats a header claiming 4 GiB as oversize (first byte must be zero under the 4 MiB cap)', () => {
    const d = new FrameDecoder();
    const evs = d.push(Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 1, 0]));
    expect(evs).toEqual([]);
    expect(d.midFrame).toBe(true);
  });

  it('uses the 4 MiB cap by default and rejects bad caps', () => {
    expect(new FrameDecoder().maxMessageSize).toBe(4 * 1024 * 1024);
    expect(DEFAULT_MAX_MESSAGE_SIZE).toBe(4194304);
    expect(() => new FrameDecoder(-1)).toThrow(RangeError);
    expect(() => new FrameDecoder(1.5)).toThrow(RangeError);
  });

  it('words the oversize error as containerd/ttrpc', () => {
    expect(oversizeMessage(4194305, 4194304)).toBe(
      'message length 4194305 exceed maximum message size of 4194304',
    );
  });
});
