/**
 * ocicrypt's layer block cipher, AES_256_CTR_HMAC_SHA256: AES-256 in CTR
 * mode with the 16-byte nonce as the full initial counter block (so the size
 * does not change), and HMAC-SHA256 keyed with the same symmetric key over
 * the ciphertext. Go's ocicrypt and ocicrypt-rs check the HMAC only at the
 * end of the stream, after releasing most plaintext; we check it over the
 * spooled ciphertext before the first byte is decrypted, so a tampered
 * layer never reaches the tar reader.
 */

import { createCipheriv, createDecipheriv, createHmac, timingSafeEqual } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { Transform } from 'node:stream';
import { ImageError, type ImageErrorCode } from '../errors.js';
import type { PrivateOptions, PublicOptions } from './options.js';

export class LayerHmacError extends ImageError {
  override readonly code: ImageErrorCode = 'LAYER_HMAC_MISMATCH';
  override readonly name: string = 'LayerHmacError';
}

/** Checks the ciphertext in `file` against the public options' HMAC; throws `LayerHmacError` on a mismatch. */
export async function verifyCiphertextHmac(
  file: string,
  privateOptions: PrivateOptions,
  publicOptions: PublicOptions,
): Promise<void> {
  const mac = createHmac('sha256', privateOptions.symkey);
  for await (const chunk of createReadStream(file)) mac.update(chunk as Buffer);
  const actual = mac.digest();
  if (actual.byteLength !== publicOptions.hmac.byteLength || !timingSafeEqual(actual, publicOptions.hmac)) {
    throw new LayerHmacError(
      'the HMAC of the encrypted layer does not match its pubopts (ciphertext altered or wrong key)',
    );
  }
}

/** A stream that turns ciphertext into plaintext (call only after `verifyCiphertextHmac`). */
export function layerDecipher(privateOptions: PrivateOptions): Transform {
  return createDecipheriv('aes-256-ctr', privateOptions.symkey, privateOptions.nonce);
}

/** Encrypts a whole blob; returns the ciphertext and its HMAC (tests and the encrypting tool). */
export function encryptLayerBytes(
  plain: Uint8Array,
  symkey: Uint8Array,
  nonce: Uint8Array,
): { ciphertext: Buffer; hmac: Buffer } {
  const cipher = createCipheriv('aes-256-ctr', symkey, nonce);
  const ciphertext = Buffer.concat([cipher.update(plain), cipher.final()]);
  return { ciphertext, hmac: createHmac('sha256', symkey).update(ciphertext).digest() };
}
