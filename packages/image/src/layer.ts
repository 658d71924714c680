/**
 * The streaming layer pipeline: compressed bytes (already checked against
 * the layer digest by the source) → gunzip (multi-member) / zstd / nothing →
 * sha256 of the uncompressed bytes → tar entries → the rootfs unpacker. At
 * most a few stream buffers are held at any time, whatever the layer size.
 * The uncompressed digest must equal the config's diff_id, or the layer (and
 * with it the image) is refused. With a `LayerBudget`, the expanded bytes
 * are counted before they reach the tar reader and the entries before they
 * reach the unpacker, so nothing past a cap is written.
 */

import { PassThrough, type Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createZstdDecompress } from 'node:zlib';
import tar from 'tar-stream';
import { Digester, digestAlgorithm } from './digest.js';
import { ImageError, type ImageErrorCode } from './errors.js';
import { ExpansionLimitError, type LayerBudget } from './limits.js';
import type { LayerCompression } from './manifest.js';
import { TarEndGuard } from './tar-end.js';
import { type RootfsUnpacker, type TarEntryHeader, UnpackError } from './unpack.js';

/** Where a layer failed; `pull` turns it into upstream's wording. */
export type LayerFailureStage = 'fetch' | 'decrypt' | 'decode' | 'unpack' | 'diffid' | 'limit';

export class LayerError extends ImageError {
  override readonly code: ImageErrorCode = 'LAYER_INVALID';
  override readonly name: string = 'LayerError';
  readonly stage: LayerFailureStage;
  constructor(stage: LayerFailureStage, message: string, options?: ErrorOptions) {
    super(message, options);
    this.stage = stage;
  }
}

class Hasher extends Transform {
  readonly digester: Digester;
  readonly #onBytes: ((n: number) => void) | undefined;
  readonly #budget: LayerBudget | undefined;
  constructor(
    algorithm: ReturnType<typeof digestAlgorithm>,
    onBytes?: (n: number) => void,
    budget?: LayerBudget,
  ) {
    super();
    this.digester = new Digester(algorithm);
    this.#onBytes = onBytes;
    this.#budget = budget;
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    try {
      this.#budget?.addBytes(chunk.byteLength);
    } catch (e) {
      cb(e as Error);
      return;
    }
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
  /** Caps on expanded bytes and entries (from `ExpansionBudget.layer()`); none when absent. */
  readonly budget?: LayerBudget;
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
  const hasher = new Hasher(digestAlgorithm(diffId), options.onUncompressedBytes, options.budget);
  const decode = decompressor(compression);
  // Version 7 archives (no ustar magic) are valid tar; Go's reader takes them too.
  const extract = tar.extract({ allowUnknownFormat: true } as Parameters<typeof tar.extract>[0]);
  let first: LayerError | undefined;
  // Once the unpacker has failed, the errors of tearing the pipeline down are consequences, not causes.
  let stopping = false;
  const note = (stage: LayerFailureStage) => (e: Error) => {
    if (!stopping)
      first ??= new LayerError(e instanceof ExpansionLimitError ? 'limit' : stage, e.message, { cause: e });
  };
  source.on('error', note('fetch'));
  decode.on('error', note('decode'));
  hasher.on('error', note('decode'));
  extract.on('error', note('decode'));
  const feed = pipeline(source, decode, hasher, new TarEndGuard(), extract).catch((e: unknown) => {
    note('decode')(e as Error);
  });
  const entries = extract as unknown as AsyncIterable<Readable & { header: TarEntryHeader }>;
  const budget = options.budget;
  // Each entry is counted before the unpacker sees it. Leaving the loop tears the archive down;
  // the cap, not that teardown, is the cause.
  async function* counted(): AsyncGenerator<Readable & { header: TarEntryHeader }> {
    for await (const entry of entries) {
      try {
        budget?.addEntry();
      } catch (e) {
        first ??= new LayerError('limit', (e as Error).message, { cause: e });
        stopping = true;
        throw e;
      }
      yield entry;
    }
  }
  try {
    await unpacker.applyLayer(budget !== undefined ? counted() : entries);
  } catch (e) {
    stopping = true;
    source.destroy();
    extract.destroy();
    await feed;
    if (first !== undefined) throw first;
    if (e instanceof ExpansionLimitError) throw new LayerError('limit', e.message, { cause: e });
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
