/**
 * containers/image's `dir:` layout: `manifest.json`, blobs named by their hex
 * digest, `version`, and signatures `signature-1`, `signature-2`, … (each a
 * `signature.FromBlob` blob). It is how skopeo stores an image with its
 * signatures on disk, and how containers/image's signature fixtures are kept.
 */

import { createReadStream } from 'node:fs';
import { readFile, realpath, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { digestHex, parseDigest } from './digest.js';
import { ImageError } from './errors.js';
import { goFileError, type PolicyImage } from './evaluate.js';
import { goQuote } from './json.js';
import {
  type DockerReference,
  dockerImageName,
  parseImageReference,
  policyIdentity,
  policyNamespaces,
} from './reference.js';
import { MAX_SIGNATURE_BYTES, signatureFromBlob, type UntrustedSignature } from './sigstore.js';

/** containers/image `iolimits.MaxManifestBodySize`. */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
/** Most signature files read from one image. */
export const MAX_DIR_SIGNATURES = 256;

async function readLimited(path: string, limit: number): Promise<Buffer> {
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch (e) {
    throw new ImageError(goFileError('open', path, e), { code: 'DIR_IMAGE_UNREADABLE' });
  }
  if (size > limit)
    throw new ImageError(`${path} is larger than ${limit} bytes`, { code: 'DIR_IMAGE_UNREADABLE' });
  try {
    return await readFile(path);
  } catch (e) {
    throw new ImageError(goFileError('open', path, e), { code: 'DIR_IMAGE_UNREADABLE' });
  }
}

export interface DirImage extends PolicyImage {
  readonly path: string;
  /** A blob of the image (`<dir>/<hex>`), as a stream. */
  blob(digest: string): Readable;
}

export interface OpenDirImageOptions {
  /**
   * The docker reference the image stands for. With it the image is judged
   * as that reference under the policy's `docker` transport; without it,
   * under `dir` with its absolute path as identity (and identity matchers
   * relative to the image never match, as in containers/image).
   */
  readonly reference?: string | DockerReference;
}

/** Opens a `dir:` image. Reading the manifest and signatures happens when the policy asks for them. */
export async function openDirImage(path: string, options: OpenDirImageOptions = {}): Promise<DirImage> {
  const dir = resolve(path);
  let manifest: Promise<Buffer> | undefined;
  let signatures: Promise<UntrustedSignature[]> | undefined;
  const common = {
    path: dir,
    manifest: () => {
      manifest ??= readLimited(join(dir, 'manifest.json'), MAX_MANIFEST_BYTES);
      return manifest;
    },
    signatures: () => {
      signatures ??= readDirSignatures(dir);
      return signatures;
    },
    blob: (digest: string) => createReadStream(join(dir, digestHex(parseDigest(digest)))),
  };
  if (options.reference !== undefined) {
    const ref =
      typeof options.reference === 'string' ? parseImageReference(options.reference) : options.reference;
    return {
      ...common,
      transport: 'docker',
      policyIdentity: policyIdentity(ref),
      policyNamespaces: policyNamespaces(ref),
      imageName: dockerImageName(ref),
      dockerReference: ref,
    };
  }
  let resolved: string;
  try {
    resolved = await realpath(dir);
  } catch (e) {
    throw new ImageError(goFileError('lstat', dir, e), { code: 'DIR_IMAGE_UNREADABLE' });
  }
  return {
    ...common,
    transport: 'dir',
    policyIdentity: resolved,
    policyNamespaces: dirNamespaces(resolved),
    imageName: `dir:${path}`,
    dockerReference: null,
  };
}

/** The dir transport's namespaces: each parent folder, up to (not including) `/`. */
export function dirNamespaces(resolvedPath: string): string[] {
  const res: string[] = [];
  let p = resolvedPath;
  for (;;) {
    const lastSlash = p.lastIndexOf('/');
    if (lastSlash <= 0) break;
    p = p.slice(0, lastSlash);
    res.push(p);
  }
  return res;
}

async function readDirSignatures(dir: string): Promise<UntrustedSignature[]> {
  const out: UntrustedSignature[] = [];
  for (let i = 1; i <= MAX_DIR_SIGNATURES; i++) {
    const file = join(dir, `signature-${i}`);
    let blob: Buffer;
    try {
      blob = await readFile(file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return out;
      throw new ImageError(goFileError('open', file, e), { code: 'SIGNATURE_UNREADABLE' });
    }
    if (blob.byteLength > MAX_SIGNATURE_BYTES)
      throw new ImageError(`parsing signature ${goQuote(file)}: too large`, { code: 'SIGNATURE_UNREADABLE' });
    try {
      out.push(signatureFromBlob(blob));
    } catch (e) {
      throw new ImageError(`parsing signature ${goQuote(file)}: ${(e as Error).message}`, {
        code: 'SIGNATURE_UNREADABLE',
      });
    }
  }
  throw new ImageError(`more than ${MAX_DIR_SIGNATURES} signatures in ${dir}`, {
    code: 'SIGNATURE_UNREADABLE',
  });
}
