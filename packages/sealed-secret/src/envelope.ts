/**
 * Envelope secrets: the secret is encrypted under a random 32-byte data key
 * (DEK) with AES-256-GCM (12-byte IV, 16-byte tag appended, as the aes-gcm
 * crate does) or AES-256-CTR (16-byte IV, big-endian 128-bit counter), and
 * the DEK is wrapped by a key provider.
 *
 * Key providers. Upstream decrypts DEKs with cloud KMSes only (aliyun, aws,
 * ehsm); its `kbs` provider is a vault getter and cannot unwrap. We add a
 * `kbs` key provider, our own extension, so that an envelope needs nothing
 * beyond the KBS:
 *
 * - `key_id` is the `kbs:///repo/type/tag` URI of a key-encryption key (KEK):
 *   a resource of exactly 32 bytes, released after attestation;
 * - `encrypted_key` is the DEK wrapped with AES Key Wrap (RFC 3394,
 *   `A256KW`) under that KEK, standard base64 (40 bytes);
 * - `provider_settings` and `annotations` are empty.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { messageOf } from '@broker/cli';
import { decodeBase64StdStrict } from '@broker/protocol';
import { SealedSecretError, SealFailed } from './errors.js';
import type { JsonMap } from './json.js';
import { type EnvelopeSecret, SEALED_SECRET_VERSION, type WrapType } from './payload.js';

export const DEK_BYTES = 32;
export const KEK_BYTES = 32;
const GCM_IV_BYTES = 12;
const CTR_IV_BYTES = 16;
const GCM_TAG_BYTES = 16;
/** RFC 3394's default initial value. */
const KW_IV = Buffer.from('a6a6a6a6a6a6a6a6', 'hex');

/** A decryption step failed (crypto's anyhow errors, upstream "decrypt envelope"). */
export class EnvelopeCryptoError extends SealedSecretError {
  override readonly name: string = 'EnvelopeCryptoError';
  override readonly code = 'ENVELOPE_CRYPTO_FAILED';
}

function ivLength(wrapType: WrapType): number {
  return wrapType === 'A256GCM' ? GCM_IV_BYTES : CTR_IV_BYTES;
}

/** Encrypts `plaintext` under `dek`; for A256GCM the result is ciphertext ‖ tag. */
export function encryptData(
  dek: Uint8Array,
  plaintext: Uint8Array,
  iv: Uint8Array,
  wrapType: WrapType,
): Buffer {
  if (dek.length !== DEK_BYTES) throw new EnvelopeCryptoError('Failed to convert array to key');
  if (iv.length !== ivLength(wrapType)) throw new EnvelopeCryptoError('Failed to convert array to nonce');
  if (wrapType === 'A256GCM') {
    const c = createCipheriv('aes-256-gcm', dek, iv);
    return Buffer.concat([c.update(plaintext), c.final(), c.getAuthTag()]);
  }
  const c = createCipheriv('aes-256-ctr', dek, iv);
  return Buffer.concat([c.update(plaintext), c.final()]);
}

/** Decrypts `data` under `dek`; messages are the crypto crate's. */
export function decryptData(dek: Uint8Array, data: Uint8Array, iv: Uint8Array, wrapType: WrapType): Buffer {
  if (dek.length !== DEK_BYTES) throw new EnvelopeCryptoError('Failed to convert array to key');
  if (iv.length !== ivLength(wrapType)) throw new EnvelopeCryptoError('Failed to convert array to nonce');
  if (wrapType === 'A256GCM') {
    if (data.length < GCM_TAG_BYTES) throw new EnvelopeCryptoError('aes-256-gcm decrypt failed: Error');
    const d = createDecipheriv('aes-256-gcm', dek, iv);
    d.setAuthTag(data.subarray(data.length - GCM_TAG_BYTES));
    try {
      return Buffer.concat([d.update(data.subarray(0, data.length - GCM_TAG_BYTES)), d.final()]);
    } catch {
      throw new EnvelopeCryptoError('aes-256-gcm decrypt failed: Error');
    }
  }
  const d = createDecipheriv('aes-256-ctr', dek, iv);
  return Buffer.concat([d.update(data), d.final()]);
}

/** Wraps a DEK under a 32-byte KEK with AES Key Wrap (RFC 3394). */
export function wrapKey(kek: Uint8Array, dek: Uint8Array): Buffer {
  if (kek.length !== KEK_BYTES)
    throw new EnvelopeCryptoError(`the key-encryption key must be ${KEK_BYTES} bytes`);
  if (dek.length !== DEK_BYTES) throw new EnvelopeCryptoError(`the data key must be ${DEK_BYTES} bytes`);
  const c = createCipheriv('id-aes256-wrap', kek, KW_IV);
  return Buffer.concat([c.update(dek), c.final()]);
}

/** Unwraps a DEK; fails when the KEK is not the one that wrapped it (RFC 3394 integrity check). */
export function unwrapKey(kek: Uint8Array, wrapped: Uint8Array): Buffer {
  if (kek.length !== KEK_BYTES) {
    throw new EnvelopeCryptoError(`the key-encryption key is ${kek.length} bytes, expected ${KEK_BYTES}`);
  }
  if (wrapped.length !== DEK_BYTES + 8) {
    throw new EnvelopeCryptoError(`the wrapped key is ${wrapped.length} bytes, expected ${DEK_BYTES + 8}`);
  }
  try {
    const d = createDecipheriv('id-aes256-wrap', kek, KW_IV);
    return Buffer.concat([d.update(wrapped), d.final()]);
  } catch (cause) {
    throw new EnvelopeCryptoError(`key unwrap failed (wrong key-encryption key?): ${messageOf(cause)}`);
  }
}

export interface KbsEnvelopeOptions {
  /** `kbs:///repo/type/tag` of the KEK resource. */
  readonly keyId: string;
  /** The KEK: the same 32 bytes as the KBS resource `keyId`. */
  readonly kek: Uint8Array;
  /** Default A256GCM, as upstream's `secret seal … envelope`. */
  readonly wrapType?: WrapType;
  readonly annotations?: JsonMap;
}

/** An envelope payload for the `kbs` key provider; a fresh DEK and IV per call. */
export function kbsEnvelopePayload(plaintext: Uint8Array, options: KbsEnvelopeOptions): EnvelopeSecret {
  if (options.kek.length !== KEK_BYTES) {
    throw new SealFailed(`the key-encryption key must be ${KEK_BYTES} bytes, got ${options.kek.length}`);
  }
  const wrapType = options.wrapType ?? 'A256GCM';
  const dek = randomBytes(DEK_BYTES);
  const iv = randomBytes(ivLength(wrapType));
  try {
    return {
      version: SEALED_SECRET_VERSION,
      type: 'envelope',
      key_id: options.keyId,
      encrypted_key: wrapKey(options.kek, dek).toString('base64'),
      encrypted_data: encryptData(dek, plaintext, iv, wrapType).toString('base64'),
      wrap_type: wrapType,
      iv: iv.toString('base64'),
      provider: 'kbs',
      provider_settings: {},
      annotations: options.annotations ?? {},
    };
  } finally {
    dek.fill(0);
  }
}

/** Standard base64 as the base64 crate's STANDARD engine reads it (padding required, canonical). */
export function decodeStd(value: string): Buffer | null {
  return decodeBase64StdStrict(value);
}
