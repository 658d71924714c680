/**
 * OCI and Docker v2 manifests, indexes and image configs: the parts a pull
 * needs, read strictly enough that a malformed or ambiguous document is an
 * error rather than a guess. Docker schema 1 is refused (deprecated, and its
 * digest rules differ).
 */

import { parseDigest } from './digest.js';
import { ImageError, type ImageErrorCode } from './errors.js';
import { type JsonValue, parseJson } from './json.js';

export const MEDIA_TYPE = Object.freeze({
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociConfig: 'application/vnd.oci.image.config.v1+json',
  ociLayer: 'application/vnd.oci.image.layer.v1.tar',
  ociLayerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  ociLayerZstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
  ociNondistributableLayer: 'application/vnd.oci.image.layer.nondistributable.v1.tar',
  ociNondistributableLayerGzip: 'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip',
  ociNondistributableLayerZstd: 'application/vnd.oci.image.layer.nondistributable.v1.tar+zstd',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerManifestList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerSchema1: 'application/vnd.docker.distribution.manifest.v1+json',
  dockerSchema1Signed: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
  dockerConfig: 'application/vnd.docker.container.image.v1+json',
  dockerLayerGzip: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
  dockerForeignLayerGzip: 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
} as const);

/** The `Accept` list of a manifest request (containers/image's order). */
export const MANIFEST_ACCEPT = [
  MEDIA_TYPE.ociManifest,
  MEDIA_TYPE.dockerManifest,
  MEDIA_TYPE.dockerSchema1Signed,
  MEDIA_TYPE.dockerSchema1,
  MEDIA_TYPE.ociIndex,
  MEDIA_TYPE.dockerManifestList,
];

/** A document that is not a usable manifest, index or config. */
export class InvalidManifestError extends ImageError {
  override readonly code: ImageErrorCode = 'MANIFEST_INVALID';
  override readonly name: string = 'InvalidManifestError';
}

export interface Platform {
  readonly os: string;
  readonly architecture: string;
  readonly variant?: string;
}

export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly urls?: readonly string[];
  readonly annotations?: Readonly<Record<string, string>>;
  readonly platform?: Platform;
}

export interface ImageManifest {
  readonly kind: 'manifest';
  readonly mediaType: string;
  readonly config: Descriptor;
  readonly layers: readonly Descriptor[];
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface ImageIndex {
  readonly kind: 'index';
  readonly mediaType: string;
  readonly manifests: readonly Descriptor[];
}

export type ParsedManifest = ImageManifest | ImageIndex;

type Plain = null | boolean | number | string | Plain[] | { [k: string]: Plain };

/** JSON to plain values, refusing duplicate keys (two readers could otherwise see two different documents). */
export function strictJson(bytes: Uint8Array | string): Plain {
  const convert = (v: JsonValue): Plain => {
    switch (v.kind) {
      case 'null':
        return null;
      case 'bool':
      case 'number':
      case 'string':
        return v.value;
      case 'array':
        return v.items.map(convert);
      case 'object': {
        const o: { [k: string]: Plain } = Object.create(null);
        for (const [k, item] of v.entries) {
          if (Object.hasOwn(o, k)) throw new InvalidManifestError(`duplicate key ${JSON.stringify(k)}`);
          o[k] = convert(item);
        }
        return o;
      }
    }
  };
  try {
    return convert(parseJson(bytes));
  } catch (e) {
    if (e instanceof InvalidManifestError) throw e;
    throw new InvalidManifestError((e as Error).message);
  }
}

function isObject(v: Plain | undefined): v is { [k: string]: Plain } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(o: { [k: string]: Plain }, key: string, what: string, optional = false): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) {
    if (optional) return undefined;
    throw new InvalidManifestError(`${what}: missing ${key}`);
  }
  if (typeof v !== 'string') throw new InvalidManifestError(`${what}: ${key} is not a string`);
  return v;
}

function stringMap(v: Plain | undefined, what: string): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw new InvalidManifestError(`${what} is not an object`);
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) {
    if (typeof x !== 'string') throw new InvalidManifestError(`${what}.${k} is not a string`);
    out[k] = x;
  }
  return out;
}

function readPlatform(v: Plain | undefined): Platform | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw new InvalidManifestError('platform is not an object');
  const os = str(v, 'os', 'platform') ?? '';
  const architecture = str(v, 'architecture', 'platform') ?? '';
  const variant = str(v, 'variant', 'platform', true);
  return { os, architecture, ...(variant !== undefined && variant !== '' ? { variant } : {}) };
}

function readDescriptor(v: Plain | undefined, what: string): Descriptor {
  if (!isObject(v)) throw new InvalidManifestError(`${what} is not an object`);
  const mediaType = str(v, 'mediaType', what) ?? '';
  const digestText = str(v, 'digest', what) ?? '';
  let digest: string;
  try {
    digest = parseDigest(digestText);
  } catch (e) {
    throw new InvalidManifestError(`${what}: digest ${JSON.stringify(digestText)}: ${(e as Error).message}`);
  }
  const size = v.size;
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
    throw new InvalidManifestError(`${what}: size is not a non-negative integer`);
  }
  const urlsRaw = v.urls;
  let urls: string[] | undefined;
  if (urlsRaw !== undefined && urlsRaw !== null) {
    if (!Array.isArray(urlsRaw) || urlsRaw.some((u) => typeof u !== 'string')) {
      throw new InvalidManifestError(`${what}: urls is not a list of strings`);
    }
    urls = urlsRaw as string[];
  }
  const annotations = stringMap(v.annotations, `${what}.annotations`);
  const platform = readPlatform(v.platform);
  return {
    mediaType,
    digest,
    size,
    ...(urls !== undefined ? { urls } : {}),
    ...(annotations !== undefined ? { annotations } : {}),
    ...(platform !== undefined ? { platform } : {}),
  };
}

/**
 * Parses a manifest or index. The type comes from the document's
 * `mediaType`, else from the `Content-Type` the registry sent, else from its
 * shape; a document that claims one type and has the fields of another is
 * refused (containers/image's `ValidateUnambiguousManifestFormat`).
 */
export function parseManifest(bytes: Uint8Array, contentType?: string): ParsedManifest {
  const doc = strictJson(bytes);
  if (!isObject(doc)) throw new InvalidManifestError('manifest is not a JSON object');
  const declared = str(doc, 'mediaType', 'manifest', true);
  const header = contentType?.split(';')[0]?.trim();
  const hasLayers = doc.layers !== undefined || doc.config !== undefined;
  const hasManifests = doc.manifests !== undefined;
  if (
    doc.schemaVersion === 1 ||
    declared === MEDIA_TYPE.dockerSchema1 ||
    header === MEDIA_TYPE.dockerSchema1Signed
  ) {
    throw new InvalidManifestError('Docker schema 1 manifests are not supported');
  }
  if (doc.schemaVersion !== 2)
    throw new InvalidManifestError(
      `unsupported manifest schemaVersion ${JSON.stringify(doc.schemaVersion ?? null)}`,
    );
  if (hasLayers && hasManifests) throw new InvalidManifestError('manifest has both layers and manifests');
  let mediaType = declared;
  if (mediaType === undefined && header !== undefined && header !== '' && header !== 'application/json')
    mediaType = header;
  mediaType ??= hasManifests ? MEDIA_TYPE.ociIndex : MEDIA_TYPE.ociManifest;
  if (
    declared !== undefined &&
    header !== undefined &&
    Object.values(MEDIA_TYPE).includes(header as never) &&
    header !== declared
  ) {
    throw new InvalidManifestError(`manifest media type ${declared} differs from Content-Type ${header}`);
  }
  switch (mediaType) {
    case MEDIA_TYPE.ociIndex:
    case MEDIA_TYPE.dockerManifestList: {
      if (hasLayers) throw new InvalidManifestError(`${mediaType} with layers`);
      if (!Array.isArray(doc.manifests)) throw new InvalidManifestError('index: manifests is not a list');
      return {
        kind: 'index',
        mediaType,
        manifests: doc.manifests.map((m, i) => readDescriptor(m, `manifests[${i}]`)),
      };
    }
    case MEDIA_TYPE.ociManifest:
    case MEDIA_TYPE.dockerManifest: {
      if (hasManifests) throw new InvalidManifestError(`${mediaType} with manifests`);
      if (!Array.isArray(doc.layers)) throw new InvalidManifestError('manifest: layers is not a list');
      const annotations = stringMap(doc.annotations, 'annotations');
      return {
        kind: 'manifest',
        mediaType,
        config: readDescriptor(doc.config, 'config'),
        layers: doc.layers.map((l, i) => readDescriptor(l, `layers[${i}]`)),
        ...(annotations !== undefined ? { annotations } : {}),
      };
    }
    default:
      throw new InvalidManifestError(`unsupported manifest media type ${JSON.stringify(mediaType)}`);
  }
}

/** The image config fields a pull and a runtime bundle use. */
export interface ImageConfig {
  readonly os?: string;
  readonly architecture?: string;
  readonly diffIds: readonly string[];
  readonly config: {
    readonly user?: string;
    readonly env?: readonly string[];
    readonly entrypoint?: readonly string[];
    readonly cmd?: readonly string[];
    readonly workingDir?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly stopSignal?: string;
  };
}

function stringList(v: Plain | undefined, what: string): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))
    throw new InvalidManifestError(`${what} is not a list of strings`);
  return v as string[];
}

/** Parses an OCI / Docker image config. */
export function parseImageConfig(bytes: Uint8Array): ImageConfig {
  const doc = strictJson(bytes);
  if (!isObject(doc)) throw new InvalidManifestError('image config is not a JSON object');
  const rootfs = doc.rootfs;
  if (!isObject(rootfs)) throw new InvalidManifestError('image config: missing rootfs');
  if (rootfs.type !== 'layers') throw new InvalidManifestError('image config: rootfs.type is not "layers"');
  const diffIds = (stringList(rootfs.diff_ids, 'rootfs.diff_ids') ?? []).map((d) => {
    try {
      return parseDigest(d);
    } catch (e) {
      throw new InvalidManifestError(`image config: diff_id ${JSON.stringify(d)}: ${(e as Error).message}`);
    }
  });
  const c = isObject(doc.config) ? doc.config : {};
  const user = str(c, 'User', 'config', true);
  const workingDir = str(c, 'WorkingDir', 'config', true);
  const stopSignal = str(c, 'StopSignal', 'config', true);
  const env = stringList(c.Env, 'config.Env');
  const entrypoint = stringList(c.Entrypoint, 'config.Entrypoint');
  const cmd = stringList(c.Cmd, 'config.Cmd');
  const labels = stringMap(c.Labels, 'config.Labels');
  const os = str(doc, 'os', 'image config', true);
  const architecture = str(doc, 'architecture', 'image config', true);
  return {
    ...(os !== undefined ? { os } : {}),
    ...(architecture !== undefined ? { architecture } : {}),
    diffIds,
    config: {
      ...(user !== undefined ? { user } : {}),
      ...(env !== undefined ? { env } : {}),
      ...(entrypoint !== undefined ? { entrypoint } : {}),
      ...(cmd !== undefined ? { cmd } : {}),
      ...(workingDir !== undefined ? { workingDir } : {}),
      ...(labels !== undefined ? { labels } : {}),
      ...(stopSignal !== undefined ? { stopSignal } : {}),
    },
  };
}

/** Layer compression, from the layer's media type (image-rs decides by media type too). */
export type LayerCompression = 'none' | 'gzip' | 'zstd';

export function layerCompression(mediaType: string): LayerCompression {
  switch (mediaType) {
    case MEDIA_TYPE.ociLayer:
    case MEDIA_TYPE.ociNondistributableLayer:
      return 'none';
    case MEDIA_TYPE.ociLayerGzip:
    case MEDIA_TYPE.ociNondistributableLayerGzip:
    case MEDIA_TYPE.dockerLayerGzip:
    case MEDIA_TYPE.dockerForeignLayerGzip:
      return 'gzip';
    case MEDIA_TYPE.ociLayerZstd:
    case MEDIA_TYPE.ociNondistributableLayerZstd:
      return 'zstd';
    default:
      throw new InvalidManifestError(`unhandled media type: ${mediaType}`);
  }
}

/** `os/arch[/variant]`. */
export function parsePlatform(s: string): Platform {
  const parts = s.split('/');
  const [os, architecture, variant] = parts;
  if (parts.length < 2 || parts.length > 3 || !os || !architecture || variant === '') {
    throw new ImageError(`invalid platform ${JSON.stringify(s)}: expected os/arch[/variant]`, {
      code: 'PLATFORM_INVALID',
    });
  }
  return { os, architecture, ...(variant !== undefined ? { variant } : {}) };
}

export function formatPlatform(p: Platform): string {
  return `${p.os}/${p.architecture}${p.variant !== undefined ? `/${p.variant}` : ''}`;
}

const NODE_ARCH: Readonly<Record<string, string>> = {
  x64: 'amd64',
  arm64: 'arm64',
  arm: 'arm',
  ia32: '386',
  ppc64: 'ppc64le',
  s390x: 's390x',
  riscv64: 'riscv64',
  loong64: 'loong64',
  mips64el: 'mips64le',
};

/** The platform this process runs on, in OCI terms. */
export function currentPlatform(): Platform {
  const architecture = NODE_ARCH[process.arch] ?? process.arch;
  const armVersion = (process.config.variables as Record<string, unknown>).arm_version;
  if (architecture === 'arm64') return { os: 'linux', architecture, variant: 'v8' };
  if (architecture === 'arm' && typeof armVersion === 'string' && armVersion !== '') {
    return { os: 'linux', architecture, variant: `v${armVersion}` };
  }
  return { os: 'linux', architecture };
}

/** Variants an architecture can also run, best first (containers/image's compatibility table). */
const COMPATIBLE_VARIANTS: Readonly<Record<string, readonly string[]>> = {
  arm: ['v8', 'v7', 'v6', 'v5'],
  arm64: ['v8'],
};

/** containers/image `WantedPlatforms`: the platforms acceptable for `wanted`, best first. */
export function wantedPlatforms(wanted: Platform): Platform[] {
  let variants: string[];
  const order = COMPATIBLE_VARIANTS[wanted.architecture];
  if (wanted.variant !== undefined) {
    const i = order?.indexOf(wanted.variant) ?? -1;
    variants = i >= 0 && order !== undefined ? [...order.slice(i)] : [wanted.variant];
    variants.push('');
  } else {
    variants = ['', ...(order ?? [])];
  }
  return variants.map((v) => ({
    os: wanted.os,
    architecture: wanted.architecture,
    ...(v !== '' ? { variant: v } : {}),
  }));
}

/** Picks the manifest of an index for `wanted`. Attestation entries (`unknown/unknown`) never match. */
export function selectPlatformManifest(index: ImageIndex, wanted: Platform): Descriptor {
  for (const want of wantedPlatforms(wanted)) {
    for (const d of index.manifests) {
      const p = d.platform;
      if (p === undefined) continue;
      if (
        p.os === want.os &&
        p.architecture === want.architecture &&
        (p.variant ?? '') === (want.variant ?? '')
      ) {
        return d;
      }
    }
  }
  throw new InvalidManifestError(
    `no image found in image index for architecture ${JSON.stringify(wanted.architecture)}, variant ${JSON.stringify(wanted.variant ?? '')}, OS ${JSON.stringify(wanted.os)}`,
  );
}
