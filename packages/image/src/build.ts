/**
 * Minimal OCI image building and publishing, for our own tooling, tests,
 * demos and benchmarks: layers from in-memory entries, an image config with
 * the right diff_ids, a manifest, and pushing to a registry or writing a
 * containers/image `dir:` layout.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gzipSync, zstdCompressSync } from 'node:zlib';
import tar from 'tar-stream';
import { digestHex, digestOf } from './digest.js';
import { MEDIA_TYPE, type Platform } from './manifest.js';
import type { RegistryClient, Repository } from './registry/client.js';
import { signatureToBlob, type UntrustedSignature } from './sigstore.js';

export interface LayerEntry {
  readonly name: string;
  readonly type?: 'file' | 'directory' | 'symlink' | 'link' | 'character-device' | 'block-device' | 'fifo';
  readonly content?: string | Uint8Array;
  readonly mode?: number;
  readonly linkname?: string;
  readonly uid?: number;
  readonly gid?: number;
  readonly mtime?: Date;
}

/** `gzip-multi` writes two concatenated gzip members (as some tools do). */
export type BuildCompression = 'none' | 'gzip' | 'gzip-multi' | 'zstd';

export interface BuiltLayer {
  readonly blob: Buffer;
  readonly mediaType: string;
  readonly digest: string;
  readonly diffId: string;
  /** The uncompressed tar. */
  readonly tar: Buffer;
}

/** A tar of `entries`, in order. */
export async function buildTar(entries: readonly LayerEntry[]): Promise<Buffer> {
  const pack = tar.pack();
  const done = (async () => {
    const chunks: Buffer[] = [];
    for await (const c of pack) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  })();
  for (const e of entries) {
    const type = e.type ?? 'file';
    const header = {
      name: e.name,
      type,
      mode: e.mode ?? (type === 'directory' ? 0o755 : 0o644),
      uid: e.uid ?? 0,
      gid: e.gid ?? 0,
      mtime: e.mtime ?? new Date(0),
      ...(e.linkname !== undefined ? { linkname: e.linkname } : {}),
    };
    const body = type === 'file' ? (e.content ?? '') : '';
    await new Promise<void>((resolve, reject) => {
      pack.entry(header, typeof body === 'string' ? body : Buffer.from(body), (err) =>
        err ? reject(err) : resolve(),
      );
    });
  }
  pack.finalize();
  return done;
}

/** Compresses a tar as a layer blob. */
export function layerFromTar(tarBytes: Buffer, compression: BuildCompression = 'gzip'): BuiltLayer {
  let blob: Buffer;
  let mediaType: string;
  switch (compression) {
    case 'none':
      blob = tarBytes;
      mediaType = MEDIA_TYPE.ociLayer;
      break;
    case 'gzip':
      blob = gzipSync(tarBytes, { level: 1 });
      mediaType = MEDIA_TYPE.ociLayerGzip;
      break;
    case 'gzip-multi': {
      const half = Math.floor(tarBytes.byteLength / 2);
      blob = Buffer.concat([gzipSync(tarBytes.subarray(0, half)), gzipSync(tarBytes.subarray(half))]);
      mediaType = MEDIA_TYPE.ociLayerGzip;
      break;
    }
    case 'zstd':
      blob = zstdCompressSync(tarBytes);
      mediaType = MEDIA_TYPE.ociLayerZstd;
      break;
  }
  return { blob, mediaType, digest: digestOf(blob), diffId: digestOf(tarBytes), tar: tarBytes };
}

export async function buildLayer(
  entries: readonly LayerEntry[],
  compression: BuildCompression = 'gzip',
): Promise<BuiltLayer> {
  return layerFromTar(await buildTar(entries), compression);
}

export interface BuiltImage {
  readonly manifest: Buffer;
  readonly manifestDigest: string;
  readonly config: Buffer;
  readonly configDigest: string;
  readonly layers: readonly BuiltLayer[];
}

export interface ImageSpec {
  readonly layers: readonly BuiltLayer[];
  readonly platform?: Platform;
  readonly cmd?: readonly string[];
  readonly entrypoint?: readonly string[];
  readonly env?: readonly string[];
  readonly workingDir?: string;
  readonly user?: string;
  /** Overrides the diff_ids written in the config (to build broken images in tests). */
  readonly diffIds?: readonly string[];
}

/** An OCI image manifest and config for `spec`. */
export function buildImage(spec: ImageSpec): BuiltImage {
  const platform = spec.platform ?? { os: 'linux', architecture: 'amd64' };
  const config = Buffer.from(
    JSON.stringify({
      architecture: platform.architecture,
      os: platform.os,
      ...(platform.variant !== undefined ? { variant: platform.variant } : {}),
      config: {
        ...(spec.env !== undefined
          ? { Env: spec.env }
          : { Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'] }),
        ...(spec.entrypoint !== undefined ? { Entrypoint: spec.entrypoint } : {}),
        ...(spec.cmd !== undefined ? { Cmd: spec.cmd } : {}),
        ...(spec.workingDir !== undefined ? { WorkingDir: spec.workingDir } : {}),
        ...(spec.user !== undefined ? { User: spec.user } : {}),
      },
      rootfs: { type: 'layers', diff_ids: spec.diffIds ?? spec.layers.map((l) => l.diffId) },
      history: spec.layers.map(() => ({ created_by: 'broker image build' })),
    }),
  );
  const configDigest = digestOf(config);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA_TYPE.ociManifest,
      config: { mediaType: MEDIA_TYPE.ociConfig, digest: configDigest, size: config.byteLength },
      layers: spec.layers.map((l) => ({ mediaType: l.mediaType, digest: l.digest, size: l.blob.byteLength })),
    }),
  );
  return { manifest, manifestDigest: digestOf(manifest), config, configDigest, layers: spec.layers };
}

/** An OCI index over `images` (each with its platform). */
export function buildIndex(images: readonly { image: BuiltImage; platform: Platform }[]): {
  bytes: Buffer;
  digest: string;
} {
  const bytes = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA_TYPE.ociIndex,
      manifests: images.map(({ image, platform }) => ({
        mediaType: MEDIA_TYPE.ociManifest,
        digest: image.manifestDigest,
        size: image.manifest.byteLength,
        platform,
      })),
    }),
  );
  return { bytes, digest: digestOf(bytes) };
}

/** Uploads the blobs and the manifest of `image`, tagged `tag`. Returns the manifest digest. */
export async function pushImage(
  client: RegistryClient,
  repo: Repository,
  tag: string,
  image: BuiltImage,
): Promise<string> {
  for (const layer of image.layers) await client.pushBlob(repo, layer.blob);
  await client.pushBlob(repo, image.config);
  return client.putManifest(repo, tag, image.manifest, MEDIA_TYPE.ociManifest);
}

/** Writes `image` in containers/image's `dir:` layout, with optional signatures (`signature-1`, …). */
export async function writeDirImage(
  dir: string,
  image: BuiltImage,
  signatures: readonly UntrustedSignature[] = [],
): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'version'), 'Directory Transport Version: 1.1\n');
  await writeFile(join(dir, 'manifest.json'), image.manifest);
  await writeFile(join(dir, digestHex(image.configDigest)), image.config);
  for (const l of image.layers) await writeFile(join(dir, digestHex(l.digest)), l.blob);
  for (const [i, s] of signatures.entries())
    await writeFile(join(dir, `signature-${i + 1}`), signatureToBlob(s));
}
