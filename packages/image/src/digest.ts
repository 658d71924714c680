/**
 * Content digests (`sha256:<hex>`), validated as go-digest does: the
 * algorithm must be one we can compute, and the hex part must be lower case
 * and of the algorithm's length.
 */

import { createHash, type Hash } from 'node:crypto';
import { ImageError, type ImageErrorCode } from './errors.js';

export type DigestAlgorithm = 'sha256' | 'sha384' | 'sha512';

const HEX_LENGTH: Readonly<Record<DigestAlgorithm, number>> = { sha256: 64, sha384: 96, sha512: 128 };

/** A digest that failed validation; messages are go-digest's. */
export class InvalidDigestError extends ImageError {
  override readonly code: ImageErrorCode = 'DIGEST_INVALID';
  override readonly name: string = 'InvalidDigestError';
}

/** go-digest `DigestRegexpAnchored`: any algorithm name, any encoded form. */
const ANY_DIGEST = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;

function isAlgorithm(a: string): a is DigestAlgorithm {
  return Object.hasOwn(HEX_LENGTH, a);
}

/** Validates `s` as go-digest's `Parse` does and returns it unchanged. */
export function parseDigest(s: string): string {
  const i = s.indexOf(':');
  if (i <= 0 || i + 1 === s.length) throw new InvalidDigestError('invalid checksum digest format');
  const algorithm = s.slice(0, i);
  const encoded = s.slice(i + 1);
  if (!isAlgorithm(algorithm)) {
    if (!ANY_DIGEST.test(s)) throw new InvalidDigestError('invalid checksum digest format');
    throw new InvalidDigestError('unsupported digest algorithm');
  }
  if (encoded.length !== HEX_LENGTH[algorithm])
    throw new InvalidDigestError('invalid checksum digest length');
  if (!/^[a-f0-9]+$/.test(encoded)) throw new InvalidDigestError('invalid checksum digest format');
  return s;
}

/** The algorithm of a validated digest. */
export function digestAlgorithm(digest: string): DigestAlgorithm {
  const a = digest.slice(0, digest.indexOf(':'));
  if (!isAlgorithm(a)) throw new InvalidDigestError('unsupported digest algorithm');
  return a;
}

/** The hex part of a validated digest. */
export function digestHex(digest: string): string {
  return digest.slice(digest.indexOf(':') + 1);
}

/** `<algorithm>:<hex>` of `bytes`. */
export function digestOf(bytes: Uint8Array, algorithm: DigestAlgorithm = 'sha256'): string {
  return `${algorithm}:${createHash(algorithm).update(bytes).digest('hex')}`;
}

/** True when `bytes` hash to `digest` (computed with the digest's own algorithm). */
export function matchesDigest(bytes: Uint8Array, digest: string): boolean {
  return digestOf(bytes, digestAlgorithm(parseDigest(digest))) === digest;
}

/** An incremental digester for streams. */
export class Digester {
  readonly algorithm: DigestAlgorithm;
  readonly #hash: Hash;
  #bytes = 0;
  constructor(algorithm: DigestAlgorithm = 'sha256') {
    this.algorithm = algorithm;
    this.#hash = createHash(algorithm);
  }
  update(chunk: Uint8Array): void {
    this.#bytes += chunk.byteLength;
    this.#hash.update(chunk);
  }
  get bytes(): number {
    return this.#bytes;
  }
  digest(): string {
    return `${this.algorithm}:${this.#hash.digest('hex')}`;
  }
}
