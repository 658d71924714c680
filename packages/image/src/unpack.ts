/**
 * Applies layer tar streams to a root filesystem folder, one layer after the
 * other, with the OCI whiteout rules, never writing outside the root.
 *
 * - Entry names are archive paths: a leading `/` or `./` is dropped, and a
 *   `..` component is an error (`Illegal entry name in the layer tar`).
 * - Parent folders are resolved component by component; a symlink met on the
 *   way is followed as if the root were `/` (an absolute target starts again
 *   at the root, `..` stops at it), so no symlink, planted by this or an
 *   earlier layer, leads out. The last component is never followed: it is
 *   replaced.
 * - Hard links must point at an existing non-folder inside the root.
 * - Device nodes and FIFOs are skipped (Node cannot create them, and the
 *   container runtime provides `/dev`); they are counted in the result.
 * - Ownership is applied only when running as root; otherwise setuid and
 *   setgid bits are dropped, since the files belong to the unpacking user.
 * - `.wh.<name>` removes `<name>` from lower layers only; `.wh..wh..opq`
 *   hides every lower child of its folder, wherever it appears in the
 *   layer. Neither marker is written. Other `.wh..wh.` names (AUFS
 *   metadata) are ignored.
 * - Folder modes and times are applied after the last layer, deepest first,
 *   so that read-only folders can still be filled.
 *
 * Only this process writes into the root while unpacking (a fresh folder),
 * so checks and the operations they guard are not raced by another writer.
 */

import { constants } from 'node:fs';
import {
  chmod,
  chown,
  lchown,
  link,
  lstat,
  lutimes,
  mkdir,
  open,
  readdir,
  readlink,
  rm,
  symlink,
  unlink,
  utimes,
} from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { ImageError, type ImageErrorCode } from './errors.js';

/** Why a layer could not be unpacked; messages follow image-rs' `UnpackError`. */
export class UnpackError extends ImageError {
  override readonly code: ImageErrorCode = 'UNPACK_FAILED';
  override readonly name: string = 'UnpackError';
}

export interface TarEntryHeader {
  readonly name: string;
  readonly type: string | null;
  readonly mode?: number;
  readonly uid?: number;
  readonly gid?: number;
  readonly mtime?: Date;
  readonly linkname?: string | null;
  readonly size?: number;
}

export interface UnpackStats {
  files: number;
  directories: number;
  symlinks: number;
  hardlinks: number;
  whiteouts: number;
  /** Device nodes, FIFOs and unknown entry types that were not created. */
  skipped: number;
  /** Bytes of file content written. */
  bytes: number;
}

const WHITEOUT_PREFIX = '.wh.';
const WHITEOUT_OPAQUE = '.wh..wh..opq';
const WHITEOUT_META_PREFIX = '.wh..wh.';
/** The process umask, read once (files are created with their final mode when it does not interfere). */
const UMASK = process.umask();
/** Files up to this size are read whole and written in the background. */
const SMALL_FILE_BYTES = 256 * 1024;
/** Background file writes at a time (memory: at most this many small files). */
const BACKGROUND_WRITES = 16;
const OWN_UID = process.getuid?.() ?? -1;
const OWN_GID = process.getgid?.() ?? -1;
/** Symlinks followed while resolving one path (Linux's limit is 40; this is generous). */
const MAX_SYMLINK_FOLLOWS = 255;

function errnoCode(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | undefined)?.code;
}

async function lstatOrUndefined(p: string) {
  try {
    return await lstat(p);
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return undefined;
    throw e;
  }
}

/** The components of an archive path; throws on `..`. */
export function entryComponents(name: string): string[] {
  const parts = name.split('/').filter((c) => c !== '' && c !== '.');
  if (parts.includes('..')) throw new UnpackError(`Illegal entry name in the layer tar: ${name}`);
  return parts;
}

interface DirFinish {
  mode: number;
  mtime: Date | undefined;
}

/**
 * Unpacks layers into `root`, which must exist. Call `applyLayer` for each
 * layer in order, then `finish()`.
 */
export class RootfsUnpacker {
  readonly root: string;
  readonly stats: UnpackStats = {
    files: 0,
    directories: 0,
    symlinks: 0,
    hardlinks: 0,
    whiteouts: 0,
    skipped: 0,
    bytes: 0,
  };
  readonly #asRoot: boolean;
  /** Folder modes and times applied at the end (relative physical path → values). */
  readonly #dirs = new Map<string, DirFinish>();
  /** Relative physical paths written by the current layer, and their ancestors. */
  #layerPaths = new Set<string>();
  #layerAncestors = new Set<string>();
  /** Resolved parents of the current layer (logical relative path → physical relative path). */
  #resolved = new Map<string, string>();

  constructor(root: string, options: { preserveOwnership?: boolean } = {}) {
    this.root = root;
    this.#asRoot = options.preserveOwnership ?? process.getuid?.() === 0;
  }

  /** Applies one layer's tar entries (from tar-stream's extract). Throws `UnpackError`. */
  async applyLayer(entries: AsyncIterable<Readable & { header: TarEntryHeader }>): Promise<void> {
    this.#layerPaths = new Set();
    this.#layerAncestors = new Set();
    this.#resolved = new Map();
    try {
      for await (const entry of entries) {
        try {
          await this.#entry(entry.header, entry);
        } finally {
          // Whatever happened, the entry's bytes must be consumed for the archive to go on.
          if (!entry.readableEnded) entry.resume();
        }
      }
    } finally {
      // Even on failure: no write may still be running when the caller removes the root.
      await this.#settle();
    }
    await this.#drain();
  }

  /**
   * Small files are written in the background, a few at a time, while the
   * archive goes on: on a slow filesystem each file costs several system
   * calls, and they overlap. Anything that could observe or touch a file
   * still being written waits for all of them first (`#drain`).
   */
  #pending = new Map<string, Promise<void>>();
  #failure: unknown;

  async #settle(): Promise<void> {
    await Promise.allSettled(this.#pending.values());
  }

  async #drain(): Promise<void> {
    await this.#settle();
    if (this.#failure !== undefined) {
      const f = this.#failure;
      this.#failure = undefined;
      throw f;
    }
  }

  async #background(rel: string, job: () => Promise<void>): Promise<void> {
    while (this.#pending.size >= BACKGROUND_WRITES) await Promise.race(this.#pending.values());
    if (this.#failure !== undefined) await this.#drain();
    const p = job()
      .catch((e: unknown) => {
        this.#failure ??= e;
      })
      .finally(() => this.#pending.delete(rel));
    this.#pending.set(rel, p);
  }

  /** True when `rel` or one of its parent folders is being written in the background. */
  #busy(rel: string): boolean {
    if (this.#pending.size === 0) return false;
    let p = rel;
    for (;;) {
      if (this.#pending.has(p)) return true;
      const slash = p.lastIndexOf('/');
      if (slash < 0) return false;
      p = p.slice(0, slash);
    }
  }

  /** Applies the deferred folder modes and times, deepest first. */
  async finish(): Promise<void> {
    const dirs = [...this.#dirs.entries()].sort((a, b) => b[0].length - a[0].length);
    for (const [rel, d] of dirs) {
      const p = join(this.root, rel);
      const st = await lstatOrUndefined(p);
      if (st === undefined || !st.isDirectory()) continue;
      await this.#io(() => chmod(p, d.mode), rel);
      if (d.mtime !== undefined) {
        const t = d.mtime;
        await this.#io(() => utimes(p, t, t), rel);
      }
    }
    this.#dirs.clear();
  }

  async #io<T>(op: () => Promise<T>, what: string): Promise<T> {
    try {
      return await op();
    } catch (e) {
      if (e instanceof UnpackError) throw e;
      throw new UnpackError(`Failed to unpack layer to destination (${what}: ${(e as Error).message})`, {
        cause: e,
      });
    }
  }

  #mark(rel: string): void {
    this.#layerPaths.add(rel);
    let p = rel;
    for (;;) {
      const slash = p.lastIndexOf('/');
      if (slash < 0) break;
      p = p.slice(0, slash);
      if (this.#layerAncestors.has(p)) break;
      this.#layerAncestors.add(p);
    }
  }

  /**
   * The physical relative path of the folder `components` name, resolved
   * inside the root; missing folders are created when `create` is set.
   */
  async #resolveDir(components: readonly string[], create: boolean): Promise<string | undefined> {
    const logical = components.join('/');
    const hit = this.#resolved.get(logical);
    if (hit !== undefined) return hit;
    const current: string[] = [];
    const queue = [...components];
    let follows = 0;
    while (queue.length > 0) {
      const c = queue.shift() as string;
      if (c === '' || c === '.') continue;
      if (c === '..') {
        current.pop();
        continue;
      }
      const rel = [...current, c].join('/');
      const p = join(this.root, rel);
      const st = await this.#io(() => lstatOrUndefined(p), rel);
      if (st === undefined) {
        if (!create) return undefined;
        await this.#io(() => mkdir(p, { mode: 0o755 }), rel);
        this.#mark(rel);
        this.#dirs.set(rel, { mode: 0o755, mtime: undefined });
        current.push(c);
        continue;
      }
      if (st.isSymbolicLink()) {
        if (++follows > MAX_SYMLINK_FOLLOWS)
          throw new UnpackError(
            `Failed to unpack layer to destination (${logical}: too many levels of symbolic links)`,
          );
        const target = await this.#io(() => readlink(p), rel);
        if (target.startsWith('/')) current.length = 0;
        queue.unshift(...target.split('/'));
        continue;
      }
      if (!st.isDirectory()) {
        throw new UnpackError(`Failed to unpack layer to destination (${rel}: not a directory)`);
      }
      current.push(c);
    }
    const resolved = current.join('/');
    this.#resolved.set(logical, resolved);
    return resolved;
  }

  /** Removes what is at `rel` (a folder recursively). */
  async #remove(rel: string): Promise<void> {
    this.#resolved.clear();
    await this.#io(() => rm(join(this.root, rel), { recursive: true, force: true }), rel);
  }

  /** Removes what lower layers left at `rel`, keeping what this layer wrote. */
  async #removeLower(rel: string): Promise<void> {
    if (!this.#layerPaths.has(rel) && !this.#layerAncestors.has(rel)) {
      await this.#remove(rel);
      return;
    }
    const p = join(this.root, rel);
    const st = await this.#io(() => lstatOrUndefined(p), rel);
    if (st === undefined || !st.isDirectory()) return;
    for (const child of await this.#io(() => readdir(p), rel)) await this.#removeLower(`${rel}/${child}`);
  }

  async #entry(h: TarEntryHeader, content: Readable): Promise<void> {
    const components = entryComponents(h.name);
    const base = components.at(-1);
    if (base === undefined) return; // The layer root: the rootfs folder keeps its own attributes.
    const parentComponents = components.slice(0, -1);
    // AUFS bookkeeping (`.wh..wh.plnk/…`) is not content.
    if (parentComponents.some((c) => c.startsWith(WHITEOUT_META_PREFIX))) return;

    if (base.startsWith(WHITEOUT_PREFIX)) {
      await this.#drain();
      this.stats.whiteouts++;
      const parent = await this.#resolveDir(parentComponents, true);
      if (parent === undefined) return;
      if (base === WHITEOUT_OPAQUE) {
        const dir = parent === '' ? this.root : join(this.root, parent);
        if (parent !== '') this.#mark(parent);
        for (const child of await this.#io(() => readdir(dir), parent)) {
          await this.#removeLower(parent === '' ? child : `${parent}/${child}`);
        }
        return;
      }
      if (base.startsWith(WHITEOUT_META_PREFIX)) return;
      const name = base.slice(WHITEOUT_PREFIX.length);
      if (name === '' || name === '.' || name === '..') {
        throw new UnpackError(`Convert whiteout file failed: invalid whiteout ${h.name}`);
      }
      await this.#removeLower(parent === '' ? name : `${parent}/${name}`);
      return;
    }

    const small = (h.type === 'file' || h.type === 'contiguous-file') && (h.size ?? 0) <= SMALL_FILE_BYTES;
    if (!small) await this.#drain();
    let parent = await this.#resolveDir(parentComponents, true);
    if (parent === undefined) return;
    if (small && this.#busy(parent === '' ? base : `${parent}/${base}`)) {
      await this.#drain();
      parent = await this.#resolveDir(parentComponents, true);
      if (parent === undefined) return;
    }
    const rel = parent === '' ? base : `${parent}/${base}`;
    const target = join(this.root, rel);
    const mode = this.#mode(h.mode ?? 0o644);
    if (small) {
      const chunks: Buffer[] = [];
      for await (const c of content) chunks.push(c as Buffer);
      const data = Buffer.concat(chunks);
      this.#mark(rel);
      this.stats.files++;
      await this.#background(rel, () => this.#writeFile(target, rel, [data], h, mode));
      return;
    }
    switch (h.type) {
      case 'directory': {
        // A folder over a folder keeps the lower contents; anything else there is replaced.
        await this.#createReplacing(
          rel,
          () => mkdir(target, { mode: this.#asRoot ? mode : mode | 0o700 }),
          true,
        );
        await this.#own(target, h, rel, false);
        this.#dirs.set(rel, { mode, mtime: h.mtime });
        this.#mark(rel);
        this.stats.directories++;
        return;
      }
      case 'file':
      case 'contiguous-file':
      case null: {
        if (h.type === null) {
          // An unknown type flag: skip it as tar does, but its data is consumed by the caller.
          this.stats.skipped++;
          return;
        }
        await this.#writeFile(target, rel, content, h, mode);
        this.#mark(rel);
        this.stats.files++;
        return;
      }
      case 'symlink': {
        const linkname = h.linkname ?? '';
        if (linkname === '')
          throw new UnpackError(`Illegal entry name in the layer tar: symlink ${h.name} without a target`);
        await this.#createReplacing(rel, () => symlink(linkname, target));
        await this.#own(target, h, rel, true);
        if (h.mtime !== undefined) {
          const t = h.mtime;
          await this.#io(() => lutimes(target, t, t), rel);
        }
        this.#resolved.clear();
        this.#mark(rel);
        this.stats.symlinks++;
        return;
      }
      case 'link': {
        const source = await this.#hardlinkSource(h);
        if (source === rel) return;
        await this.#createReplacing(rel, () => link(join(this.root, source), target));
        this.#mark(rel);
        this.stats.hardlinks++;
        return;
      }
      default:
        // character-device, block-device, fifo: see the module comment.
        this.stats.skipped++;
        return;
    }
  }

  /**
   * Runs `create`; when something is already at `rel`, removes it (a folder
   * recursively, unless `keepDir` and it is one) and runs `create` again.
   * Trying first saves a lookup per entry in the common case (nothing there).
   */
  async #createReplacing<T>(rel: string, create: () => Promise<T>, keepDir = false): Promise<T | undefined> {
    try {
      return await create();
    } catch (e) {
      if (errnoCode(e) !== 'EEXIST') {
        throw new UnpackError(`Failed to unpack layer to destination (${rel}: ${(e as Error).message})`, {
          cause: e,
        });
      }
    }
    const st = await this.#io(() => lstatOrUndefined(join(this.root, rel)), rel);
    if (keepDir && st?.isDirectory()) return undefined;
    if (st !== undefined) await this.#replace(st.isDirectory(), rel);
    return this.#io(create, rel);
  }

  async #replace(isDir: boolean, rel: string): Promise<void> {
    this.#resolved.clear();
    if (isDir) await this.#remove(rel);
    else await this.#io(() => unlink(join(this.root, rel)), rel);
  }

  async #hardlinkSource(h: TarEntryHeader): Promise<string> {
    const linkname = h.linkname ?? '';
    const components = entryComponents(linkname);
    const base = components.at(-1);
    if (base === undefined)
      throw new UnpackError(`Illegal entry name in the layer tar: hard link ${h.name} to ${linkname}`);
    const parent = await this.#resolveDir(components.slice(0, -1), false);
    const rel = parent === undefined ? undefined : parent === '' ? base : `${parent}/${base}`;
    const st =
      rel === undefined ? undefined : await this.#io(() => lstatOrUndefined(join(this.root, rel)), rel);
    if (rel === undefined || st === undefined) {
      throw new UnpackError(
        `Failed to unpack layer to destination (hard link ${h.name}: target ${linkname} does not exist)`,
      );
    }
    if (st.isDirectory())
      throw new UnpackError(`Illegal entry name in the layer tar: hard link ${h.name} to a directory`);
    return rel;
  }

  #mode(mode: number): number {
    const m = mode & 0o7777;
    return this.#asRoot ? m : m & ~0o6000;
  }

  async #own(path: string, h: TarEntryHeader, rel: string, isLink: boolean): Promise<void> {
    if (!this.#asRoot) return;
    const uid = h.uid ?? 0;
    const gid = h.gid ?? 0;
    await this.#io(() => (isLink ? lchown(path, uid, gid) : chown(path, uid, gid)), rel);
  }

  async #writeFile(
    target: string,
    rel: string,
    content: AsyncIterable<unknown> | Iterable<Buffer>,
    h: TarEntryHeader,
    mode: number,
  ): Promise<void> {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
    // Created with its final permissions when the umask leaves them alone (no setuid, setgid or sticky).
    const direct = (mode & 0o7777) === (mode & 0o777 & ~UMASK);
    const fh = await this.#createReplacing(rel, () => open(target, flags, direct ? mode : 0o600));
    if (fh === undefined)
      throw new UnpackError(`Failed to unpack layer to destination (${rel}: not created)`);
    try {
      await this.#io(async () => {
        for await (const chunk of content) {
          const b = chunk as Buffer;
          let off = 0;
          while (off < b.byteLength) off += (await fh.write(b, off)).bytesWritten;
          this.stats.bytes += b.byteLength;
        }
      }, rel);
      const uid = h.uid ?? 0;
      const gid = h.gid ?? 0;
      // chown first: it clears setuid bits, which chmod then sets.
      if (this.#asRoot && (uid !== OWN_UID || gid !== OWN_GID)) await this.#io(() => fh.chown(uid, gid), rel);
      if (!direct) await this.#io(() => fh.chmod(mode), rel);
      if (h.mtime !== undefined) {
        const t = h.mtime;
        await this.#io(() => fh.utimes(t, t), rel);
      }
    } finally {
      await fh.close();
    }
  }
}
