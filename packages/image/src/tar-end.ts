/**
 * Go's archive/tar (and so containers/image, umoci and image-rs' tar crate)
 * takes end of input on an entry boundary as the end of the archive, with or
 * without the last entry's padding and the two zero blocks. Some real layers
 * end that way: umoci 0.4 writes its layers without them. tar-stream insists
 * on the padding and fails with "Unexpected end of data".
 *
 * This pass-through follows the archive's framing exactly as tar-stream will
 * read it (headers, PAX and GNU long-name records, directories read without
 * data) and, at the end, supplies the missing padding and trailer only when
 * the input stopped on a boundary. Input that stops inside an entry's data
 * or inside a header is passed on as it is, and tar-stream reports it.
 *
 * It must sit after the diff_id digest: the bytes it adds are not part of
 * the layer.
 */
import { Transform, type TransformCallback } from 'node:stream';

const BLOCK = 512;
/** tar-stream's cap on PAX / long-name record size; beyond it tar-stream fails anyway. */
const MAX_RECORD_BYTES = 1024 * 1024;
const TYPE_PAX = 'x'.charCodeAt(0) - 48;
const TYPE_PAX_GLOBAL = 'g'.charCodeAt(0) - 48;
const TYPE_GNU_LONG_PATH = 'L'.charCodeAt(0) - 48;
const TYPE_GNU_LONG_LINK = 'K'.charCodeAt(0) - 48;

function checksumIsEmpty(block: Buffer): boolean {
  let sum = 8 * 32;
  for (let i = 0; i < 148; i++) sum += block[i] ?? 0;
  for (let i = 156; i < BLOCK; i++) sum += block[i] ?? 0;
  return sum === 8 * 32;
}

/** tar-stream's numeric field decoding (octal, or base-256 when the high bit is set). */
function decodeNumber(block: Buffer, offset: number, length: number): number {
  const v = block.subarray(offset, offset + length);
  if (((v[0] ?? 0) & 0x80) !== 0) {
    const positive = v[0] === 0x80;
    if (!positive && v[0] !== 0xff) return Number.NaN;
    let sum = 0;
    for (let i = 1; i < v.length; i++) sum = sum * 256 + (positive ? (v[i] ?? 0) : 0xff - (v[i] ?? 0));
    return positive ? sum : -1 - sum;
  }
  let start = 0;
  while (start < v.length && v[start] === 32) start++;
  let end = v.indexOf(32, start);
  if (end < 0) end = v.length;
  while (start < end && v[start] === 0) start++;
  if (end === start) return 0;
  return Number.parseInt(v.subarray(start, end).toString('latin1'), 8);
}

function nameEndsWithSlash(block: Buffer): boolean {
  const nul = block.indexOf(0, 0);
  const name = block.subarray(0, nul < 0 || nul > 100 ? 100 : nul);
  const ustar = block.subarray(257, 263).toString('latin1') === 'ustar\0';
  if (ustar && (block[345] ?? 0) !== 0) return name.length === 0 || name[name.length - 1] === 0x2f;
  return name.length > 0 && name[name.length - 1] === 0x2f;
}

/** The `size` record of PAX data, as tar-stream decodes it. */
function paxSize(data: Buffer): string | undefined {
  let buf = data;
  let size: string | undefined;
  while (buf.length > 0) {
    let i = 0;
    while (i < buf.length && buf[i] !== 32) i++;
    const len = Number.parseInt(buf.subarray(0, i).toString('latin1'), 10);
    if (!len) break;
    const record = buf.subarray(i + 1, len - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq === -1) break;
    if (record.slice(0, eq) === 'size') size = record.slice(eq + 1);
    buf = buf.subarray(len);
  }
  return size;
}

export class TarEndGuard extends Transform {
  readonly #header = Buffer.alloc(BLOCK);
  #headerFill = 0;
  #dataLeft = 0;
  #padLeft = 0;
  #collecting: 'pax' | 'global' | null = null;
  #record: Buffer[] = [];
  #recordBytes = 0;
  #globalSize: string | undefined;
  #localPax: { size: string | undefined } | undefined;

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    let off = 0;
    while (off < chunk.length) {
      if (this.#dataLeft > 0) {
        const n = Math.min(this.#dataLeft, chunk.length - off);
        if (this.#collecting !== null && this.#recordBytes + n <= MAX_RECORD_BYTES) {
          this.#record.push(chunk.subarray(off, off + n));
          this.#recordBytes += n;
        }
        this.#dataLeft -= n;
        off += n;
        if (this.#dataLeft === 0) this.#endRecord();
        continue;
      }
      if (this.#padLeft > 0) {
        const n = Math.min(this.#padLeft, chunk.length - off);
        this.#padLeft -= n;
        off += n;
        continue;
      }
      const n = Math.min(BLOCK - this.#headerFill, chunk.length - off);
      chunk.copy(this.#header, this.#headerFill, off, off + n);
      this.#headerFill += n;
      off += n;
      if (this.#headerFill === BLOCK) {
        this.#headerFill = 0;
        this.#onHeader(this.#header);
      }
    }
    cb(null, chunk);
  }

  #endRecord(): void {
    if (this.#collecting === null) return;
    const size = paxSize(Buffer.concat(this.#record));
    if (this.#collecting === 'global') this.#globalSize = size;
    else this.#localPax = { size: size ?? this.#globalSize };
    this.#collecting = null;
    this.#record = [];
    this.#recordBytes = 0;
  }

  #onHeader(block: Buffer): void {
    if (checksumIsEmpty(block)) return;
    const typeflag = block[156] === 0 ? 0 : (block[156] ?? 48) - 48;
    let size = decodeNumber(block, 124, 12);
    if (
      typeflag === TYPE_PAX ||
      typeflag === TYPE_PAX_GLOBAL ||
      typeflag === TYPE_GNU_LONG_PATH ||
      typeflag === TYPE_GNU_LONG_LINK
    ) {
      this.#collecting = typeflag === TYPE_PAX ? 'pax' : typeflag === TYPE_PAX_GLOBAL ? 'global' : null;
      this.#setData(size);
      if (size === 0) this.#endRecord();
      return;
    }
    const pax = this.#localPax;
    this.#localPax = undefined;
    if (pax?.size !== undefined && pax.size !== '') size = Number.parseInt(pax.size, 10);
    const isDir = typeflag === 5 || (typeflag === 0 && nameEndsWithSlash(block));
    if (isDir || size === 0) return;
    this.#setData(size);
  }

  #setData(size: number): void {
    // A malformed size makes tar-stream fail; stop tracking and let it.
    if (!Number.isFinite(size) || size < 0) {
      this.#dataLeft = Number.POSITIVE_INFINITY;
      return;
    }
    this.#dataLeft = size;
    const rest = size % BLOCK;
    this.#padLeft = rest === 0 ? 0 : BLOCK - rest;
  }

  override _flush(cb: TransformCallback): void {
    if (this.#dataLeft === 0 && this.#headerFill === 0) this.push(Buffer.alloc(this.#padLeft + 2 * BLOCK));
    cb();
  }
}
