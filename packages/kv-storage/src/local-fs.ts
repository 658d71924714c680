// Directory storage (trustee's LocalFs `dir_path`, deps/key-value-storage local_fs): each namespace is a
// directory under the root and each key a file in it. As in trustee, a key's `/` separators are written
// as the four characters `\x2F` in one flat file name (`default\x2Fapp\x2Fkey`, the names trustee-operator's
// secret converter makes too), so that trustee and this KBS read each other's storage folders. Nested
// files (`default/app/key`, as a mounted Kubernetes Secret tree or an older release of this KBS lays
// them out) are read, listed and deleted as well; a namespace given its own directory (trustee's old
// `[[plugins]] type = "LocalFs"` resource directory, which was such a tree) is written nested. Writes are
// atomic: a temp file in the target directory, fsync, rename (or link when the key must not be
// overwritten), fsync of the directory — a reader or a crash sees the old or the new value, never a
// partial one.
import { randomBytes } from 'node:crypto';
import { constants, type Dirent } from 'node:fs';
import { link, lstat, open, readdir, readFile, rename, rmdir, stat, unlink } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { makeDirectory } from '@broker/cli';
import { KvStorageError } from './errors.js';
import { keySegments } from './keys.js';
import type { KvStorage, Namespace, SetOptions } from './types.js';

/** trustee's default `[storage_backend.backends.local_fs] dir_path`. */
export const DEFAULT_LOCAL_FS_DIR = '/opt/confidential-containers/storage/local_fs';

/** What trustee's LocalFs writes for each `/` of a key. */
const FLAT_SLASH = '\\x2F';
/** NAME_MAX of common filesystems: a key whose flat name would be longer is written nested. */
const MAX_FILE_NAME_BYTES = 255;
const MAX_LIST_DEPTH = 32;
/** The name `set` gives its temp file, beside the key's file. */
const TEMP_FILE_RE = /^\.[0-9a-f]{16}\.tmp$/;
/**
 * A temp file this old is a crashed write's (killed between creating and renaming it) and is removed at
 * open. Younger ones are left: the tree is shared, and another process (a worker, a replica) may be
 * writing one right now.
 */
export const STALE_TEMP_FILE_MS = 10 * 60 * 1000;

export interface LocalFsOptions {
  /** Root directory; namespace `ns` lives in `<dirPath>/<ns>`. */
  readonly dirPath: string;
  /**
   * Directory of a namespace other than `<dirPath>/<ns>`. Used for trustee's legacy resource plugin
   * (`[[plugins]] type = "LocalFs"`, `dir_path`), whose repository root holds `<repo>/<type>/<tag>`
   * directly.
   */
  readonly namespaceDirs?: Partial<Record<Namespace, string>>;
  /** fsync files and directories on write. Default true; only tests of throughput turn it off. */
  readonly fsync?: boolean;
  /**
   * How keys with `/` are written: `flat` (default, trustee's layout: one file `a\x2Fb\x2Fc`) or `nested`
   * (directories `a/b/c`). Both are always read. The namespaces of `namespaceDirs` are written nested
   * whatever this says, as trustee's old resource directory was.
   */
  readonly layout?: LocalFsLayout;
}

export type LocalFsLayout = 'flat' | 'nested';

export class LocalFsStorageError extends KvStorageError {
  override readonly name: string = 'LocalFsStorageError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('LOCAL_FS_FAILED', message, options);
  }
}

function errno(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e
    ? String((e as { code: unknown }).code)
    : undefined;
}

async function fsyncDir(dir: string): Promise<void> {
  const h = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await h.sync();
  } finally {
    await h.close();
  }
}

export class LocalFsStorage implements KvStorage {
  private readonly root: string;
  private readonly dirs: Partial<Record<Namespace, string>>;
  private readonly fsync: boolean;
  private readonly layout: LocalFsLayout;

  private constructor(options: LocalFsOptions) {
    this.root = resolve(options.dirPath);
    const dirs: Partial<Record<Namespace, string>> = {};
    for (const [ns, d] of Object.entries(options.namespaceDirs ?? {})) {
      if (d !== undefined) dirs[ns as Namespace] = resolve(d);
    }
    this.dirs = dirs;
    this.fsync = options.fsync ?? true;
    this.layout = options.layout ?? 'flat';
  }

  /** Opens (creating when missing) the root directory. */
  static async open(options: LocalFsOptions): Promise<LocalFsStorage> {
    const s = new LocalFsStorage(options);
    try {
      await makeDirectory(s.root);
      for (const d of Object.values(s.dirs)) if (d !== undefined) await makeDirectory(d);
    } catch (e) {
      throw new LocalFsStorageError(
        `cannot create storage directory under ${s.root}: ${(e as Error).message}`,
        {
          cause: e,
        },
      );
    }
    s.staleTempFilesRemoved = await s.removeStaleTempFiles(Date.now() - STALE_TEMP_FILE_MS);
    return s;
  }

  /** How many crashed writes' temp files `open` removed. */
  staleTempFilesRemoved = 0;

  /**
   * Removes the temp files of writes that never finished (the process was killed between creating and
   * renaming one): only names of `set`'s own pattern, only regular files last changed before `before`,
   * only inside the store's directories (never through a symlink or into a hidden directory such as a
   * Kubernetes volume's `..data`). A file that cannot be removed (a read-only volume) is left.
   */
  private async removeStaleTempFiles(before: number): Promise<number> {
    let removed = 0;
    const walk = async (dir: string, depth: number): Promise<void> => {
      let entries: Dirent[];
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const ent of entries) {
        const p = join(dir, ent.name);
        if (ent.isFile() && TEMP_FILE_RE.test(ent.name)) {
          try {
            const st = await lstat(p);
            if (st.isFile() && st.mtimeMs < before) {
              await unlink(p);
              removed++;
            }
          } catch {
            // Gone meanwhile, or a read-only volume: leave it.
          }
        } else if (ent.isDirectory() && !ent.name.startsWith('.') && depth < MAX_LIST_DEPTH) {
          await walk(p, depth + 1);
        }
      }
    };
    const roots = [this.root, ...Object.values(this.dirs)].filter(
      (d, i, all): d is string =>
        d !== undefined && !all.some((o, j) => j !== i && o !== undefined && d.startsWith(o + sep)),
    );
    for (const d of new Set(roots)) await walk(d, 0);
    return removed;
  }

  /** Directory of a namespace. */
  namespaceDir(ns: Namespace): string {
    return this.dirs[ns] ?? join(this.root, ns);
  }

  /** The layout `ns` is written in. */
  layoutOf(ns: Namespace): LocalFsLayout {
    return this.dirs[ns] !== undefined ? 'nested' : this.layout;
  }

  /**
   * The file a key is written to, then the other file it may be found in (a key without `/` has one).
   * InvalidStorageKey for keys that are not plain relative segment paths.
   */
  private pathsOf(ns: Namespace, key: string): { write: string; other: string | undefined } {
    const base = this.namespaceDir(ns);
    const segments = keySegments(key);
    const nested = join(base, ...segments);
    // Defence in depth: the segment rule already excludes every form of traversal.
    if (!nested.startsWith(base + sep))
      throw new LocalFsStorageError(`key ${JSON.stringify(key)} escapes ${base}`);
    if (segments.length === 1) return { write: nested, other: undefined };
    // Segments are ASCII, so characters are bytes.
    const flatName = segments.join(FLAT_SLASH);
    if (flatName.length > MAX_FILE_NAME_BYTES) return { write: nested, other: undefined };
    const flat = join(base, flatName);
    return this.layoutOf(ns) === 'flat' ? { write: flat, other: nested } : { write: nested, other: flat };
  }

  /** Absolute path of the file a key is written to. */
  pathOf(ns: Namespace, key: string): string {
    return this.pathsOf(ns, key).write;
  }

  /** Removes the directories a nested file left empty, up to (not including) the namespace directory. */
  private async pruneEmptyDirs(ns: Namespace, file: string): Promise<void> {
    const base = this.namespaceDir(ns);
    for (let d = dirname(file); d.startsWith(base + sep); d = dirname(d)) {
      try {
        await rmdir(d);
      } catch {
        return; // not empty, a mount point, or read-only: leave it and its parents
      }
    }
  }

  private static async readIfFile(p: string): Promise<Uint8Array | undefined> {
    try {
      return new Uint8Array(await readFile(p));
    } catch (e) {
      const code = errno(e);
      // Absent, a directory, or a path through a file: no such key.
      if (code === 'ENOENT' || code === 'EISDIR' || code === 'ENOTDIR') return undefined;
      throw e;
    }
  }

  async get(ns: Namespace, key: string): Promise<Uint8Array | undefined> {
    const { write, other } = this.pathsOf(ns, key);
    const v = await LocalFsStorage.readIfFile(write);
    if (v !== undefined) return v;
    return other === undefined ? undefined : LocalFsStorage.readIfFile(other);
  }

  private async exists(p: string): Promise<boolean> {
    try {
      return (await stat(p)).isFile();
    } catch (e) {
      const code = errno(e);
      if (code === 'ENOENT' || code === 'ENOTDIR') return false;
      throw e;
    }
  }

  /**
   * `ttlMs` is not kept on disk: records that expire (sessions) carry their own expiry and are swept by
   * their owner, as in trustee.
   */
  async set(ns: Namespace, key: string, value: Uint8Array, options: SetOptions = {}): Promise<boolean> {
    const { write: target, other } = this.pathsOf(ns, key);
    const overwrite = options.overwrite ?? true;
    if (!overwrite && other !== undefined && (await this.exists(other))) return false;
    const dir = dirname(target);
    await makeDirectory(dir);
    const tmp = join(dir, `.${randomBytes(8).toString('hex')}.tmp`);
    const h = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    let wrote = false;
    try {
      try {
        await h.writeFile(value);
        if (this.fsync) await h.sync();
      } finally {
        await h.close();
      }
      if (overwrite) {
        await rename(tmp, target);
        wrote = true;
      } else {
        try {
          // link() fails when the name exists, so create-if-absent is atomic too.
          await link(tmp, target);
          wrote = true;
        } catch (e) {
          if (errno(e) !== 'EEXIST') throw e;
        }
      }
    } finally {
      if (!wrote || !overwrite) await unlink(tmp).catch(() => undefined);
    }
    if (wrote) {
      if (this.fsync) await fsyncDir(dir);
      // A newer write supersedes the key's file in the other layout (a read-only mounted one stays).
      if (other !== undefined) {
        const removed = await unlink(other).then(
          () => true,
          () => false,
        );
        if (removed && this.layoutOf(ns) === 'flat') await this.pruneEmptyDirs(ns, other);
      }
    }
    return wrote;
  }

  async delete(ns: Namespace, key: string): Promise<boolean> {
    let existed = false;
    const { write, other } = this.pathsOf(ns, key);
    // A nested file deleted from a flat namespace may leave directories nothing writes to any more.
    const prunable = this.layoutOf(ns) === 'flat' ? other : undefined;
    for (const p of [write, other]) {
      if (p === undefined) continue;
      try {
        if ((await lstat(p)).isDirectory()) continue;
        await unlink(p);
        existed = true;
        if (this.fsync) await fsyncDir(dirname(p));
        if (p === prunable) await this.pruneEmptyDirs(ns, p);
      } catch (e) {
        const code = errno(e);
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw e;
      }
    }
    return existed;
  }

  /** Another process (a worker, a replica on a shared volume, a mounted file swap) may change the tree. */
  isShared(): boolean {
    return true;
  }

  /** Each key once, whether its file is flat, nested or both. */
  async list(ns: Namespace): Promise<string[]> {
    const keys = new Set<string>();
    const base = this.namespaceDir(ns);
    const walk = async (dir: string, prefix: string, depth: number): Promise<void> => {
      let entries: Dirent[];
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (e) {
        if (errno(e) === 'ENOENT') return;
        throw e;
      }
      for (const ent of entries) {
        // Hidden names: our temp files, and Kubernetes' `..data` / `..<timestamp>` mount internals.
        if (ent.name.startsWith('.')) continue;
        const p = join(dir, ent.name);
        let isDir = ent.isDirectory();
        let isFile = ent.isFile();
        if (ent.isSymbolicLink()) {
          // Secret volumes expose each key as a symlink into `..data`.
          try {
            const st = await stat(p);
            isDir = st.isDirectory();
            isFile = st.isFile();
          } catch {
            continue;
          }
        }
        if (isDir && depth < MAX_LIST_DEPTH) await walk(p, `${prefix}${ent.name}/`, depth + 1);
        else if (isFile) {
          const name = prefix === '' ? ent.name.replaceAll(FLAT_SLASH, '/') : ent.name;
          keys.add(`${prefix}${name}`);
        }
      }
    };
    await walk(base, '', 0);
    return [...keys];
  }

  async close(): Promise<void> {}
}
