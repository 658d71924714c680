/**
 * Pull, verify and unpack: resolve the manifest (choosing the platform of an
 * index), evaluate the signature policy before a single layer is fetched,
 * then, layer by layer, download the compressed blob to a spool file while
 * checking its size and digest, and only once it verified, unpack it into
 * `<bundle>/rootfs`, checking the diff_id and the caps on expanded bytes and
 * entries (`ExpansionLimits`). A blob that is not the one the manifest names
 * is never decompressed. The rootfs is assembled in a temporary folder next
 * to it and renamed into place only when everything verified; any failure
 * removes it.
 *
 * Errors carry image-rs' wording (`Image policy rejected: …`, `Errors
 * happened when pulling image: …`), which kata shows in pod events and
 * which tests and operators grep for.
 */

import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rename, rm, rmdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { type Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { digestOf } from './digest.js';
import type { DirImage } from './dir-image.js';
import { ImageError, type ImageErrorCode } from './errors.js';
import { evaluatePolicy, type KeyReader, type PolicyDecision, type PolicyImage } from './evaluate.js';
import { applyLayerStream, LayerError } from './layer.js';
import { ExpansionBudget, type ExpansionLimits } from './limits.js';
import { fetchSimpleSignatures, type RegistriesD } from './lookaside.js';
import {
  currentPlatform,
  type Descriptor,
  type ImageConfig,
  type ImageManifest,
  InvalidManifestError,
  type Platform,
  parseImageConfig,
  parseManifest,
  selectPlatformManifest,
} from './manifest.js';
import { layerDecipher, verifyCiphertextHmac } from './ocicrypt/block-cipher.js';
import { EncryptedLayerError, type LayerEncryption, layerEncryption } from './ocicrypt/layer-info.js';
import type { PrivateOptions } from './ocicrypt/options.js';
import { type KeyUnwrapper, unwrapLayerKey } from './ocicrypt/unwrap.js';
import type { Policy, RequirementType } from './policy.js';
import {
  type DockerReference,
  dockerImageName,
  parseImageReference,
  policyIdentity,
  policyNamespaces,
  referenceString,
} from './reference.js';
import { RegistryClient, type RegistryClientOptions } from './registry/client.js';
import { fetchSigstoreSignatures } from './registry/signatures.js';
import type { UntrustedSignature } from './sigstore.js';
import { RootfsUnpacker, type UnpackStats } from './unpack.js';

/** containers/image `iolimits.MaxConfigBodySize`. */
export const MAX_CONFIG_BYTES = 4 * 1024 * 1024;
/** image-rs `BUNDLE_ROOTFS`. */
export const BUNDLE_ROOTFS = 'rootfs';

export type PullStage = 'reference' | 'manifest' | 'policy' | 'layers' | 'bundle';

/**
 * A failed pull. `message` is image-rs' text for the stage; `detail` says
 * what exactly went wrong (containers/image's reason for a policy denial).
 */
export class ImagePullError extends ImageError {
  override readonly code: ImageErrorCode = 'PULL_FAILED';
  override readonly name: string = 'ImagePullError';
  readonly stage: PullStage;
  readonly detail: string;
  readonly decision: PolicyDecision | undefined;
  /** What had been written to the (since removed) rootfs when a layer failed. */
  readonly unpacked: UnpackStats | undefined;
  constructor(
    stage: PullStage,
    message: string,
    detail: string,
    options?: ErrorOptions & { decision?: PolicyDecision; unpacked?: UnpackStats },
  ) {
    super(message, options);
    this.stage = stage;
    this.detail = detail;
    this.decision = options?.decision;
    this.unpacked = options?.unpacked;
  }
}

/** image-rs' reason for a denial (`Denied by policy: …` follows it). */
export function imageRsDenial(deniedBy: RequirementType, reference: DockerReference | null): string {
  switch (deniedBy) {
    case 'reject':
      return `Policy \`reject\` rejects image ${reference !== null ? referenceString(reference) : ''}`.trimEnd();
    case 'insecureAcceptAnything':
      return 'rejected by `insecureAcceptAnything` rule';
    default:
      return `rejected by \`${deniedBy}\` rule`;
  }
}

export type PullProgressEvent =
  | { readonly kind: 'manifest'; readonly reference: string; readonly digest: string }
  | { readonly kind: 'policy'; readonly decision: PolicyDecision }
  | {
      readonly kind: 'layer';
      readonly index: number;
      readonly count: number;
      readonly digest: string;
      /** Compressed bytes read so far, of `size`. */
      readonly bytes: number;
      readonly size: number;
      readonly done: boolean;
    };

/**
 * Whether pulls accept a signature made on the index a platform manifest was
 * chosen from, by default: yes, as image-rs does (containers/image: no).
 */
export const DEFAULT_INDEX_SIGNATURES = true;

export interface PullImageOptions {
  /** Registry client to use; otherwise one is made from `registry` and closed afterwards. */
  readonly client?: RegistryClient;
  readonly registry?: RegistryClientOptions;
  /** The signature policy; null or absent means every image is accepted (image-rs without a policy). */
  readonly policy?: Policy | null;
  /** Reads `keyPath` keys (e.g. `kbs:///` through the KBS). */
  readonly readKey?: KeyReader;
  /** Platform to choose from an index (default: this machine's). */
  readonly platform?: Platform;
  /**
   * When the platform manifest was chosen from an index and has no
   * signature of its own, offer the index's signatures to the policy, and
   * accept a payload that names the index's digest (image-rs since its
   * commit de3f6ff6). Default true; false is containers/image's rule: only
   * the platform manifest's own signatures, naming its own digest.
   */
  readonly indexSignatures?: boolean;
  /** Lookaside signature stores (registries.d) for `signedBy` requirements. */
  readonly registriesD?: RegistriesD;
  readonly onProgress?: (event: PullProgressEvent) => void;
  readonly signal?: AbortSignal;
  /** Keep file ownership from the layers (default: when running as root). */
  readonly preserveOwnership?: boolean;
  /** Caps on expanded bytes and entries, per layer and per image (default `DEFAULT_EXPANSION_LIMITS`). */
  readonly limits?: Partial<ExpansionLimits>;
  /** Key protocols for ocicrypt-encrypted layers (`jweUnwrapper`, the data hub's key provider). */
  readonly decryption?: readonly KeyUnwrapper[];
}

export interface PullResult {
  /** The normalised reference pulled. */
  readonly reference: string;
  /** Digest of the (platform) manifest whose layers were unpacked. */
  readonly manifestDigest: string;
  /** Digest of the index the manifest was chosen from, when the reference named an index. */
  readonly indexDigest?: string;
  readonly configDigest: string;
  readonly config: ImageConfig;
  readonly rootfs: string;
  readonly decision?: PolicyDecision;
  readonly stats: UnpackStats;
}

/** Where a pull reads from: a registry or a `dir:` image. */
export interface ImageSource {
  readonly reference: DockerReference | null;
  readonly manifestBytes: Buffer | Uint8Array;
  readonly manifestDigest: string;
  readonly contentType: string | undefined;
  readonly indexDigest?: string;
  readonly policyImage: PolicyImage;
  blob(d: Descriptor): Promise<Readable>;
  blobBytes(d: Descriptor, limit: number): Promise<Uint8Array>;
}

function fail(stage: PullStage, message: string, detail: string, cause?: unknown): never {
  throw new ImagePullError(stage, detail !== '' ? `${message}: ${detail}` : message, detail, { cause });
}

export interface OpenRegistryImageOptions {
  /** Platform to choose from an index (default: this machine's). */
  readonly platform?: Platform;
  /** Also offer the index's signatures and digest to the policy (image-rs; default true, see `PullImageOptions`). */
  readonly indexSignatures?: boolean;
  /** Lookaside signature stores (registries.d) for `signedBy` requirements. */
  readonly registriesD?: RegistriesD;
  readonly signal?: AbortSignal;
  readonly onProgress?: PullImageOptions['onProgress'];
}

/**
 * Resolves `ref` on its registry to one platform manifest and describes it
 * for the policy; signatures are fetched only if the policy asks for them.
 */
export async function openRegistryImage(
  client: RegistryClient,
  ref: DockerReference,
  options: OpenRegistryImageOptions = {},
): Promise<ImageSource> {
  const { signal, onProgress } = options;
  const platform = options.platform ?? currentPlatform();
  const indexSignatures = options.indexSignatures ?? DEFAULT_INDEX_SIGNATURES;
  const repo = { domain: ref.domain, path: ref.path };
  const top = await client.getManifest(
    repo,
    ref.digest ?? ref.tag ?? 'latest',
    signal !== undefined ? { signal } : {},
  );
  let manifestBytes = top.bytes;
  let manifestDigest = top.digest;
  let contentType = top.contentType;
  let indexDigest: string | undefined;
  const parsedTop = parseManifest(top.bytes, top.contentType);
  if (parsedTop.kind === 'index') {
    indexDigest = top.digest;
    const chosen = selectPlatformManifest(parsedTop, platform);
    const instance = await client.getManifest(repo, chosen.digest, signal !== undefined ? { signal } : {});
    manifestBytes = instance.bytes;
    manifestDigest = instance.digest;
    contentType = instance.contentType;
  }
  onProgress?.({ kind: 'manifest', reference: referenceString(ref), digest: manifestDigest });
  let sigs: Promise<UntrustedSignature[]> | undefined;
  let simpleSigs: Promise<UntrustedSignature[]> | undefined;
  const policyImage: PolicyImage = {
    transport: 'docker',
    policyIdentity: policyIdentity(ref),
    policyNamespaces: policyNamespaces(ref),
    imageName: dockerImageName(ref),
    dockerReference: ref,
    manifest: async () => manifestBytes,
    ...(indexSignatures && indexDigest !== undefined ? { extraManifestDigests: [indexDigest] } : {}),
    signatures: () => {
      sigs ??= (async () => {
        const own = await fetchSigstoreSignatures(client, repo, manifestDigest);
        // The index's signatures stand in only when the platform manifest has none.
        if (!indexSignatures || indexDigest === undefined || own.length > 0) return own;
        return fetchSigstoreSignatures(client, repo, indexDigest);
      })();
      return sigs;
    },
    simpleSignatures: () => {
      simpleSigs ??= (async () => {
        const source = options.registriesD !== undefined ? { registriesD: options.registriesD } : {};
        const own = await fetchSimpleSignatures(client, ref, manifestDigest, source);
        if (!indexSignatures || indexDigest === undefined || own.length > 0) return own;
        return fetchSimpleSignatures(client, ref, indexDigest, source);
      })();
      return simpleSigs;
    },
  };
  return {
    reference: ref,
    manifestBytes,
    manifestDigest,
    contentType,
    ...(indexDigest !== undefined ? { indexDigest } : {}),
    policyImage,
    blob: (d) => client.getBlob(repo, d, signal),
    blobBytes: (d, limit) => client.getBlobBytes(repo, d, limit),
  };
}

/** A `dir:` image as a pull source. */
export async function openDirSource(image: DirImage): Promise<ImageSource> {
  const manifestBytes = await image.manifest();
  const { VerifyingStream } = await import('./registry/client.js');
  return {
    reference: image.dockerReference,
    manifestBytes,
    manifestDigest: digestOf(manifestBytes),
    contentType: undefined,
    policyImage: image,
    blob: async (d) => {
      const verify = new VerifyingStream(d);
      const raw = image.blob(d.digest);
      raw.on('error', (e) => verify.destroy(e));
      return raw.pipe(verify);
    },
    blobBytes: async (d, limit) => {
      if (d.size > limit)
        throw new ImageError(`blob ${d.digest} exceeds ${limit} bytes`, { code: 'BLOB_TOO_LARGE' });
      const chunks: Buffer[] = [];
      const verify = new VerifyingStream(d);
      const raw = image.blob(d.digest);
      raw.on('error', (e) => verify.destroy(e));
      for await (const c of raw.pipe(verify)) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    },
  };
}

class Counter extends Transform {
  #bytes = 0;
  constructor(readonly onBytes: (total: number) => void) {
    super();
  }
  override _transform(chunk: Buffer, _e: BufferEncoding, cb: TransformCallback): void {
    this.#bytes += chunk.byteLength;
    this.onBytes(this.#bytes);
    cb(null, chunk);
  }
}

/**
 * Pulls `image` (a reference such as `quay.io/ns/app:v1`, `docker://…`, or
 * an opened `dir:` image) into `<bundleDir>/rootfs`. Throws `ImagePullError`.
 */
export async function pullImage(
  image: string | DockerReference | DirImage,
  bundleDir: string,
  options: PullImageOptions = {},
): Promise<PullResult> {
  let ref: DockerReference | null = null;
  if (typeof image === 'string') {
    try {
      ref = parseImageReference(image.replace(/^docker:\/\//, ''));
    } catch (e) {
      fail('reference', 'Illegal image reference', (e as Error).message, e);
    }
  } else if (!('blob' in image)) ref = image;
  const ownClient =
    options.client === undefined && ref !== null ? new RegistryClient(options.registry ?? {}) : undefined;
  const client = options.client ?? ownClient;
  try {
    let source: ImageSource;
    try {
      source =
        ref !== null && client !== undefined
          ? await openRegistryImage(client, ref, {
              ...(options.platform !== undefined ? { platform: options.platform } : {}),
              ...(options.indexSignatures !== undefined ? { indexSignatures: options.indexSignatures } : {}),
              ...(options.registriesD !== undefined ? { registriesD: options.registriesD } : {}),
              ...(options.signal !== undefined ? { signal: options.signal } : {}),
              ...(options.onProgress !== undefined ? { onProgress: options.onProgress } : {}),
            })
          : await openDirSource(image as DirImage);
    } catch (e) {
      fail('manifest', 'Failed to pull image manifest', (e as Error).message, e);
    }
    return await pullFrom(source, bundleDir, options);
  } finally {
    ownClient?.close();
  }
}

async function pullFrom(
  source: ImageSource,
  bundleDir: string,
  options: PullImageOptions,
): Promise<PullResult> {
  // Checks the caps before anything is fetched or written.
  const budget = new ExpansionBudget(options.limits ?? {});
  let manifest: ImageManifest;
  try {
    const parsed = parseManifest(source.manifestBytes, source.contentType);
    if (parsed.kind !== 'manifest') throw new InvalidManifestError('the chosen manifest is an index');
    manifest = parsed;
  } catch (e) {
    fail('manifest', 'Failed to pull image manifest', (e as Error).message, e);
  }

  let decision: PolicyDecision | undefined;
  if (options.policy !== undefined && options.policy !== null) {
    decision = await evaluatePolicy(options.policy, source.policyImage, {
      ...(options.readKey !== undefined ? { readKey: options.readKey } : {}),
    });
    options.onProgress?.({ kind: 'policy', decision });
    if (!decision.allowed) {
      const reason = imageRsDenial(decision.deniedBy?.type ?? 'reject', source.reference);
      throw new ImagePullError(
        'policy',
        `Image policy rejected: Denied by policy: ${reason}`,
        decision.reason ?? '',
        {
          decision,
        },
      );
    }
  }

  let config: ImageConfig;
  try {
    config = parseImageConfig(await source.blobBytes(manifest.config, MAX_CONFIG_BYTES));
  } catch (e) {
    fail('manifest', 'Failed to pull image manifest', `image config: ${(e as Error).message}`, e);
  }
  if (config.diffIds.length !== manifest.layers.length) {
    fail(
      'manifest',
      'Failed to pull image manifest',
      `${manifest.layers.length} layers but ${config.diffIds.length} diff_ids in the image config`,
    );
  }
  const encryptions: LayerEncryption[] = [];
  for (const layer of manifest.layers) {
    try {
      encryptions.push(layerEncryption(layer));
    } catch (e) {
      const what = e instanceof EncryptedLayerError ? 'Failed to decrypt layer' : 'Failed to decode layer';
      fail('layers', 'Errors happened when pulling image', `${what}: ${(e as Error).message}`, e);
    }
  }
  // Every layer key is released before anything is downloaded or written.
  const layerKeys: (PrivateOptions | undefined)[] = [];
  for (const encryption of encryptions) {
    if (!encryption.encrypted) {
      layerKeys.push(undefined);
      continue;
    }
    try {
      layerKeys.push(await unwrapLayerKey(encryption.wrappedKeys, options.decryption ?? []));
    } catch (e) {
      fail(
        'layers',
        'Errors happened when pulling image',
        `Failed to decrypt layer: ${(e as Error).message}`,
        e,
      );
    }
  }

  try {
    await mkdir(bundleDir, { recursive: true });
  } catch (e) {
    fail('bundle', 'Failed to create bundle', (e as Error).message, e);
  }
  const rootfs = join(bundleDir, BUNDLE_ROOTFS);
  const work = await mkdtemp(join(bundleDir, '.rootfs-'));
  // Compressed blobs wait here until their digest verified; never inside the rootfs.
  let spool: string;
  try {
    spool = await mkdtemp(join(bundleDir, '.spool-'));
  } catch (e) {
    await rm(work, { recursive: true, force: true }).catch(() => undefined);
    fail('bundle', 'Failed to create bundle', (e as Error).message, e);
  }
  const unpacker = new RootfsUnpacker(
    work,
    options.preserveOwnership !== undefined ? { preserveOwnership: options.preserveOwnership } : {},
  );
  try {
    for (const [i, layer] of manifest.layers.entries()) {
      const emit = (bytes: number, done: boolean) =>
        options.onProgress?.({
          kind: 'layer',
          index: i,
          count: manifest.layers.length,
          digest: layer.digest,
          bytes,
          size: layer.size,
          done,
        });
      emit(0, false);
      const blobFile = join(spool, `${i}.blob`);
      try {
        await spoolBlob(source, layer, blobFile, (n) => emit(n, false));
        const encryption = encryptions[i] as LayerEncryption;
        await applyLayerStream(
          unpacker,
          await layerPlaintext(blobFile, encryption, layerKeys[i]),
          encryption.compression,
          config.diffIds[i] ?? '',
          { budget: budget.layer() },
        );
      } catch (e) {
        throw layerFailure(e, unpacker.stats);
      }
      await unlink(blobFile).catch(() => undefined);
      emit(layer.size, true);
    }
    try {
      await unpacker.finish();
      await chmod(work, 0o755);
      await placeRootfs(work, rootfs);
    } catch (e) {
      fail('bundle', 'Failed to create bundle', (e as Error).message, e);
    }
  } catch (e) {
    // Nothing of an image that did not fully verify may stay behind.
    await rm(work, { recursive: true, force: true }).catch(() => undefined);
    throw e;
  } finally {
    await rm(spool, { recursive: true, force: true }).catch(() => undefined);
  }
  return {
    reference: source.reference !== null ? referenceString(source.reference) : '',
    manifestDigest: source.manifestDigest,
    ...(source.indexDigest !== undefined ? { indexDigest: source.indexDigest } : {}),
    configDigest: manifest.config.digest,
    config,
    rootfs,
    ...(decision !== undefined ? { decision } : {}),
    stats: unpacker.stats,
  };
}

/**
 * Downloads `layer` to `file`; resolves only when its size and digest
 * verified (the source's stream fails otherwise). Throws `LayerError('fetch')`.
 */
async function spoolBlob(
  source: ImageSource,
  layer: Descriptor,
  file: string,
  onBytes: (total: number) => void,
): Promise<void> {
  try {
    const stream = await source.blob(layer);
    await pipeline(stream, new Counter(onBytes), createWriteStream(file, { flags: 'wx', mode: 0o600 }));
  } catch (e) {
    throw new LayerError('fetch', (e as Error).message, { cause: e });
  }
}

/**
 * The spooled blob as the plain (compressed) layer: for an encrypted layer,
 * the HMAC over the whole ciphertext is checked first, then it is decrypted
 * as it streams. Throws `LayerError('decrypt')`.
 */
async function layerPlaintext(
  blobFile: string,
  encryption: LayerEncryption,
  key: PrivateOptions | undefined,
): Promise<Readable> {
  if (!encryption.encrypted) return createReadStream(blobFile);
  if (key === undefined) throw new LayerError('decrypt', 'no key was released for the layer');
  try {
    await verifyCiphertextHmac(blobFile, key, encryption.publicOptions);
  } catch (e) {
    throw new LayerError('decrypt', (e as Error).message, { cause: e });
  }
  const file = createReadStream(blobFile);
  const plain = layerDecipher(key);
  file.on('error', (e) => plain.destroy(e));
  plain.on('close', () => file.destroy());
  return file.pipe(plain);
}

function layerFailure(e: unknown, unpacked: UnpackStats): ImagePullError {
  const prefix = 'Errors happened when pulling image';
  const stats = { ...unpacked };
  if (!(e instanceof LayerError)) {
    return new ImagePullError('layers', `${prefix}: ${(e as Error).message}`, (e as Error).message, {
      cause: e,
      unpacked: stats,
    });
  }
  let detail: string;
  switch (e.stage) {
    case 'fetch':
      detail = `Failed to async pull blob stream: ${e.message}`;
      break;
    case 'decode':
      detail = `Failed to decode layer data stream: Failed to unpack layer: Failed to read entries from the tar (${e.message})`;
      break;
    case 'unpack':
    case 'limit':
      detail = `Failed to decode layer data stream: Failed to unpack layer: ${e.message}`;
      break;
    case 'diffid':
      detail = e.message;
      break;
    case 'decrypt':
      detail = `Failed to decrypt layer: ${e.message}`;
      break;
  }
  return new ImagePullError('layers', `${prefix}: ${detail}`, detail, { cause: e, unpacked: stats });
}

/** Moves the finished rootfs into place; an existing empty `rootfs` folder (made by the caller) is replaced. */
async function placeRootfs(work: string, rootfs: string): Promise<void> {
  let existing: string[] | undefined;
  try {
    existing = await readdir(rootfs);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  if (existing !== undefined) {
    if (existing.length > 0)
      throw new ImageError(`${rootfs} exists and is not empty`, { code: 'ROOTFS_NOT_EMPTY' });
    await rmdir(rootfs);
  }
  await rename(work, rootfs);
}
