/**
 * Which layers of a manifest are encrypted, and with what. ocicrypt marks an
 * encrypted layer twice: its media type gains `+encrypted`, and it carries
 * `org.opencontainers.image.enc.*` annotations (the wrapped keys per
 * protocol, the public options). A manifest where the two disagree is
 * refused: a layer that claims to be plain but carries wrapped keys, or
 * claims encryption without any key, is not something ocicrypt writes.
 */
import { ImageError, type ImageErrorCode } from '../errors.js';
import { decodeStdBase64 } from '../json.js';
import { type Descriptor, type LayerCompression, layerCompression, MEDIA_TYPE } from '../manifest.js';
import { type PublicOptions, parsePublicOptions } from './options.js';

export const ENCRYPTED_SUFFIX = '+encrypted';
export const ANNOTATION_PREFIX = 'org.opencontainers.image.enc.';
/** `org.opencontainers.image.enc.keys.<protocol>`: comma-joined standard-base64 wrapped keys. */
export const KEYS_ANNOTATION_PREFIX = `${ANNOTATION_PREFIX}keys.`;
export const PUBOPTS_ANNOTATION = `${ANNOTATION_PREFIX}pubopts`;
/** Wrapped keys per protocol, all protocols together; far beyond a few recipients. */
export const MAX_WRAPPED_KEYS = 64;
export const MAX_WRAPPED_KEY_BYTES = 64 * 1024;

/** Plain media types ocicrypt encrypts (image-rs handles the tar and tar+gzip ones; Go also zstd). */
const ENCRYPTABLE = new Set<string>([
  MEDIA_TYPE.ociLayer,
  MEDIA_TYPE.ociLayerGzip,
  MEDIA_TYPE.ociLayerZstd,
  MEDIA_TYPE.ociNondistributableLayer,
  MEDIA_TYPE.ociNondistributableLayerGzip,
  MEDIA_TYPE.ociNondistributableLayerZstd,
]);

export class EncryptedLayerError extends ImageError {
  override readonly code: ImageErrorCode = 'ENCRYPTED_LAYER_INVALID';
  override readonly name: string = 'EncryptedLayerError';
}

export interface WrappedKey {
  /** The protocol: `jwe`, `pgp`, `pkcs7`, `provider.<name>`, … (the annotation's suffix). */
  readonly protocol: string;
  readonly blob: Uint8Array;
}

export type LayerEncryption =
  | { readonly encrypted: false; readonly compression: LayerCompression }
  | {
      readonly encrypted: true;
      readonly compression: LayerCompression;
      readonly publicOptions: PublicOptions;
      /** In annotation order; each is one key wrapped for one recipient. */
      readonly wrappedKeys: readonly WrappedKey[];
    };

/**
 * Classifies one layer descriptor. Throws `EncryptedLayerError` for a
 * descriptor that lies about encryption or whose annotations do not decode,
 * and `InvalidManifestError` for an unknown media type.
 */
export function layerEncryption(layer: Descriptor): LayerEncryption {
  const annotations = Object.entries(layer.annotations ?? {}).filter(([k]) =>
    k.startsWith(ANNOTATION_PREFIX),
  );
  if (!layer.mediaType.endsWith(ENCRYPTED_SUFFIX)) {
    if (annotations.length > 0) {
      throw new EncryptedLayerError(
        `layer ${layer.digest} carries encryption annotations (${annotations.map(([k]) => k).join(', ')}) but its media type ${layer.mediaType} is not encrypted`,
      );
    }
    return { encrypted: false, compression: layerCompression(layer.mediaType) };
  }
  const base = layer.mediaType.slice(0, -ENCRYPTED_SUFFIX.length);
  if (!ENCRYPTABLE.has(base)) throw new EncryptedLayerError(`unhandled media type: ${layer.mediaType}`);
  const wrappedKeys: WrappedKey[] = [];
  for (const [key, value] of annotations) {
    if (!key.startsWith(KEYS_ANNOTATION_PREFIX)) continue;
    const protocol = key.slice(KEYS_ANNOTATION_PREFIX.length);
    for (const item of value.split(',')) {
      if (item === '') continue;
      if (wrappedKeys.length >= MAX_WRAPPED_KEYS) {
        throw new EncryptedLayerError(`layer ${layer.digest} has more than ${MAX_WRAPPED_KEYS} wrapped keys`);
      }
      let blob: Uint8Array;
      try {
        blob = decodeStdBase64(item);
      } catch (e) {
        throw new EncryptedLayerError(`layer ${layer.digest}: ${key} is not base64: ${(e as Error).message}`);
      }
      if (blob.byteLength > MAX_WRAPPED_KEY_BYTES) {
        throw new EncryptedLayerError(
          `layer ${layer.digest}: a ${key} key exceeds ${MAX_WRAPPED_KEY_BYTES} bytes`,
        );
      }
      wrappedKeys.push({ protocol, blob });
    }
  }
  if (wrappedKeys.length === 0) {
    throw new EncryptedLayerError(
      `layer ${layer.digest} has the encrypted media type ${layer.mediaType} but no ${KEYS_ANNOTATION_PREFIX}* annotation`,
    );
  }
  const pubopts = layer.annotations?.[PUBOPTS_ANNOTATION];
  if (pubopts === undefined) {
    throw new EncryptedLayerError(`layer ${layer.digest} has no ${PUBOPTS_ANNOTATION} annotation (the HMAC)`);
  }
  let publicOptions: PublicOptions;
  try {
    publicOptions = parsePublicOptions(pubopts);
  } catch (e) {
    throw new EncryptedLayerError(`layer ${layer.digest}: ${(e as Error).message}`);
  }
  return { encrypted: true, compression: layerCompression(base), publicOptions, wrappedKeys };
}
