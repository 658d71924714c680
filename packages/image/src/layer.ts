/**
 * The streaming layer pipeline: compressed bytes (already checked against
 * the layer digest by the source) → gunzip (multi-member) / zstd / nothing →
 * sha256 of the uncompressed bytes → tar entries → the rootfs unpacker. At
 * most a few stream buffers are held at any time, whatever the layer size.
 * The uncompressed digest must equal the config's diff_id, or the layer (and
 * with it the image) is refused.
 */
import { PassThrough, type Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createZstdDecompress } from 'node:zlib';
import tar from 'tar-stream';
import { Digester, digestAlgorithm } from './digest.js';
import type { LayerCompression } from './manifest.js';
import { TarEndGuard } from './tar-end.js';
import { type RootfsUnpacker, type TarEntryHeader, UnpackError } from './unpack.js';

/** Where a layer failed; `pull` turns it into upstream's wording. */
export type LayerFailureStage = 'fetch' | 'decode' | 'unpack' | 'diffid';

export class LayerError extends Error {
  override readonly name = 'LayerError';
  readonly stage: LayerFailureStage;
  constructor(stage: LayerFailureStage, message: string, options?: ErrorOptions) {
    super(message, options);
    this.stage = stage;
  }
}

class Hasher extends Transform {
  readonly digester: Digester;
  readonly #onBytes: ((n: number) => void) | undefined;
  constructor(algorithm: ReturnType<typeof digestAlgorithm>, onBytes?: (n: number) => void) {
    super();
    this.digester = new Digester(algorithm);
    this.#onBytes = onBytes;
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.digester.update(chunk);
    this.#onBytes?.(chunk.byteLength);
    cb(null, chunk);
  }
}

function decompressor(compression: LayerCompression): Transform {
  switch (compression) {
    case 'gzip':
      return createGunzip();
    case 'zstd':
      return createZstdDecompress();
    case 'none':
      return new PassThrough();
  }
}

export interface ApplyLayerOptions {
  /** Called with each count of uncompressed bytes (progress). */
  readonly onUncompressedBytes?: (n: number) => void;
}

/**
 * Streams one layer into `unpacker`. Returns the uncompressed digest. Throws
 * `LayerError` naming the failing stage; the first failure wins (a broken
 * download also breaks decompression, and the download is the cause).
 */
export async function applyLayerStream(
  unpacker: RootfsUnpacker,
  source: Readable,
  compression: LayerCompression,
  diffId: string,
  options: ApplyLayerOptions = {},
): Promise<string> {
  const hasher = new Hasher(digestAlgorithm(diffId), options.onUncompressedBytes);
  const decode = decompressor(compression);
  // Version 7 archives (no ustar magic) are valid tar; Go's reader takes them too.
  const extract = tar.extract({ allowUnknownFormat: true } as Parameters<typeof tar.extract>[0]);
  let first: LayerError | undefined;
  // Once the unpacker has failed, the errors of tearing the pipeline down are consequences, not causes.
  let stopping = false;
  const note = (stage: LayerFailureStage) => (e: Error) => {
    if (!stopping) first ??= new LayerError(stage, e.message, { cause: e });
  };
  source.on('error', note('fetch'));
  decode.on('error', note('decode'));
  extract.on('error', note('decode'));
  const feed = pipeline(source, decode, hasher, new TarEndGuard(), extract).catch((e: unknown) => {
    if (!stopping) first ??= new LayerError('decode', (e as Error).message, { cause: e });
  });
  try {
    await unpacker.applyLayer(extract as unknown as AsyncIterable<Readable & { header: TarEntryHeader }>);
  } catch (e) {
    stopping = true;
    source.destroy();
    extract.destroy();
    await feed;
    if (first !== undefined) throw first;
    if (e instanceof UnpackError) throw new LayerError('unpack', e.message, { cause: e });
    throw new LayerError('decode', (e as Error).message, { cause: e });
  }
  await feed;
  if (first !== undefined) throw first;
  const actual = hasher.digester.digest();
  if (actual !== diffId) {
    throw new LayerError('diffid', `unequal uncompressed digest ${actual} config diff_id ${diffId}`);
  }
  return actual;
}
