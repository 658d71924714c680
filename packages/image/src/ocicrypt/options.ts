/**
 * ocicrypt's layer options: the public options (`org.opencontainers.image.enc.pubopts`:
 * cipher name and the HMAC of the ciphertext) and the private options every key
 * wrapper protects (`symkey`, `cipheroptions.nonce`, and the plain blob's
 * `digest`, which containers/image and image-rs ignore: the diff_id check
 * guards the plaintext). Both come from untrusted bytes, so every field is
 * checked for type and length here, before a key or nonce is used.
 */
import { ImageError, type ImageErrorCode } from '../errors.js';
import { decodeStdBase64 } from '../json.js';

/** The only layer block cipher ocicrypt defines. */
export const LAYER_CIPHER = 'AES_256_CTR_HMAC_SHA256';
/** The JSON documents are a few hundred bytes; anything far larger is not ocicrypt's. */
export const MAX_OPTIONS_BYTES = 64 * 1024;

export class LayerOptionsError extends ImageError {
  override readonly code: ImageErrorCode = 'LAYER_OPTIONS_INVALID';
  override readonly name: string = 'LayerOptionsError';
}

export interface PublicOptions {
  readonly cipher: typeof LAYER_CIPHER;
  /** HMAC-SHA256 of the ciphertext, keyed with the symmetric key. */
  readonly hmac: Uint8Array;
}

export interface PrivateOptions {
  /** AES-256 key (32 bytes). */
  readonly symkey: Uint8Array;
  /** The initial 128-bit CTR counter block (16 bytes). */
  readonly nonce: Uint8Array;
  /** Digest of the blob before encryption, as written by the encrypter (informational). */
  readonly digest: string;
}

function objectOf(bytes: Uint8Array, what: string): Record<string, unknown> {
  if (bytes.byteLength > MAX_OPTIONS_BYTES)
    throw new LayerOptionsError(`${what} exceed ${MAX_OPTIONS_BYTES} bytes`);
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (e) {
    // V8's message quotes the input: for private options that is decrypted (possibly key-derived)
    // data, which must not reach an error a pod can see.
    throw new LayerOptionsError(
      `${what} are not JSON${what === 'public options' ? `: ${(e as Error).message}` : ''}`,
    );
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new LayerOptionsError(`${what} are not a JSON object`);
  return v as Record<string, unknown>;
}

function base64Field(o: Record<string, unknown>, key: string, what: string, length: number): Uint8Array {
  const v = o[key];
  if (typeof v !== 'string') throw new LayerOptionsError(`${what}: "${key}" is missing or not a string`);
  let bytes: Uint8Array;
  try {
    bytes = decodeStdBase64(v);
  } catch (e) {
    throw new LayerOptionsError(`${what}: "${key}" is not base64: ${(e as Error).message}`);
  }
  if (bytes.byteLength !== length) {
    throw new LayerOptionsError(`${what}: "${key}" has ${bytes.byteLength} bytes, expected ${length}`);
  }
  return bytes;
}

/** Decodes the `pubopts` annotation (standard base64 of the JSON). */
export function parsePublicOptions(annotation: string): PublicOptions {
  let bytes: Uint8Array;
  try {
    bytes = decodeStdBase64(annotation);
  } catch (e) {
    throw new LayerOptionsError(`public options are not base64: ${(e as Error).message}`);
  }
  const o = objectOf(bytes, 'public options');
  if (o.cipher !== LAYER_CIPHER) {
    throw new LayerOptionsError(
      `unsupported layer cipher ${JSON.stringify(o.cipher)} (only ${LAYER_CIPHER})`,
    );
  }
  return { cipher: LAYER_CIPHER, hmac: base64Field(o, 'hmac', 'public options', 32) };
}

/** Decodes the private options a key wrapper released. */
export function parsePrivateOptions(bytes: Uint8Array): PrivateOptions {
  const o = objectOf(bytes, 'private options');
  const symkey = base64Field(o, 'symkey', 'private options', 32);
  const cipherOptions = o.cipheroptions;
  if (typeof cipherOptions !== 'object' || cipherOptions === null || Array.isArray(cipherOptions)) {
    throw new LayerOptionsError('private options: "cipheroptions" is missing or not an object');
  }
  const nonce = base64Field(cipherOptions as Record<string, unknown>, 'nonce', 'private options', 16);
  const digest = typeof o.digest === 'string' ? o.digest : '';
  return { symkey, nonce, digest };
}
