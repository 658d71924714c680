/**
 * Caps on what layers may expand to. A layer's compressed size says nothing
 * about its expanded size (gzip reaches about 1000:1), so the expanded tar
 * bytes and the tar entries are counted as they are unpacked, per layer and
 * for the whole image, and unpacking stops at the first cap passed.
 *
 * The defaults leave room for large real images (CUDA or ML images expand to
 * a few GiB and a few hundred thousand files) while keeping a hostile layer
 * from filling the guest's memory-backed disk.
 */

import { ImageError, type ImageErrorCode } from './errors.js';

export interface ExpansionLimits {
  /** Expanded (uncompressed tar) bytes of one layer, at most. */
  readonly maxLayerBytes: number;
  /** Tar entries of one layer, at most. */
  readonly maxLayerEntries: number;
  /** Expanded bytes of all layers of an image, at most. */
  readonly maxImageBytes: number;
  /** Tar entries of all layers of an image, at most. */
  readonly maxImageEntries: number;
}

export const DEFAULT_EXPANSION_LIMITS: ExpansionLimits = Object.freeze({
  maxLayerBytes: 8 * 1024 ** 3,
  maxLayerEntries: 1_000_000,
  maxImageBytes: 8 * 1024 ** 3,
  maxImageEntries: 1_000_000,
});

/** The spelling of each cap in option names (`--max-layer-bytes`, `[image] max_layer_bytes`). */
export const LIMIT_NAMES: Readonly<Record<keyof ExpansionLimits, string>> = Object.freeze({
  maxLayerBytes: 'max-layer-bytes',
  maxLayerEntries: 'max-layer-entries',
  maxImageBytes: 'max-image-bytes',
  maxImageEntries: 'max-image-entries',
});

/** A cap was passed; the message names it and its value. */
export class ExpansionLimitError extends ImageError {
  override readonly code: ImageErrorCode = 'EXPANSION_LIMIT';
  override readonly name: string = 'ExpansionLimitError';
  readonly limit: keyof ExpansionLimits;
  readonly value: number;
  constructor(limit: keyof ExpansionLimits, value: number) {
    const what = limit.endsWith('Bytes') ? 'expanded bytes' : 'tar entries';
    const per = limit.startsWith('maxLayer') ? 'per-layer' : 'per-image';
    super(`the ${what} pass the ${per} cap (${LIMIT_NAMES[limit]} = ${value})`);
    this.limit = limit;
    this.value = value;
  }
}

/** Checks that every limit is a positive safe integer; throws naming the first that is not. */
export function checkExpansionLimits(limits: Partial<ExpansionLimits>): ExpansionLimits {
  const out = { ...DEFAULT_EXPANSION_LIMITS, ...limits };
  for (const key of Object.keys(LIMIT_NAMES) as (keyof ExpansionLimits)[]) {
    const v = out[key];
    if (!Number.isSafeInteger(v) || v < 1) {
      throw new RangeError(`${LIMIT_NAMES[key]} must be a positive integer, got ${String(v)}`);
    }
  }
  return out;
}

/** What the layers of one image have used so far. */
export class ExpansionBudget {
  readonly limits: ExpansionLimits;
  #bytes = 0;
  #entries = 0;
  constructor(limits: Partial<ExpansionLimits> = {}) {
    this.limits = checkExpansionLimits(limits);
  }

  /** A fresh per-layer count drawing on this image's budget. */
  layer(): LayerBudget {
    return new LayerBudget(this);
  }

  /** @internal */
  addBytes(n: number): void {
    this.#bytes += n;
    if (this.#bytes > this.limits.maxImageBytes) {
      throw new ExpansionLimitError('maxImageBytes', this.limits.maxImageBytes);
    }
  }

  /** @internal */
  addEntry(): void {
    if (++this.#entries > this.limits.maxImageEntries) {
      throw new ExpansionLimitError('maxImageEntries', this.limits.maxImageEntries);
    }
  }
}

export class LayerBudget {
  readonly #image: ExpansionBudget;
  #bytes = 0;
  #entries = 0;
  constructor(image: ExpansionBudget) {
    this.#image = image;
  }

  /** Counts `n` expanded bytes; throws `ExpansionLimitError` past a cap. */
  addBytes(n: number): void {
    this.#bytes += n;
    const max = this.#image.limits.maxLayerBytes;
    if (this.#bytes > max) throw new ExpansionLimitError('maxLayerBytes', max);
    this.#image.addBytes(n);
  }

  /** Counts one tar entry; throws `ExpansionLimitError` past a cap. */
  addEntry(): void {
    const max = this.#image.limits.maxLayerEntries;
    if (++this.#entries > max) throw new ExpansionLimitError('maxLayerEntries', max);
    this.#image.addEntry();
  }
}
