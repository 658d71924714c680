/**
 * Encrypting layers as ocicrypt does (AES_256_CTR_HMAC_SHA256, a fresh key
 * and nonce per layer, the private options wrapped once per recipient), for
 * tests and the encrypting tool. The manifest keeps the ciphertext's digest
 * and size; the config's diff_ids stay those of the plain layers.
 */
import { type KeyObject, randomBytes } from 'node:crypto';
import { FlattenedEncrypt } from 'jose';
import { type BuiltImage, type BuiltLayer, buildImage, type ImageSpec } from '../build.js';
import { digestOf } from '../digest.js';
import { encryptLayerBytes } from './block-cipher.js';
import { ENCRYPTED_SUFFIX, KEYS_ANNOTATION_PREFIX, PUBOPTS_ANNOTATION } from './layer-info.js';
import { LAYER_CIPHER } from './options.js';

export interface KeyWrapper {
  /** The annotation suffix: `jwe`, `provider.attestation-agent`, … */
  readonly protocol: string;
  wrap(privateOptions: Uint8Array): Promise<Uint8Array>;
}

export interface EncryptedLayer extends BuiltLayer {
  readonly annotations: Readonly<Record<string, string>>;
}

/** Wraps for one RSA (`RSA-OAEP`) or EC (`ECDH-ES+A256KW`) public key, `A256GCM`, as ocicrypt's `jwe`. */
export function jweWrapper(publicKey: KeyObject): KeyWrapper {
  const alg = publicKey.asymmetricKeyType === 'rsa' ? 'RSA-OAEP' : 'ECDH-ES+A256KW';
  return {
    protocol: 'jwe',
    async wrap(privateOptions) {
      const jwe = await new FlattenedEncrypt(privateOptions)
        .setProtectedHeader({ alg, enc: 'A256GCM' })
        .encrypt(publicKey);
      return Buffer.from(JSON.stringify(jwe));
    },
  };
}

/** ocicrypt's private options: what every recipient's wrapped key releases. */
export function privateOptionsBytes(symkey: Uint8Array, nonce: Uint8Array, plainDigest: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      symkey: Buffer.from(symkey).toString('base64'),
      digest: plainDigest,
      cipheroptions: { nonce: Buffer.from(nonce).toString('base64') },
    }),
  );
}

/**
 * The layer's `org.opencontainers.image.enc.*` annotations: the private
 * options wrapped once per recipient (comma-joined per protocol) and the
 * public options with the ciphertext's HMAC.
 */
export async function encryptionAnnotations(
  privateOptions: Uint8Array,
  hmac: Uint8Array,
  wrappers: readonly KeyWrapper[],
): Promise<Record<string, string>> {
  const wrapped = new Map<string, string[]>();
  for (const w of wrappers) {
    const list = wrapped.get(w.protocol) ?? [];
    list.push(Buffer.from(await w.wrap(privateOptions)).toString('base64'));
    wrapped.set(w.protocol, list);
  }
  const annotations: Record<string, string> = {};
  for (const [protocol, list] of wrapped)
    annotations[`${KEYS_ANNOTATION_PREFIX}${protocol}`] = list.join(',');
  annotations[PUBOPTS_ANNOTATION] = Buffer.from(
    JSON.stringify({ cipher: LAYER_CIPHER, hmac: Buffer.from(hmac).toString('base64'), cipheroptions: {} }),
  ).toString('base64');
  return annotations;
}

/** Encrypts one built layer, held in memory, for every wrapper's recipient (tests; see `encryptLayerStream`). */
export async function encryptLayer(
  layer: BuiltLayer,
  wrappers: readonly KeyWrapper[],
): Promise<EncryptedLayer> {
  const symkey = randomBytes(32);
  const nonce = randomBytes(16);
  const { ciphertext, hmac } = encryptLayerBytes(layer.blob, symkey, nonce);
  const annotations = await encryptionAnnotations(
    privateOptionsBytes(symkey, nonce, layer.digest),
    hmac,
    wrappers,
  );
  return {
    ...layer,
    blob: ciphertext,
    mediaType: `${layer.mediaType}${ENCRYPTED_SUFFIX}`,
    digest: digestOf(ciphertext),
    annotations,
  };
}

/** An OCI image whose layers carry their annotations (encrypted ones, or any given). */
export function buildAnnotatedImage(
  spec: Omit<ImageSpec, 'layers'> & {
    readonly layers: readonly (BuiltLayer & { readonly annotations?: Readonly<Record<string, string>> })[];
  },
): BuiltImage {
  const plain = buildImage(spec);
  const manifest = JSON.parse(plain.manifest.toString('utf8')) as { layers: Record<string, unknown>[] };
  for (const [i, layer] of spec.layers.entries()) {
    const entry = manifest.layers[i];
    if (entry !== undefined && layer.annotations !== undefined) entry.annotations = layer.annotations;
  }
  const bytes = Buffer.from(JSON.stringify(manifest));
  return { ...plain, manifest: bytes, manifestDigest: digestOf(bytes) };
}
