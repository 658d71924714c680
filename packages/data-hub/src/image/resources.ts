/**
 * image-rs' `ResourceProvider` for the image-pull service: the policy, the
 * `keyPath` keys, registry credentials and registry configuration named by
 * URI.
 *
 * - A string without `://` is a local file path; `file://` too.
 * - `kbs://` / `kbs+…://` resources come through the hub's `getResource`
 *   (the KBS, with the hub's cached attestation token), and are kept on disk
 *   as upstream does: `<work_dir>/image-security/kbs/<hex sha256(uri)>`.
 *   A cached copy is used instead of asking the KBS again. Files are written
 *   atomically, mode 0600, in a 0700 folder (upstream writes them with the
 *   default umask).
 * - Any other scheme: ``Resource URI scheme `x` not supported``.
 */

import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DataHubError, GetResourceFailed } from '../errors.js';

/** upstream `STORAGE_PATH`, under the image work dir. */
export const KBS_RESOURCE_CACHE_DIR = 'image-security/kbs';
/** Largest local resource file read. */
export const MAX_LOCAL_RESOURCE_BYTES = 16 * 1024 * 1024;

export class ResourceError extends DataHubError {
  override readonly name: string = 'ResourceError';
  override readonly code = 'RESOURCE_UNAVAILABLE';
}

export interface ResourceProviderOptions {
  /** The image work dir (`[image] work_dir`). */
  readonly workDir: string;
  /** Fetches a `kbs://` resource through the KBS. */
  readonly getResource: (uri: string) => Promise<Uint8Array>;
}

export class ResourceProvider {
  readonly #options: ResourceProviderOptions;
  /** Concurrent requests of one URI share one fetch. */
  readonly #pending = new Map<string, Promise<Uint8Array>>();

  constructor(options: ResourceProviderOptions) {
    this.#options = options;
  }

  /** The cache file of a `kbs://` URI. */
  cachePath(uri: string): string {
    return join(
      this.#options.workDir,
      KBS_RESOURCE_CACHE_DIR,
      createHash('sha256').update(uri).digest('hex'),
    );
  }

  async get(uri: string): Promise<Uint8Array> {
    const full = uri.includes('://') ? uri : `file://${uri}`;
    const scheme = full.slice(0, full.indexOf('://'));
    if (scheme === 'kbs' || scheme.startsWith('kbs+')) return this.#kbs(uri);
    if (scheme === 'file') return this.#file(full.slice('file://'.length));
    throw new ResourceError(`Resource URI scheme \`${scheme}\` not supported`);
  }

  async #file(path: string): Promise<Uint8Array> {
    try {
      const bytes = await readFile(path);
      if (bytes.byteLength > MAX_LOCAL_RESOURCE_BYTES)
        throw new DataHubError(`larger than ${MAX_LOCAL_RESOURCE_BYTES} bytes`, {
          code: 'RESOURCE_UNAVAILABLE',
        });
      return bytes;
    } catch (e) {
      throw new ResourceError(`Failed to read local file: ${path}: ${(e as Error).message}`, { cause: e });
    }
  }

  #kbs(uri: string): Promise<Uint8Array> {
    let p = this.#pending.get(uri);
    if (p === undefined) {
      p = this.#kbsOnce(uri).finally(() => this.#pending.delete(uri));
      this.#pending.set(uri, p);
    }
    return p;
  }

  async #kbsOnce(uri: string): Promise<Uint8Array> {
    const file = this.cachePath(uri);
    try {
      return await readFile(file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new ResourceError(`Get resource failed: reading the cached copy: ${(e as Error).message}`, {
          cause: e,
        });
      }
    }
    let bytes: Uint8Array;
    try {
      bytes = await this.#options.getResource(uri);
    } catch (e) {
      // The hub's own wording ("Get Resource failed: <reason>") would repeat ours.
      const reason = e instanceof GetResourceFailed ? e.reason : (e as Error).message;
      throw new ResourceError(`Get resource failed: ${reason}`, { cause: e });
    }
    const dir = join(this.#options.workDir, KBS_RESOURCE_CACHE_DIR);
    const tmp = join(dir, `.${randomBytes(8).toString('hex')}.tmp`);
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await writeFile(tmp, bytes, { mode: 0o600, flag: 'wx' });
      await rename(tmp, file);
    } catch (e) {
      await rm(tmp, { force: true }).catch(() => undefined);
      throw new ResourceError(`Get resource failed: caching it: ${(e as Error).message}`, { cause: e });
    }
    return bytes;
  }
}
