/**
 * The `runtime_data` query parameter of `/aa/evidence` and
 * `/aa/additional-evidence`. Without `encoding` the parameter's UTF-8 bytes
 * are used as they are; `encoding=base64` means URL-safe base64 without
 * padding, decoded as strictly as Rust's `URL_SAFE_NO_PAD` engine (no `=`,
 * no `+`/`/`, no whitespace, no stray trailing bits), so a value upstream
 * rejects is rejected here too.
 */

import { ApiServerError, type ApiServerErrorCode } from './errors.js';

/** `runtime_data` could not be turned into bytes; the route answers 400. */
export class RuntimeDataError extends ApiServerError {
  override readonly code: ApiServerErrorCode = 'RUNTIME_DATA_INVALID';
  override readonly name: string = 'RuntimeDataError';
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const SEXTET = new Int8Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) SEXTET[ALPHABET.charCodeAt(i)] = i;

function sextet(text: string, i: number): number {
  const c = text.charCodeAt(i);
  const v = c < 128 ? (SEXTET[c] as number) : -1;
  if (v < 0)
    throw new RuntimeDataError(`invalid base64 URL-safe runtime_data: invalid symbol at offset ${i}`);
  return v;
}

/** Decodes unpadded URL-safe base64, rejecting anything a canonical encoder would not produce. */
export function decodeBase64UrlNoPad(text: string): Uint8Array {
  const rem = text.length % 4;
  if (rem === 1) throw new RuntimeDataError('invalid base64 URL-safe runtime_data: invalid length');
  const out = new Uint8Array(Math.floor((text.length * 3) / 4));
  let o = 0;
  const full = text.length - rem;
  for (let i = 0; i < full; i += 4) {
    const n =
      (sextet(text, i) << 18) |
      (sextet(text, i + 1) << 12) |
      (sextet(text, i + 2) << 6) |
      sextet(text, i + 3);
    out[o++] = n >>> 16;
    out[o++] = (n >>> 8) & 0xff;
    out[o++] = n & 0xff;
  }
  if (rem === 2) {
    const a = sextet(text, full);
    const b = sextet(text, full + 1);
    if ((b & 0x0f) !== 0)
      throw new RuntimeDataError('invalid base64 URL-safe runtime_data: invalid last symbol');
    out[o++] = (a << 2) | (b >>> 4);
  } else if (rem === 3) {
    const a = sextet(text, full);
    const b = sextet(text, full + 1);
    const c = sextet(text, full + 2);
    if ((c & 0x03) !== 0)
      throw new RuntimeDataError('invalid base64 URL-safe runtime_data: invalid last symbol');
    out[o++] = (a << 2) | (b >>> 4);
    out[o++] = ((b & 0x0f) << 4) | (c >>> 2);
  }
  return out;
}

/** The report-data bytes for a `runtime_data` value and an optional `encoding` parameter. */
export function decodeRuntimeData(runtimeData: string, encoding: string | undefined): Uint8Array {
  if (encoding === undefined) return new TextEncoder().encode(runtimeData);
  if (encoding === 'base64') return decodeBase64UrlNoPad(runtimeData);
  throw new RuntimeDataError(`unsupported runtime_data encoding: ${encoding.slice(0, 64)}`);
}
