/**
 * The little DER the `pkcs7` key protocol needs: a bounded reader of
 * tag-length-value items (low tag numbers, definite lengths; BER's
 * indefinite lengths are refused) and a writer. Every length is checked
 * against its parent before anything is sliced.
 */

import { ImageError, type ImageErrorCode } from '../errors.js';

export class DerError extends ImageError {
  override readonly code: ImageErrorCode = 'DER_INVALID';
  override readonly name: string = 'DerError';
}

export interface Tlv {
  /** The identifier octet (class, constructed bit, tag number). */
  readonly tag: number;
  /** Offset of the contents. */
  readonly start: number;
  /** Offset after the contents. */
  readonly end: number;
  /** Offset of the identifier octet (so `bytes.subarray(headerStart, end)` is the whole item). */
  readonly headerStart: number;
}

export const DER = {
  INTEGER: 0x02,
  OCTET_STRING: 0x04,
  NULL: 0x05,
  OID: 0x06,
  SEQUENCE: 0x30,
  SET: 0x31,
} as const;

/** Reads one item at `pos`, which must end by `limit`. */
export function readTlv(bytes: Uint8Array, pos: number, limit: number, what: string): Tlv {
  if (pos + 2 > limit) throw new DerError(`${what}: truncated`);
  const tag = bytes[pos] as number;
  if ((tag & 0x1f) === 0x1f) throw new DerError(`${what}: high tag numbers are not used here`);
  let length = bytes[pos + 1] as number;
  let start = pos + 2;
  if (length === 0x80) throw new DerError(`${what}: indefinite length (BER) is not DER`);
  if (length > 0x80) {
    const n = length & 0x7f;
    if (n > 4 || start + n > limit) throw new DerError(`${what}: bad length`);
    length = 0;
    for (let i = 0; i < n; i++) length = length * 256 + (bytes[start + i] as number);
    start += n;
  }
  if (start + length > limit) throw new DerError(`${what}: length ${length} runs past its container`);
  return { tag, start, end: start + length, headerStart: pos };
}

/** The items inside a constructed item, which must fill it exactly. */
export function childrenOf(bytes: Uint8Array, parent: Tlv, what: string): Tlv[] {
  const out: Tlv[] = [];
  for (let pos = parent.start; pos < parent.end; ) {
    const t = readTlv(bytes, pos, parent.end, what);
    out.push(t);
    pos = t.end;
  }
  return out;
}

/** Reads the single item that must make up all of `bytes`. */
export function readWhole(bytes: Uint8Array, what: string): Tlv {
  const t = readTlv(bytes, 0, bytes.byteLength, what);
  if (t.end !== bytes.byteLength) throw new DerError(`${what}: trailing bytes after the DER item`);
  return t;
}

export function expectTag(t: Tlv | undefined, tag: number, what: string): Tlv {
  if (t === undefined) throw new DerError(`${what}: missing`);
  if (t.tag !== tag)
    throw new DerError(`${what}: expected tag 0x${tag.toString(16)}, got 0x${t.tag.toString(16)}`);
  return t;
}

export function contents(bytes: Uint8Array, t: Tlv): Uint8Array {
  return bytes.subarray(t.start, t.end);
}

export function oidString(bytes: Uint8Array, t: Tlv, what: string): string {
  const body = contents(bytes, expectTag(t, DER.OID, what));
  if (body.byteLength === 0 || body.byteLength > 64) throw new DerError(`${what}: bad OID`);
  const arcs: number[] = [];
  let value = 0;
  for (const b of body) {
    value = value * 128 + (b & 0x7f);
    if (value > Number.MAX_SAFE_INTEGER / 128) throw new DerError(`${what}: OID arc too large`);
    if ((b & 0x80) === 0) {
      arcs.push(value);
      value = 0;
    }
  }
  if ((body[body.byteLength - 1] as number) & 0x80) throw new DerError(`${what}: truncated OID`);
  const first = arcs.shift() as number;
  const head = first < 80 ? [Math.floor(first / 40), first % 40] : [2, first - 80];
  return [...head, ...arcs].join('.');
}

function lengthBytes(n: number): number[] {
  if (n < 0x80) return [n];
  const out: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) out.unshift(v % 256);
  return [0x80 | out.length, ...out];
}

/** One item with the given identifier octet. */
export function derItem(tag: number, ...parts: Uint8Array[]): Buffer {
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from([tag, ...lengthBytes(body.byteLength)]), body]);
}

export function derOid(oid: string): Buffer {
  const arcs = oid.split('.').map(Number);
  const out: number[] = [(arcs[0] as number) * 40 + (arcs[1] as number)];
  for (const arc of arcs.slice(2)) {
    const groups: number[] = [];
    for (let v = arc; ; v = Math.floor(v / 128)) {
      groups.unshift(v % 128);
      if (v < 128) break;
    }
    out.push(...groups.map((g, i) => (i < groups.length - 1 ? g | 0x80 : g)));
  }
  return derItem(DER.OID, Buffer.from(out));
}

export function derSmallInteger(n: number): Buffer {
  return derItem(DER.INTEGER, Buffer.from([n]));
}
