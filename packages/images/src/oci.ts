/**
 * OCI image layouts (image-spec `image-layout.md`): content-addressed blobs, manifests and indexes
 * serialised once and written as they are, so that a digest names exactly the bytes on disk.
 */
import { existsSync, linkSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { digestHex, digestOf, MEDIA_TYPE } from '@broker/image';

export const EMPTY_MEDIA_TYPE = 'application/vnd.oci.empty.v1+json';
export const REF_NAME = 'org.opencontainers.image.ref.name';

export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly artifactType?: string;
  readonly platform?: { readonly architecture: string; readonly os: string };
  readonly annotations?: Readonly<Record<string, string>>;
}

/** Bytes and the descriptor that names them. */
export interface Blob {
  readonly bytes: Buffer;
  readonly descriptor: Descriptor;
}

export function blob(mediaType: string, bytes: Buffer, extra: Partial<Descriptor> = {}): Blob {
  return { bytes, descriptor: { mediaType, digest: digestOf(bytes), size: bytes.byteLength, ...extra } };
}

export function jsonBlob(mediaType: string, value: unknown, extra: Partial<Descriptor> = {}): Blob {
  return blob(mediaType, Buffer.from(JSON.stringify(value)), extra);
}

/** The empty config of artifacts (image-spec's `application/vnd.oci.empty.v1+json`, `{}`). */
export const EMPTY_CONFIG = blob(EMPTY_MEDIA_TYPE, Buffer.from('{}'));

export function manifestBlob(
  config: Blob,
  layers: readonly Blob[],
  options: { annotations?: Record<string, string>; artifactType?: string; subject?: Descriptor } = {},
): Blob {
  return jsonBlob(MEDIA_TYPE.ociManifest, {
    schemaVersion: 2,
    mediaType: MEDIA_TYPE.ociManifest,
    ...(options.artifactType !== undefined && { artifactType: options.artifactType }),
    config: config.descriptor,
    layers: layers.map((l) => l.descriptor),
    ...(options.subject !== undefined && { subject: options.subject }),
    ...(options.annotations !== undefined && { annotations: options.annotations }),
  });
}

export function indexBlob(manifests: readonly Descriptor[], annotations?: Record<string, string>): Blob {
  return jsonBlob(MEDIA_TYPE.ociIndex, {
    schemaVersion: 2,
    mediaType: MEDIA_TYPE.ociIndex,
    manifests,
    ...(annotations !== undefined && { annotations }),
  });
}

/**
 * Writes an OCI image layout at `dir`: `blobs`, then `index.json` listing `entries` (each tagged by
 * its `org.opencontainers.image.ref.name` annotation). A blob already written elsewhere by this
 * writer is hard-linked rather than copied (the four images share their two big layers).
 */
export class LayoutWriter {
  private readonly written = new Map<string, string>();

  write(dir: string, blobs: Iterable<Blob>, entries: readonly Descriptor[]): void {
    const blobDir = join(dir, 'blobs', 'sha256');
    mkdirSync(blobDir, { recursive: true });
    for (const b of blobs) {
      const path = join(blobDir, digestHex(b.descriptor.digest));
      if (existsSync(path)) continue;
      const earlier = this.written.get(b.descriptor.digest);
      if (earlier !== undefined) linkSync(earlier, path);
      else writeFileSync(path, b.bytes);
      this.written.set(b.descriptor.digest, path);
    }
    writeFileSync(join(dir, 'oci-layout'), `${JSON.stringify({ imageLayoutVersion: '1.0.0' })}`);
    writeFileSync(
      join(dir, 'index.json'),
      JSON.stringify({ schemaVersion: 2, mediaType: MEDIA_TYPE.ociIndex, manifests: entries }),
    );
  }
}
