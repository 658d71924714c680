// trustee's LocalJson backend (`[storage_backend.backends.local_json] file_dir_path`): one JSON file per
// namespace, `<file_dir_path>/<namespace>`, holding `{"<key>": "<URL-safe base64 of the value>"}`, the
// layout trustee reads and writes, so a trustee directory keeps working. Every change rewrites the whole
// file atomically (temp file in the same directory, fsync, rename, fsync of the directory), one change
// at a time per namespace; a reader or a crash sees the old or the new file, never a partial one. A delete
// on a full volume, which has no room for the new copy, overwrites the file in place instead.
// The file is rewritten whole by this process, so it is not shared with other processes (workers).
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, mkdir, open, readdir, rename, unlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { KvStorageError } from './errors.js';
import type { KvStorage, Namespace, SetOptions } from './types.js';

/** trustee's default `[storage_backend.backends.local_json] file_dir_path`. */
export const DEFAULT_LOCAL_JSON_DIR = '/opt/confidential-containers/storage/local_json';
/** A namespace file larger than this is refused rather than parsed (it is rewritten whole on each change). */
export const MAX_LOCAL_JSON_FILE_BYTES = 64 * 1024 * 1024;
const MAX_KEY_LENGTH = 1024;
/** The name `store` gives its temp file: `.<namespace>.<16 hex digits>.tmp`. */
const TEMP_FILE_RE = /^\.[a-z_]+\.[0-9a-f]{16}\.tmp$/;

export interface LocalJsonOptions {
  /** Directory of the namespace files. */
  readonly dirPath: string;
  /** fsync on write. Default true. */
  readonly fsync?: boolean;
}

export class LocalJsonStorageError extends KvStorageError {
  override readonly name: string = 'LocalJsonStorageError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('LOCAL_JSON_FAILED', message, options);
  }
}

function errno(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e
    ? String((e as { code: unknown }).code)
    : undefined;
}

const B64URL_RE = /^[A-Za-z0-9_-]*={0,2}$/;

function decodeValue(file: string, key: string, v: unknown): Uint8Array {
  // A JSON document written by hand (trustee-operator mounts `{"<name>": {"expiration", "value"}}` as
  // the RVPS's file) is its own JSON text; the reader of the namespace decides what it means.
  if (v !== null && typeof v === 'object') return new Uint8Array(Buffer.from(JSON.stringify(v), 'utf8'));
  // trustee writes URL-safe base64 with padding; accept it without padding too.
  if (typeof v !== 'string' || !B64URL_RE.test(v) || v.replace(/=+$/, '').length % 4 === 1) {
    throw new LocalJsonStorageError(`${file}: the value of ${JSON.stringify(key)} is not URL-safe base64`);
  }
  return new Uint8Array(Buffer.from(v, 'base64url'));
}

function listEntries(file: string, list: unknown[]): Map<string, unknown> {
  const entries = new Map<string, unknown>();
  list.forEach((item, i) => {
    const name =
      item !== null && typeof item === 'object' ? (item as Record<string, unknown>).name : undefined;
    if (typeof name !== 'string' || name === '') {
      throw new LocalJsonStorageError(`${file}: list entry ${i} is not an object with a "name"`);
    }
    entries.set(name, item);
  });
  return entries;
}

function encodeValue(value: Uint8Array): string {
  const s = Buffer.from(value).toString('base64url');
  return s + '='.repeat((4 - (s.length % 4)) % 4);
}

function checkKey(key: string): void {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
    throw new LocalJsonStorageError(`storage key must have 1 to ${MAX_KEY_LENGTH} characters`);
  }
}

export class LocalJsonStorage implements KvStorage {
  private readonly dir: string;
  private readonly fsync: boolean;
  /** The tail of each namespace's chain of changes: one read-modify-write at a time. */
  private readonly queues = new Map<Namespace, Promise<unknown>>();
  /** A namespace file being overwritten in place (a delete on a full volume): reads wait for it. */
  private readonly overwriting = new Map<Namespace, Promise<void>>();

  private constructor(options: LocalJsonOptions) {
    this.dir = resolve(options.dirPath);
    this.fsync = options.fsync ?? true;
  }

  /** Opens (creating when missing) the directory. */
  static async open(options: LocalJsonOptions): Promise<LocalJsonStorage> {
    const s = new LocalJsonStorage(options);
    try {
      await mkdir(s.dir, { recursive: true });
    } catch (e) {
      throw new LocalJsonStorageError(`cannot create storage directory ${s.dir}: ${(e as Error).message}`, {
        cause: e,
      });
    }
    s.staleTempFilesRemoved = await s.removeStaleTempFiles();
    return s;
  }

  /** How many crashed writes' temp files `open` removed. */
  staleTempFilesRemoved = 0;

  /**
   * Removes the temp files of rewrites that never finished (the process was killed before the rename):
   * only names of `store`'s own pattern, only regular files, only in the store's directory. The files are
   * written by this process alone, so none of them can be another's write in progress.
   */
  private async removeStaleTempFiles(): Promise<number> {
    let removed = 0;
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return 0;
    }
    for (const name of names) {
      if (!TEMP_FILE_RE.test(name)) continue;
      const p = join(this.dir, name);
      try {
        if (!(await lstat(p)).isFile()) continue;
        await unlink(p);
        removed++;
      } catch {
        // Gone meanwhile, or a read-only volume: leave it.
      }
    }
    return removed;
  }

  /** The file holding a namespace. */
  fileOf(ns: Namespace): string {
    return join(this.dir, ns);
  }

  /** The namespace's entries, still encoded; an absent file is an empty namespace. */
  private async load(ns: Namespace): Promise<Map<string, unknown>> {
    await this.overwriting.get(ns);
    const file = this.fileOf(ns);
    let text: string;
    try {
      const h = await open(file, constants.O_RDONLY);
      try {
        const { size } = await h.stat();
        if (size > MAX_LOCAL_JSON_FILE_BYTES) {
          throw new LocalJsonStorageError(`${file} is larger than ${MAX_LOCAL_JSON_FILE_BYTES} bytes`);
        }
        text = await h.readFile('utf8');
      } finally {
        await h.close();
      }
    } catch (e) {
      if (errno(e) === 'ENOENT') return new Map();
      throw e;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw new LocalJsonStorageError(`${file} is not JSON: ${(e as Error).message}`, { cause: e });
    }
    // A list of records with a `name` (an older RVPS file) is read as the map of its names.
    if (Array.isArray(parsed)) return listEntries(file, parsed);
    if (parsed === null || typeof parsed !== 'object') {
      throw new LocalJsonStorageError(`${file} must hold a JSON object of key → base64 value`);
    }
    return new Map(Object.entries(parsed));
  }

  private async store(ns: Namespace, entries: Map<string, unknown>): Promise<void> {
    const file = this.fileOf(ns);
    const tmp = join(this.dir, `.${ns}.${randomBytes(8).toString('hex')}.tmp`);
    const h = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    let renamed = false;
    try {
      try {
        await h.writeFile(JSON.stringify(Object.fromEntries(entries)));
        if (this.fsync) await h.sync();
      } finally {
        await h.close();
      }
      await rename(tmp, file);
      renamed = true;
    } finally {
      if (!renamed) await unlink(tmp).catch(() => undefined);
    }
    if (this.fsync) {
      const d = await open(this.dir, constants.O_RDONLY | constants.O_DIRECTORY);
      try {
        await d.sync();
      } finally {
        await d.close();
      }
    }
  }

  /**
   * Writes a namespace's entries, smaller than what the file holds, over the file itself: what a delete
   * does when the volume is full, since the atomic rewrite needs room for a second copy. The new text is
   * padded with spaces to the old length (JSON allows them), so the file is valid JSON whether a crash
   * comes before or after the single write; once that is on disk, the file is cut to the new length,
   * which frees the space.
   */
  private async overwriteSmaller(ns: Namespace, entries: Map<string, unknown>, full: unknown): Promise<void> {
    const text = Buffer.from(JSON.stringify(Object.fromEntries(entries)), 'utf8');
    const h = await open(this.fileOf(ns), constants.O_WRONLY);
    try {
      const { size } = await h.stat();
      if (text.length > size) throw full;
      const padded = Buffer.alloc(size, 0x20);
      text.copy(padded);
      await h.write(padded, 0, size, 0);
      await h.sync();
      await h.truncate(text.length);
      if (this.fsync) await h.sync();
    } finally {
      await h.close();
    }
  }

  /** Runs `change` after every earlier change of the namespace has finished, failed or not. */
  private serial<T>(ns: Namespace, change: () => Promise<T>): Promise<T> {
    const run = (this.queues.get(ns) ?? Promise.resolve()).then(change, change);
    const tail = run.catch(() => undefined);
    this.queues.set(ns, tail);
    void tail.then(() => {
      if (this.queues.get(ns) === tail) this.queues.delete(ns);
    });
    return run;
  }

  async get(ns: Namespace, key: string): Promise<Uint8Array | undefined> {
    checkKey(key);
    const entries = await this.load(ns);
    return entries.has(key) ? decodeValue(this.fileOf(ns), key, entries.get(key)) : undefined;
  }

  /** `ttlMs` is not kept: records that expire (sessions) carry their own expiry and are swept by their owner. */
  async set(ns: Namespace, key: string, value: Uint8Array, options: SetOptions = {}): Promise<boolean> {
    checkKey(key);
    return this.serial(ns, async () => {
      const entries = await this.load(ns);
      if (options.overwrite === false && entries.has(key)) return false;
      entries.set(key, encodeValue(value));
      await this.store(ns, entries);
      return true;
    });
  }

  async delete(ns: Namespace, key: string): Promise<boolean> {
    checkKey(key);
    return this.serial(ns, async () => {
      const entries = await this.load(ns);
      if (!entries.delete(key)) return false;
      try {
        await this.store(ns, entries);
      } catch (e) {
        const code = errno(e);
        // No room for the new copy: deleting is how an operator frees space, so it must still work.
        if (code !== 'ENOSPC' && code !== 'EDQUOT') throw e;
        const over = this.overwriteSmaller(ns, entries, e);
        this.overwriting.set(
          ns,
          over.catch(() => undefined),
        );
        try {
          await over;
        } finally {
          this.overwriting.delete(ns);
        }
      }
      return true;
    });
  }

  async list(ns: Namespace): Promise<string[]> {
    return [...(await this.load(ns)).keys()];
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()]);
  }
}
