/**
 * Releasing a layer's private options: each configured key protocol (a
 * `KeyUnwrapper`) is offered the wrapped keys of its protocol, in annotation
 * order, until one yields options that parse. A layer none of them can open
 * fails with image-rs' text and the reasons each one gave.
 */
import { ImageError, type ImageErrorCode } from '../errors.js';
import type { WrappedKey } from './layer-info.js';
import { type PrivateOptions, parsePrivateOptions } from './options.js';

/** The result of one attempt: the private options' bytes, or why this recipient was not ours. */
export type UnwrapResult = Uint8Array | { readonly failed: string };

export interface KeyUnwrapper {
  /** The protocol this unwrapper answers for: `jwe`, `provider.attestation-agent`, … */
  readonly protocol: string;
  unwrap(blob: Uint8Array): Promise<UnwrapResult>;
}

/** image-rs' words for a layer whose key could not be released. */
export const UNWRAP_FAILED =
  'Failed to decrypt the image layer, please ensure that the decryption key is placed and correct';

export class LayerKeyError extends ImageError {
  override readonly code: ImageErrorCode = 'LAYER_KEY_UNAVAILABLE';
  override readonly name: string = 'LayerKeyError';
  /** What each protocol said (never key material). */
  readonly reasons: readonly string[];
  constructor(reasons: readonly string[]) {
    super(`${UNWRAP_FAILED} (${reasons.join('; ')})`);
    this.reasons = reasons;
  }
}

/** Finds the private options of one layer. Throws `LayerKeyError`. */
export async function unwrapLayerKey(
  wrappedKeys: readonly WrappedKey[],
  unwrappers: readonly KeyUnwrapper[],
): Promise<PrivateOptions> {
  const reasons: string[] = [];
  const protocols = [...new Set(wrappedKeys.map((k) => k.protocol))];
  for (const unwrapper of unwrappers) {
    for (const wrapped of wrappedKeys) {
      if (wrapped.protocol !== unwrapper.protocol) continue;
      let result: UnwrapResult;
      try {
        result = await unwrapper.unwrap(wrapped.blob);
      } catch (e) {
        reasons.push(`${unwrapper.protocol}: ${(e as Error).message}`);
        continue;
      }
      if (!(result instanceof Uint8Array)) {
        reasons.push(`${unwrapper.protocol}: ${result.failed}`);
        continue;
      }
      try {
        return parsePrivateOptions(result);
      } catch (e) {
        reasons.push(`${unwrapper.protocol}: ${(e as Error).message}`);
      }
    }
  }
  const configured = new Set(unwrappers.map((u) => u.protocol));
  if (!protocols.some((p) => configured.has(p))) {
    reasons.push(
      `no decryption key for the layer's key protocols (${protocols.join(', ')})${configured.size > 0 ? `; configured: ${[...configured].join(', ')}` : '; none configured'}`,
    );
  }
  throw new LayerKeyError(reasons);
}
