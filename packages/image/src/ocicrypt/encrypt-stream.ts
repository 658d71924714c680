/**
 * Encrypting a layer of any size with bounded memory: the plain blob streams
 * through AES-256-CTR into a file, and the ciphertext's SHA-256 (the new
 * descriptor's digest), its HMAC-SHA256 (the public options) and its size are
 * computed on the way. Only once the whole layer has passed are the private
 * options wrapped, since the HMAC has to be in the annotations; the file is
 * then what gets uploaded.
 */
import { createCipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { encryptionAnnotations, type KeyWrapper, privateOptionsBytes } from './encrypt.js';

export interface EncryptedBlobFile {
  /** `sha256:…` of the ciphertext in the file. */
  readonly digest: string;
  readonly size: number;
  readonly annotations: Readonly<Record<string, string>>;
}

/**
 * Encrypts `plain` (whose digest, as the descriptor names it, is `plainDigest`)
 * into `file`, which must not exist (created 0600). A fresh key and nonce per
 * call; the private options are wrapped for each of `wrappers`.
 */
export async function encryptLayerStream(
  plain: NodeJS.ReadableStream,
  plainDigest: string,
  wrappers: readonly KeyWrapper[],
  file: string,
): Promise<EncryptedBlobFile> {
  const symkey = randomBytes(32);
  const nonce = randomBytes(16);
  const sha = createHash('sha256');
  const mac = createHmac('sha256', symkey);
  let size = 0;
  const measure = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      sha.update(chunk);
      mac.update(chunk);
      size += chunk.byteLength;
      done(null, chunk);
    },
  });
  await pipeline(
    plain,
    createCipheriv('aes-256-ctr', symkey, nonce),
    measure,
    createWriteStream(file, { flags: 'wx', mode: 0o600 }),
  );
  const annotations = await encryptionAnnotations(
    privateOptionsBytes(symkey, nonce, plainDigest),
    mac.digest(),
    wrappers,
  );
  return { digest: `sha256:${sha.digest('hex')}`, size, annotations };
}
