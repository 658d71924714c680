/**
 * The CVM-side unsealing step (flow C): before the workload starts, pointers
 * in secret volumes mounted under `/sealed` and in environment values become
 * the secrets they name. The `unseal` callback does the work (normally the
 * data hub's `UnsealSecret`); this module finds the pointers and replaces
 * them.
 *
 * Rules:
 * - A failure never stops the step: the file keeps its pointer text (which
 *   starts with `sealed.`, the spec's observable sign of a failed
 *   attestation), the env value stays as it was, and the outcome is logged
 *   with the pointer's resource URI and `kid`, never with a secret.
 * - Files are replaced atomically: a temporary file in the same folder,
 *   flushed, renamed over the original, then the folder flushed. The owner
 *   is kept; the mode becomes 0600, or the pointer file's mode when that is
 *   stricter (a secret is readable by its owner only).
 * - Every file is read and written relative to its folder held open
 *   (`HeldDir`), never by a path looked up again after the unseal call. After
 *   the call the folder must still be at its path (same real path, same
 *   device and inode) and the pointer file still the one read; otherwise the
 *   pointer is kept. A swap after that check cannot redirect the write
 *   either: it goes into the held folder, wherever that folder now is, so the
 *   plaintext only ever lands next to the pointer it replaces.
 * - Kubernetes' projected layout keeps working: `key -> ..data/key`,
 *   `..data -> ..<timestamp>`; the real file inside `..<timestamp>` is
 *   replaced, the symlinks are untouched. Names starting with `..` are not
 *   walked themselves: they are reached through the user-visible links.
 * - Symlinks are followed only when they resolve inside the root. A link
 *   elsewhere, at the top as well as deeper, is logged and ignored.
 */
import { randomBytes } from 'node:crypto';
import { constants, type Stats } from 'node:fs';
import { lstat, open, readdir, realpath, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { messageOf } from '@broker/cli';
import { SealedSecretError } from './errors.js';
import { FolderMovedError, HeldDir } from './held-dir.js';
import {
  describeSealedSecret,
  MAX_SEALED_SECRET_BYTES,
  type PointerSummary,
  SEALED_SECRET_PREFIX,
} from './pointer.js';

/** Where pointers are mounted (spec: "must be mounted under `/sealed`"). */
export const DEFAULT_SEALED_ROOT = '/sealed';
export const DEFAULT_MAX_ENTRIES = 10_000;
export const DEFAULT_MAX_DEPTH = 16;

/** Turns a pointer into its secret; rejects with a message safe to log. */
export type Unseal = (pointer: string) => Promise<Uint8Array>;

/** pino-compatible. */
export interface StepLogger {
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
  debug?(fields: object, msg: string): void;
}

const silent: StepLogger = { info() {}, warn() {} };

export type FileOutcome = 'unsealed' | 'failed';

export interface FileResult {
  /** The path as found under the root (for a symlink: the link). */
  readonly path: string;
  /** The file whose content was (or would have been) replaced. */
  readonly target: string;
  readonly outcome: FileOutcome;
  readonly kid?: string;
  readonly resource?: string;
  /** Why the pointer was kept. */
  readonly reason?: string;
}

export interface UnsealVolumesOptions {
  readonly unseal: Unseal;
  readonly logger?: StepLogger;
  /** Directory entries looked at in all, at most (default 10 000). */
  readonly maxEntries?: number;
  /** Folder nesting below the root, at most (default 16). */
  readonly maxDepth?: number;
}

/**
 * The pointer inside a file or env value: the text without trailing
 * whitespace. A pointer never contains whitespace; files written with
 * `echo` end with a newline that upstream's CDH would refuse.
 */
export function pointerOf(text: string): string {
  return text.replace(/[\t\n\r ]+$/, '');
}

function summaryFields(summary: PointerSummary): { kid?: string; resource?: string } {
  return {
    ...(summary.kid !== undefined ? { kid: summary.kid } : {}),
    ...(summary.resource !== undefined ? { resource: summary.resource } : {}),
  };
}

function inside(path: string, boundary: string): boolean {
  return path === boundary || path.startsWith(boundary === '/' ? '/' : `${boundary}/`);
}

/** The mode of an unsealed file: 0600, or the pointer file's mode when that is stricter. */
export function unsealedMode(pointerMode: number): number {
  return pointerMode & 0o600;
}

/**
 * Writes `data` over `name` in the held folder atomically, keeping the
 * owner of `original` and giving the mode `unsealedMode(original.mode)`.
 * Refuses when `name` is no longer the file `original` describes. Throws
 * when any step fails; the original is then untouched.
 */
export async function replaceFileAtomic(
  dir: HeldDir,
  name: string,
  data: Uint8Array,
  original: Stats,
): Promise<void> {
  const target = dir.entry(name);
  const tmp = dir.entry(`.${name}.${randomBytes(6).toString('hex')}.unsealing`);
  const handle = await open(
    tmp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    0o600,
  );
  let renamed = false;
  try {
    try {
      await handle.writeFile(data);
      const own = await handle.stat();
      if (own.uid !== original.uid || own.gid !== original.gid)
        await handle.chown(original.uid, original.gid);
      await handle.chmod(unsealedMode(original.mode));
      await handle.sync();
    } finally {
      await handle.close();
    }
    const current = await lstat(target);
    if (current.dev !== original.dev || current.ino !== original.ino) {
      throw new FolderMovedError('the pointer file was replaced');
    }
    await rename(tmp, target);
    renamed = true;
  } finally {
    if (!renamed) await unlink(tmp).catch(() => {});
  }
  // The rename is durable once the folder is flushed; a folder that cannot be flushed keeps the new file anyway.
  await dir.sync();
}

const PREFIX = Buffer.from(SEALED_SECRET_PREFIX);
/** Room for trailing whitespace after the largest pointer. */
const MAX_POINTER_FILE_BYTES = MAX_SEALED_SECRET_BYTES + 4096;

type Read =
  | { kind: 'not-pointer' }
  | { kind: 'pointer'; text: string; stats: Stats }
  | { kind: 'bad'; reason: string };

/** Reads `path` (already resolved) when it is a regular file starting with `sealed.`. */
async function readPointerFile(path: string): Promise<Read> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) return { kind: 'not-pointer' };
    const head = Buffer.alloc(PREFIX.length);
    const { bytesRead } = await handle.read(head, 0, head.length, 0);
    if (bytesRead < PREFIX.length || !head.equals(PREFIX)) return { kind: 'not-pointer' };
    if (stats.size > MAX_POINTER_FILE_BYTES) {
      return { kind: 'bad', reason: `the pointer file is larger than ${MAX_POINTER_FILE_BYTES} bytes` };
    }
    const buf = Buffer.alloc(MAX_POINTER_FILE_BYTES + 1);
    let n = 0;
    for (;;) {
      const r = await handle.read(buf, n, buf.length - n, n);
      if (r.bytesRead === 0) break;
      n += r.bytesRead;
      if (n > MAX_POINTER_FILE_BYTES) {
        return { kind: 'bad', reason: `the pointer file is larger than ${MAX_POINTER_FILE_BYTES} bytes` };
      }
    }
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(0, n));
    } catch {
      return { kind: 'bad', reason: 'the pointer file is not UTF-8' };
    }
    return { kind: 'pointer', text, stats };
  } finally {
    await handle.close();
  }
}

/**
 * Unseals every pointer file below `root`. Resolves with one result per
 * pointer found; never rejects for a file or an unsealing failure (an
 * unreadable root is logged and gives no results).
 */
export async function unsealVolumes(root: string, options: UnsealVolumesOptions): Promise<FileResult[]> {
  const log = options.logger ?? silent;
  const maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
  const results: FileResult[] = [];
  const seenDirs = new Set<string>();
  const seenFiles = new Set<string>();
  let entries = 0;
  let truncated = false;

  let rootReal: string;
  try {
    rootReal = await realpath(root);
  } catch (e) {
    log.info({ root, err: messageOf(e) }, 'no sealed-secret volumes: the root cannot be resolved');
    return results;
  }

  /** Reads the pointer in `name` of the held folder, unseals it, and replaces the file. */
  const unsealFile = async (path: string, target: string, dir: HeldDir, name: string): Promise<void> => {
    let read: Read;
    try {
      read = await readPointerFile(dir.entry(name));
    } catch (e) {
      log.debug?.({ file: path, err: messageOf(e) }, 'file skipped: cannot be read');
      return;
    }
    if (read.kind === 'not-pointer') return;
    if (read.kind === 'bad') {
      results.push({ path, target, outcome: 'failed', reason: read.reason });
      log.warn({ file: path, err: read.reason }, 'sealed secret kept: pointer not usable');
      return;
    }
    const pointer = pointerOf(read.text);
    const summary = summaryFields(describeSealedSecret(pointer));
    let plaintext: Uint8Array;
    try {
      plaintext = await options.unseal(pointer);
    } catch (e) {
      const reason = messageOf(e);
      results.push({ path, target, outcome: 'failed', ...summary, reason });
      log.warn({ file: path, ...summary, err: reason }, 'sealed secret kept: unsealing failed');
      return;
    }
    try {
      // The call may take long: whoever shares the volume had time to move things around.
      await dir.ensureInPlace();
      await replaceFileAtomic(dir, name, plaintext, read.stats);
    } catch (e) {
      const reason =
        e instanceof FolderMovedError
          ? `the file was not replaced: ${e.message} during unsealing`
          : `the file could not be replaced: ${messageOf(e)}`;
      results.push({ path, target, outcome: 'failed', ...summary, reason });
      log.warn({ file: path, ...summary, err: reason }, 'sealed secret kept: the file could not be replaced');
      return;
    } finally {
      plaintext.fill(0);
    }
    results.push({ path, target, outcome: 'unsealed', ...summary });
    log.info({ file: path, ...summary }, 'sealed secret unsealed');
  };

  /** `dirPath` is a real path inside the root; `name` a file in it. */
  const processFile = async (path: string, dirPath: string, name: string): Promise<void> => {
    const target = join(dirPath, name);
    if (seenFiles.has(target)) return;
    seenFiles.add(target);
    let dir: HeldDir;
    try {
      dir = await HeldDir.open(dirPath);
    } catch (e) {
      log.warn({ file: path, err: messageOf(e) }, 'file skipped: its folder cannot be held open');
      return;
    }
    try {
      await unsealFile(path, target, dir, name);
    } finally {
      await dir.close();
    }
  };

  /** `dirPath` is a real path inside the root, `shownDir` the same folder as reached from the root. */
  const walk = async (dirPath: string, shownDir: string, depth: number): Promise<void> => {
    if (seenDirs.has(dirPath)) return;
    seenDirs.add(dirPath);
    if (depth > maxDepth) {
      log.warn({ dir: shownDir, maxDepth }, 'folder skipped: nested too deep');
      return;
    }
    let dir: HeldDir;
    let names: string[];
    try {
      dir = await HeldDir.open(dirPath);
    } catch (e) {
      log.warn({ dir: shownDir, err: messageOf(e) }, 'folder skipped: cannot be read');
      return;
    }
    try {
      try {
        names = (await readdir(dir.fdPath())).sort();
      } catch (e) {
        log.warn({ dir: shownDir, err: messageOf(e) }, 'folder skipped: cannot be read');
        return;
      }
      for (const name of names) {
        if (truncated) return;
        if (++entries > maxEntries) {
          truncated = true;
          log.warn({ root, maxEntries }, 'scan stopped: too many entries');
          return;
        }
        if (name.startsWith('..')) continue;
        const shownPath = join(shownDir, name);
        let st: Stats;
        try {
          st = await lstat(dir.entry(name));
        } catch {
          continue;
        }
        if (st.isDirectory()) {
          await walk(join(dirPath, name), shownPath, depth + 1);
        } else if (st.isFile()) {
          await processFile(shownPath, dirPath, name);
        } else if (st.isSymbolicLink()) {
          let real: string;
          let target: Stats;
          try {
            real = await realpath(dir.entry(name));
            target = await lstat(real);
          } catch {
            log.debug?.({ file: shownPath }, 'dangling symlink skipped');
            continue;
          }
          // Also at the top: a folder linked from elsewhere could be any folder of the guest.
          if (!inside(real, rootReal)) {
            log.warn({ file: shownPath }, 'symlink skipped: it leads out of the volume');
            continue;
          }
          if (target.isDirectory()) await walk(real, shownPath, depth + 1);
          else if (target.isFile()) await processFile(shownPath, dirname(real), basename(real));
        }
      }
    } finally {
      await dir.close();
    }
  };

  await walk(rootReal, root, 0);
  return results;
}

export interface EnvResult {
  readonly key: string;
  readonly outcome: FileOutcome;
  readonly kid?: string;
  readonly resource?: string;
  readonly reason?: string;
}

/**
 * Maps `KEY=value` entries (an OCI process env) to their unsealed form, as
 * kata's `unseal_env`: a value starting with `sealed.` becomes the UTF-8
 * plaintext. On any failure the entry stays unchanged and a warning is
 * logged. A plaintext that is not UTF-8 or holds NUL cannot be an env value
 * and counts as a failure. Entries keep their order.
 */
export async function unsealEnv(
  env: readonly string[],
  options: { readonly unseal: Unseal; readonly logger?: StepLogger; readonly results?: EnvResult[] },
): Promise<string[]> {
  const log = options.logger ?? silent;
  const out: string[] = [];
  for (const entry of env) {
    const eq = entry.indexOf('=');
    const value = eq < 0 ? '' : entry.slice(eq + 1);
    if (eq < 0 || !value.startsWith(SEALED_SECRET_PREFIX)) {
      out.push(entry);
      continue;
    }
    const key = entry.slice(0, eq);
    const pointer = pointerOf(value);
    const summary = summaryFields(describeSealedSecret(pointer));
    let plaintext: Uint8Array | undefined;
    try {
      plaintext = await options.unseal(pointer);
      let text: string;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(plaintext);
      } catch {
        throw new SealedSecretError('the secret is not UTF-8 text', { code: 'SECRET_NOT_TEXT' });
      }
      if (text.includes('\0'))
        throw new SealedSecretError('the secret contains a NUL byte', { code: 'SECRET_NOT_TEXT' });
      out.push(`${key}=${text}`);
      options.results?.push({ key, outcome: 'unsealed', ...summary });
      log.info({ env: key, ...summary }, 'sealed env value unsealed');
    } catch (e) {
      const reason = messageOf(e);
      out.push(entry);
      options.results?.push({ key, outcome: 'failed', ...summary, reason });
      log.warn({ env: key, ...summary, err: reason }, 'sealed env value kept: unsealing failed');
    } finally {
      plaintext?.fill(0);
    }
  }
  return out;
}
