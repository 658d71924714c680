/**
 * `make images`: the four images as OCI image layouts under `dist/images/<name>`, each an image index
 * over linux/amd64 and linux/arm64, tagged with the version in a one-entry `index.json` (what
 * skopeo's `oci:` transport reads). Beside each: `<name>.spdx.json` (the SBOM) and `<name>.attached`,
 * a layout holding what is attached to the index: the SBOM as an OCI referrer (a manifest whose
 * `subject` is the index, listed in the referrers index tagged `sha256-<index hex>`, OCI
 * distribution's fallback tag) and, when a signing key is given, cosign's signatures.
 *
 * Every time stamp is the commit's, and V8's code cache (which differs from run to run) is left out,
 * so two builds of one commit give the same digests.
 */
import { execFileSync } from 'node:child_process';
import type { KeyObject } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { gzipSync } from 'node:zlib';
import { buildTar, digestOf, type LayerEntry, MEDIA_TYPE } from '@broker/image';
import type { DebianPackage } from './debian.js';
import { ImageBuildError } from './errors.js';
import { BIN_DIR, EXECUTABLE, IMAGES, type ImageDefinition } from './images.js';
import {
  type Blob,
  blob,
  type Descriptor,
  EMPTY_CONFIG,
  indexBlob,
  jsonBlob,
  LayoutWriter,
  manifestBlob,
  REF_NAME,
} from './oci.js';
import type { ImagePlatform } from './platform.js';
import { buildBaseLayer, CA_BUNDLE_PATH, IMAGE_USER, withParents } from './rootfs.js';
import { imageBlob, injectBlob, nodeRuntime } from './runtime.js';
import { npmPackagesFromLockfile, SPDX_MEDIA_TYPE, spdxDocument } from './sbom.js';
import { signatureEntry, signatureManifest } from './sign.js';

export interface BuildOptions {
  /** The repository's root (with node_modules and dist/sea from `make build`). */
  readonly root: string;
  readonly outDir: string;
  /** Downloaded Debian and npm packages, kept between builds. */
  readonly cacheDir: string;
  readonly platforms: readonly ImagePlatform[];
  readonly images?: readonly ImageDefinition[];
  readonly version: string;
  readonly revision: string;
  /** Every time stamp in the images (the commit's time). */
  readonly created: Date;
  /** `org.opencontainers.image.source`, when known. */
  readonly source?: string;
  /** Signs each image in cosign's format as `<repositoryPrefix>/<name>`. */
  readonly signingKey?: KeyObject;
  readonly repositoryPrefix: string;
  readonly log?: (line: string) => void;
}

export interface PlatformImage {
  readonly architecture: string;
  readonly manifestDigest: string;
  readonly compressedBytes: number;
  readonly uncompressedBytes: number;
}

export interface BuiltImageSummary {
  readonly name: string;
  readonly layout: string;
  readonly reference: string;
  readonly indexDigest: string;
  readonly platforms: readonly PlatformImage[];
  readonly sbom: string;
  readonly sbomPackages: number;
  readonly signatures: readonly string[];
}

interface Layer {
  readonly blob: Blob;
  readonly diffId: string;
  readonly uncompressedBytes: number;
  readonly createdBy: string;
}

function layer(tarBytes: Buffer, createdBy: string): Layer {
  // gzip from Node's zlib: the same bytes for the same input and level on every machine. Level 9
  // saved 0.7% of the executable's layer and took twice as long.
  const gz = gzipSync(tarBytes, { level: 6 });
  return {
    blob: blob(MEDIA_TYPE.ociLayerGzip, gz),
    diffId: digestOf(tarBytes),
    uncompressedBytes: tarBytes.byteLength,
    createdBy,
  };
}

interface PlatformLayers {
  readonly platform: ImagePlatform;
  readonly layers: readonly Layer[];
  readonly debian: readonly DebianPackage[];
  readonly runtime: { name: string; version: string };
}

function listCommands(root: string): string[] {
  return execFileSync(join(root, 'dist/bin', EXECUTABLE), ['--list-commands'], { encoding: 'utf8' })
    .trim()
    .split('\n');
}

async function platformLayers(
  o: BuildOptions,
  platform: ImagePlatform,
  seaBlob: Buffer,
  commands: readonly string[],
  dataDirs: readonly string[],
): Promise<PlatformLayers> {
  const log = o.log ?? (() => {});
  const runtime = await nodeRuntime(o.root, platform, join(o.cacheDir, 'npm'));
  log(`  linux/${platform.architecture}: ${runtime.package}@${runtime.version}, Debian libraries`);
  const base = await buildBaseLayer(platform, runtime.binary, join(o.cacheDir, 'debian'), o.created);
  const executable = injectBlob(o.root, runtime.binary, seaBlob);
  const mtime = o.created;
  const files = new Map<string, LayerEntry>();
  const bin = BIN_DIR.slice(1);
  files.set(`${bin}/${EXECUTABLE}`, {
    name: `${bin}/${EXECUTABLE}`,
    content: executable,
    mode: 0o755,
    mtime,
  });
  for (const c of commands)
    files.set(`${bin}/${c}`, { name: `${bin}/${c}`, type: 'symlink', linkname: EXECUTABLE, mtime });
  for (const d of dataDirs) {
    const name = d.slice(1);
    files.set(name, {
      name,
      type: 'directory',
      mode: 0o755,
      uid: IMAGE_USER.uid,
      gid: IMAGE_USER.gid,
      mtime,
    });
  }
  const layers = [
    layer(
      await buildTar(base.entries),
      `Debian ${base.packages.map((p) => `${p.name} ${p.version}`).join(', ')}: the shared libraries the runtime loads, CA certificates, user ${IMAGE_USER.name} (${IMAGE_USER.uid})`,
    ),
    layer(
      await buildTar(withParents(files, mtime)),
      `${EXECUTABLE} ${o.version} (${o.revision}) on Node.js ${runtime.version}, linked as ${commands.join(', ')}`,
    ),
  ];
  return {
    platform,
    layers,
    debian: base.packages,
    runtime: { name: runtime.package, version: runtime.version },
  };
}

function annotations(o: BuildOptions, image: ImageDefinition): Record<string, string> {
  return {
    'org.opencontainers.image.created': o.created.toISOString(),
    'org.opencontainers.image.description': image.description,
    'org.opencontainers.image.licenses': 'Apache-2.0',
    'org.opencontainers.image.revision': o.revision,
    ...(o.source !== undefined && { 'org.opencontainers.image.source': o.source }),
    'org.opencontainers.image.title': image.title,
    'org.opencontainers.image.version': o.version,
  };
}

function platformManifest(
  o: BuildOptions,
  image: ImageDefinition,
  pl: PlatformLayers,
): { config: Blob; manifest: Blob; descriptor: Descriptor } {
  const created = o.created.toISOString();
  const labels = annotations(o, image);
  const config = jsonBlob(MEDIA_TYPE.ociConfig, {
    created,
    architecture: pl.platform.architecture,
    os: 'linux',
    config: {
      User: `${IMAGE_USER.uid}:${IMAGE_USER.gid}`,
      Env: [
        `PATH=${BIN_DIR}:/usr/bin:/bin`,
        `HOME=${IMAGE_USER.home}`,
        `SSL_CERT_FILE=${CA_BUNDLE_PATH}`,
        // Node trusts the image's CA bundle (mount another over it) as well as its own roots.
        'NODE_USE_SYSTEM_CA=1',
      ],
      Cmd: image.cmd,
      WorkingDir: '/',
      ...(image.ports.length > 0 && {
        ExposedPorts: Object.fromEntries(image.ports.map((p) => [`${p}/tcp`, {}])),
      }),
      Labels: labels,
    },
    rootfs: { type: 'layers', diff_ids: pl.layers.map((l) => l.diffId) },
    history: pl.layers.map((l) => ({ created, created_by: l.createdBy })),
  });
  const manifest = manifestBlob(
    config,
    pl.layers.map((l) => l.blob),
    { annotations: labels },
  );
  return {
    config,
    manifest,
    descriptor: { ...manifest.descriptor, platform: { architecture: pl.platform.architecture, os: 'linux' } },
  };
}

export async function buildImages(o: BuildOptions): Promise<BuiltImageSummary[]> {
  const log = o.log ?? (() => {});
  const images = o.images ?? IMAGES;
  const commands = listCommands(o.root);
  for (const image of images) {
    const missing = image.requires.filter((c) => !commands.includes(c));
    if (missing.length > 0)
      throw new ImageBuildError(
        'MISSING_COMMAND',
        `dist/bin/${EXECUTABLE} lacks ${missing.join(', ')}, which the ${image.name} image runs`,
      );
  }
  log(`single executable for the images: dist/sea/${EXECUTABLE}.sea.json without the code cache`);
  const seaBlob = imageBlob(join(o.root, 'dist/sea'), EXECUTABLE);
  const dataDirs = [...new Set(IMAGES.flatMap((i) => i.dataDirs))].sort();
  const perPlatform: PlatformLayers[] = [];
  for (const platform of o.platforms)
    perPlatform.push(await platformLayers(o, platform, seaBlob, commands, dataDirs));

  const npm = npmPackagesFromLockfile(o.root);
  const debian = new Map<string, DebianPackage>();
  for (const pl of perPlatform) for (const d of pl.debian) debian.set(`${d.name}:${d.architecture}`, d);

  mkdirSync(o.outDir, { recursive: true });
  const writer = new LayoutWriter();
  const summaries: BuiltImageSummary[] = [];
  for (const image of images) {
    const blobs: Blob[] = [];
    const platforms: PlatformImage[] = [];
    const descriptors: Descriptor[] = [];
    for (const pl of perPlatform) {
      const m = platformManifest(o, image, pl);
      blobs.push(...pl.layers.map((l) => l.blob), m.config, m.manifest);
      descriptors.push(m.descriptor);
      platforms.push({
        architecture: pl.platform.architecture,
        manifestDigest: m.manifest.descriptor.digest,
        compressedBytes: pl.layers.reduce((n, l) => n + l.blob.descriptor.size, 0),
        uncompressedBytes: pl.layers.reduce((n, l) => n + l.uncompressedBytes, 0),
      });
    }
    const index = indexBlob(descriptors, annotations(o, image));
    blobs.push(index);
    const layout = join(o.outDir, image.name);
    rmSync(layout, { recursive: true, force: true });
    writer.write(layout, blobs, [{ ...index.descriptor, annotations: { [REF_NAME]: o.version } }]);

    // The SBOM, as a file and as a referrer of the index.
    const sbomDoc = spdxDocument({
      image: image.name,
      version: o.version,
      revision: o.revision,
      created: o.created.toISOString(),
      indexDigest: index.descriptor.digest,
      npm,
      runtimes: perPlatform.map((pl) => ({ ...pl.runtime, architecture: pl.platform.architecture })),
      debian: [...debian.values()],
    });
    const sbomBytes = Buffer.from(`${JSON.stringify(sbomDoc, null, 2)}\n`);
    const sbomPath = join(o.outDir, `${image.name}.spdx.json`);
    writeFileSync(sbomPath, sbomBytes);
    const sbomLayer = blob(SPDX_MEDIA_TYPE, sbomBytes, {
      annotations: { 'org.opencontainers.image.title': posix.basename(sbomPath) },
    });
    const referrer = manifestBlob(EMPTY_CONFIG, [sbomLayer], {
      artifactType: SPDX_MEDIA_TYPE,
      subject: index.descriptor,
      annotations: { 'org.opencontainers.image.created': o.created.toISOString() },
    });
    const referrers = indexBlob([{ ...referrer.descriptor, artifactType: SPDX_MEDIA_TYPE }]);
    const attached: Blob[] = [EMPTY_CONFIG, sbomLayer, referrer, referrers];
    const entries: Descriptor[] = [
      { ...referrers.descriptor, annotations: { [REF_NAME]: `sha256-${index.descriptor.digest.slice(7)}` } },
    ];
    const signatures: string[] = [];
    if (o.signingKey !== undefined) {
      const reference = `${o.repositoryPrefix}/${image.name}`;
      for (const digest of [index.descriptor.digest, ...platforms.map((p) => p.manifestDigest)]) {
        const sig = signatureManifest(o.signingKey, reference, digest);
        attached.push(...sig.blobs, sig.manifest);
        entries.push(signatureEntry(sig));
        signatures.push(sig.tag);
      }
    }
    const attachedLayout = join(o.outDir, `${image.name}.attached`);
    rmSync(attachedLayout, { recursive: true, force: true });
    writer.write(attachedLayout, attached, entries);

    summaries.push({
      name: image.name,
      layout: image.name,
      reference: `${o.repositoryPrefix}/${image.name}:${o.version}`,
      indexDigest: index.descriptor.digest,
      platforms,
      sbom: posix.basename(sbomPath),
      sbomPackages: (sbomDoc.packages as unknown[]).length - 1,
      signatures,
    });
    log(`  ${image.name}: ${index.descriptor.digest}`);
  }
  writeFileSync(join(o.outDir, 'images.json'), `${JSON.stringify(summaries, null, 2)}\n`);
  return summaries;
}
