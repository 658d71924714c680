import { TpmParseError, TpmUsageError } from './errors.js';

/**
 * Big-endian reader over untrusted bytes. Every read checks the remaining
 * length first and throws `TpmParseError` naming the structure being
 * parsed; nothing is ever read past the end or silently defaulted.
 */
export class TpmReader {
  readonly #bytes: Uint8Array;
  readonly #view: DataView;
  readonly #base: number;
  #pos = 0;
  /** Name of the outermost structure, for error messages. */
  readonly structure: string;

  /** `base` is where `bytes` starts inside the outermost buffer, so errors report absolute offsets. */
  constructor(bytes: Uint8Array, structure: string, base = 0) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.structure = structure;
    this.#base = base;
  }

  get offset(): number {
    return this.#base + this.#pos;
  }

  get remaining(): number {
    return this.#bytes.length - this.#pos;
  }

  fail(message: string): never {
    throw new TpmParseError(this.structure, this.offset, message);
  }

  #need(n: number, what: string): void {
    if (this.remaining < n) {
      this.fail(`${what} needs ${n} byte(s), ${this.remaining} left`);
    }
  }

  u8(what = 'UINT8'): number {
    this.#need(1, what);
    const v = this.#view.getUint8(this.#pos);
    this.#pos += 1;
    return v;
  }

  u16(what = 'UINT16'): number {
    this.#need(2, what);
    const v = this.#view.getUint16(this.#pos);
    this.#pos += 2;
    return v;
  }

  u32(what = 'UINT32'): number {
    this.#need(4, what);
    const v = this.#view.getUint32(this.#pos);
    this.#pos += 4;
    return v;
  }

  u64(what = 'UINT64'): bigint {
    this.#need(8, what);
    const v = this.#view.getBigUint64(this.#pos);
    this.#pos += 8;
    return v;
  }

  /** A copy of the next `n` bytes. */
  bytes(n: number, what = 'bytes'): Uint8Array {
    this.#need(n, what);
    const out = this.#bytes.slice(this.#pos, this.#pos + n);
    this.#pos += n;
    return out;
  }

  /** A copy of every byte not yet read, without consuming them. */
  peekRemaining(): Uint8Array {
    return this.#bytes.slice(this.#pos);
  }

  /** A TPM2B: UINT16 size, then that many bytes; `max` is the structure's declared capacity. */
  tpm2b(what: string, max: number): Uint8Array {
    const size = this.u16(`${what}.size`);
    if (size > max) this.fail(`${what}.size ${size} exceeds the maximum ${max}`);
    return this.bytes(size, what);
  }

  /**
   * A TPM2B holding a structure: returns a reader over exactly its bytes, so
   * the inner parser cannot run past the declared size.
   */
  sized(what: string, max: number): TpmReader {
    const size = this.u16(`${what}.size`);
    if (size > max) this.fail(`${what}.size ${size} exceeds the maximum ${max}`);
    this.#need(size, what);
    const inner = new TpmReader(
      this.#bytes.subarray(this.#pos, this.#pos + size),
      this.structure,
      this.#base + this.#pos,
    );
    this.#pos += size;
    return inner;
  }

  /** Throws unless every byte was consumed. */
  end(what = this.structure): void {
    if (this.remaining !== 0) this.fail(`${this.remaining} trailing byte(s) after ${what}`);
  }
}

/** Growable big-endian writer. Values out of range are caller errors. */
export class TpmWriter {
  #buf = new Uint8Array(256);
  #view = new DataView(this.#buf.buffer);
  #len = 0;

  get length(): number {
    return this.#len;
  }

  #grow(n: number): void {
    if (this.#len + n <= this.#buf.length) return;
    let size = this.#buf.length * 2;
    while (size < this.#len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.#buf.subarray(0, this.#len));
    this.#buf = next;
    this.#view = new DataView(next.buffer);
  }

  u8(v: number): this {
    checkInt(v, 0xff, 'UINT8');
    this.#grow(1);
    this.#view.setUint8(this.#len, v);
    this.#len += 1;
    return this;
  }

  u16(v: number): this {
    checkInt(v, 0xffff, 'UINT16');
    this.#grow(2);
    this.#view.setUint16(this.#len, v);
    this.#len += 2;
    return this;
  }

  u32(v: number): this {
    checkInt(v, 0xffffffff, 'UINT32');
    this.#grow(4);
    this.#view.setUint32(this.#len, v);
    this.#len += 4;
    return this;
  }

  u64(v: bigint): this {
    if (v < 0n || v > 0xffffffffffffffffn) throw new TpmUsageError(`UINT64 out of range: ${v}`);
    this.#grow(8);
    this.#view.setBigUint64(this.#len, v);
    this.#len += 8;
    return this;
  }

  bytes(b: Uint8Array): this {
    this.#grow(b.length);
    this.#buf.set(b, this.#len);
    this.#len += b.length;
    return this;
  }

  /** A TPM2B of `b`, refusing more than `max` bytes. */
  tpm2b(b: Uint8Array, max: number, what: string): this {
    if (b.length > max) throw new TpmUsageError(`${what} is ${b.length} bytes, at most ${max} allowed`);
    return this.u16(b.length).bytes(b);
  }

  /** A TPM2B wrapping a structure written by `inner`. */
  sized(inner: (w: TpmWriter) => void): this {
    const w = new TpmWriter();
    inner(w);
    return this.u16(checkSize(w.length)).bytes(w.finish());
  }

  /** Overwrites a UINT32 written earlier (command and response sizes). */
  patchU32(at: number, v: number): this {
    checkInt(v, 0xffffffff, 'UINT32');
    this.#view.setUint32(at, v);
    return this;
  }

  finish(): Uint8Array {
    return this.#buf.slice(0, this.#len);
  }
}

function checkInt(v: number, max: number, what: string): void {
  if (!Number.isInteger(v) || v < 0 || v > max) throw new TpmUsageError(`${what} out of range: ${v}`);
}

function checkSize(n: number): number {
  if (n > 0xffff) throw new TpmUsageError(`sized structure of ${n} bytes does not fit a TPM2B`);
  return n;
}
