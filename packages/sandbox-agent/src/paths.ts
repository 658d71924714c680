/**
 * Paths and ids that arrive in requests. Every path the host names (a storage's mount point or source,
 * a container's root, a bind mount's source) must be absolute, spelled without `.` or `..` segments,
 * strictly below one of the agent's roots, and reached without following a symbolic link.
 *
 * `resolveUnder` checks a path's components with lstat and returns the string. What the agent then
 * writes to or mounts is reached through `openUnder` instead: it opens the root and then each component
 * relative to the directory it already holds (`/proc/self/fd/<fd>/<name>` with O_NOFOLLOW), making
 * missing directories the same way. The caller then acts on the held descriptors, so a component that a
 * container swaps for a link after the walk cannot redirect the write or the mount.
 */
import { constants } from 'node:fs';
import {
  type FileHandle,
  lstat,
  mkdir,
  open,
  readdir,
  readFile,
  readlink,
  rmdir,
  unlink,
} from 'node:fs/promises';
import { Code } from '@broker/ttrpc';
import { InvalidRequest, SandboxAgentError } from './errors.js';

const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** A container, exec or sandbox id: one path component of letters, digits, `_`, `.`, `-`. */
export function checkId(id: string, what: string): string {
  if (!ID.test(id))
    throw new InvalidRequest(`invalid ${what} ${shown(id)}: expected [A-Za-z0-9][A-Za-z0-9_.-]*`);
  return id;
}

/** A value for a message: bounded and without control characters. */
export function shown(value: string, max = 200): string {
  const clean = JSON.stringify(value.length > max ? `${value.slice(0, max)}…` : value);
  return clean;
}

export interface ResolveOptions {
  /** What the path is, for messages (`storage mount point`). */
  readonly what: string;
  /** Create missing components as directories (mode 0755). */
  readonly create?: boolean;
  /** The path must already exist. */
  readonly mustExist?: boolean;
  /** The last component may be a symbolic link (the caller replaces it, never follows it). */
  readonly leafMayBeLink?: boolean;
}

/** The root `path` lies strictly below, or undefined. `roots` are canonical absolute paths. */
function rootOf(roots: readonly string[], path: string): string | undefined {
  return roots.find((r) => path.startsWith(r === '/' ? '/' : `${r}/`) && path !== r);
}

/**
 * Checks `requested` against `roots` (canonical, as `realpath` gives them) and returns it. Throws
 * `InvalidRequest` naming the reason: not absolute, a `.`/`..` segment, outside every root, a symbolic
 * link on the way, a non-directory on the way.
 */
export async function resolveUnder(
  roots: readonly string[],
  requested: string,
  options: ResolveOptions,
): Promise<string> {
  const { what } = options;
  const { path, root, below } = spelled(roots, requested, what);
  let at = root;
  for (let i = 0; i < below.length; i++) {
    at = at === '/' ? `/${below[i]}` : `${at}/${below[i]}`;
    const last = i === below.length - 1;
    let st: Awaited<ReturnType<typeof lstat>>;
    try {
      st = await lstat(at);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      if (options.mustExist) throw new InvalidRequest(`${what} ${shown(requested)} does not exist`);
      if (!options.create) return path;
      try {
        await mkdir(at, { mode: 0o755 });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      st = await lstat(at); // a link raced in is still refused below
    }
    if (st.isSymbolicLink() && !(last && options.leafMayBeLink)) {
      throw new InvalidRequest(`${what} ${shown(requested)} goes through a symbolic link (${shown(at)})`);
    }
    if (!last && !st.isDirectory()) {
      throw new InvalidRequest(`${what} ${shown(requested)}: ${shown(at)} is not a directory`);
    }
  }
  return path;
}

/** The requested path, well spelled and strictly below a root: the path, that root and the components below it. */
export function spelled(
  roots: readonly string[],
  requested: string,
  what: string,
): { path: string; root: string; below: string[] } {
  if (requested === '' || requested.includes('\0'))
    throw new InvalidRequest(`${what} is empty or has a NUL byte`);
  if (!requested.startsWith('/'))
    throw new InvalidRequest(`${what} ${shown(requested)} is not an absolute path`);
  const segments = requested.split('/').filter((s) => s !== '');
  if (segments.some((s) => s === '.' || s === '..')) {
    throw new InvalidRequest(`${what} ${shown(requested)} has a "." or ".." segment`);
  }
  const path = `/${segments.join('/')}`;
  const root = rootOf(roots, path);
  if (root === undefined) {
    throw new InvalidRequest(
      `${what} ${shown(requested)} is not below the agent's roots (${roots.join(', ')})`,
    );
  }
  const below = path.slice(root === '/' ? 1 : root.length + 1).split('/');
  return { path, root, below };
}

/**
 * Refuses `path` when it is one of the agent's own paths (its sockets, its state, the data hub's
 * socket) or a directory holding one: a request must not mount, replace or remove them, nor put them
 * in a container's view.
 */
export function checkNotProtected(path: string, protectedPaths: readonly string[], what: string): string {
  for (const p of protectedPaths) {
    if (p === path || p.startsWith(`${path}/`)) {
      throw new InvalidRequest(`${what} ${shown(path)} is or holds the agent's own ${shown(p)}`);
    }
  }
  return path;
}

/**
 * Linux's O_PATH, which Node does not export: the value of the generic ABI (x86-64, arm64, riscv64).
 * An O_PATH descriptor names a file without opening it, so a FIFO or a device is never opened.
 */
const O_PATH = 0o10000000;
/** A directory, never through a link (the last component is not followed; the ones before are held). */
export const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** Any kind of file, the link itself if it is one (then refused after fstat). */
export const ANY_FLAGS = O_PATH | constants.O_NOFOLLOW;

/**
 * `name` inside the directory `dir` holds, or that directory itself. The kernel follows
 * `/proc/self/fd/N` to exactly the directory held (wherever it has been moved since), then looks up
 * `name` there alone; O_NOFOLLOW, lstat, unlink, rmdir, rename and mkdir act on `name` itself.
 */
export function beneath(dir: FileHandle, name?: string): string {
  return name === undefined ? `/proc/self/fd/${dir.fd}` : `/proc/self/fd/${dir.fd}/${name}`;
}

/** The mount a descriptor's file was reached through (`mnt_id` of /proc/self/fdinfo). */
export async function mountIdOf(file: FileHandle): Promise<number> {
  const info = await readFile(`/proc/self/fdinfo/${file.fd}`, 'utf8');
  const m = /^mnt_id:\s*(\d+)$/m.exec(info);
  if (!m) throw new SandboxAgentError(Code.UNKNOWN, `no mnt_id in /proc/self/fdinfo/${file.fd}`);
  return Number(m[1]);
}

export interface HoldOptions {
  /** What the path is, for messages (`storage mount point`). */
  readonly what: string;
  /**
   * What to open at the last component: a `directory`, a `file` (regular), `any` kind but a link, or
   * nothing (`parent`: only the directory holding it, as for a file to be replaced).
   */
  readonly leaf: 'directory' | 'file' | 'any' | 'parent';
  /** Make missing directories (mode 0755), and the last component as `leaf` says (a file empty, 0644). */
  readonly create?: boolean;
}

/** A path opened below a root: the directory holding its last component, and that component itself. */
export class HeldPath {
  constructor(
    /** The path as checked, for messages and as a key (the directories may have moved since). */
    readonly path: string,
    /** The directory holding the last component (the root itself for a path just below it). */
    readonly parent: FileHandle,
    /** The last component. */
    readonly name: string,
    /** The last component opened, unless `leaf` was `parent`. */
    readonly leaf: FileHandle | undefined,
    /** The last component (for a `parent` hold, the parent) was made by this walk. */
    readonly created: boolean,
    /** The parent is the root. */
    readonly parentIsRoot: boolean,
  ) {}

  /** The last component, named through the held parent. */
  get at(): string {
    return beneath(this.parent, this.name);
  }

  /** The opened last component (throws for a `parent` hold, a programming error). */
  get file(): FileHandle {
    if (this.leaf === undefined)
      throw new SandboxAgentError(Code.UNKNOWN, `${this.path} was held by its parent only`);
    return this.leaf;
  }

  async close(): Promise<void> {
    await this.leaf?.close();
    await this.parent.close();
  }
}

/**
 * Checks `requested` as `resolveUnder` does and opens it: the root by its name, then each component in
 * the directory already held, without following a link. A link, a non-directory on the way, a missing
 * component (unless `create`) or a component moved during the walk is refused with `InvalidRequest`.
 * The caller closes the result.
 */
export async function openUnder(
  roots: readonly string[],
  requested: string,
  options: HoldOptions,
): Promise<HeldPath> {
  const { path, root, below } = spelled(roots, requested, options.what);
  // Roots are canonical, so never a link at the end: one there (a share directory swapped) is refused.
  const start = await open(root, DIR_FLAGS).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'ELOOP' && e.code !== 'ENOTDIR') throw e;
    throw new InvalidRequest(
      `${options.what} ${shown(requested)}: the root ${shown(root)} is not a directory`,
    );
  });
  try {
    return await holdBeneath(start, root, below, { ...options, requested, path });
  } finally {
    await start.close();
  }
}

/**
 * Opens `components` below the directory `start` holds (`startPath` names it in messages), as
 * `openUnder` does. `start` stays the caller's.
 */
export async function holdBeneath(
  start: FileHandle,
  startPath: string,
  components: readonly string[],
  options: HoldOptions & { readonly requested?: string; readonly path?: string },
): Promise<HeldPath> {
  const what = options.what;
  const path = options.path ?? [startPath === '/' ? '' : startPath, ...components].join('/');
  const requested = options.requested ?? path;
  const refuse = (why: string) => new InvalidRequest(`${what} ${shown(requested)}${why}`);
  // What is open and not yet handed to the result: closed if the walk fails.
  const opened: FileHandle[] = [];
  // `start` is reopened (the magic link is followed on purpose), so the result owns all it holds.
  let dir = await open(beneath(start), constants.O_RDONLY | constants.O_DIRECTORY);
  opened.push(dir);
  // The held directory's name as the kernel gives it, to check that the next one is inside it.
  let dirName = await readlink(beneath(dir));
  let at = startPath;
  let dirCreated = false;
  try {
    for (let i = 0; i < components.length; i++) {
      const name = components[i]!;
      const last = i === components.length - 1;
      at = at === '/' ? `/${name}` : `${at}/${name}`;
      if (last && options.leaf === 'parent') {
        opened.pop();
        return new HeldPath(path, dir, name, undefined, dirCreated, i === 0);
      }
      const kind = last ? options.leaf : 'directory';
      let created = false;
      let file: FileHandle | undefined;
      for (let attempt = 0; file === undefined; attempt++) {
        try {
          file = await open(beneath(dir, name), kind === 'directory' ? DIR_FLAGS : ANY_FLAGS);
        } catch (e) {
          const code = (e as NodeJS.ErrnoException).code;
          // With O_DIRECTORY, Linux answers a link with ENOTDIR rather than ELOOP.
          const isLink =
            code === 'ELOOP' ||
            (code === 'ENOTDIR' &&
              (await lstat(beneath(dir, name)).catch(() => undefined))?.isSymbolicLink());
          if (isLink) throw refuse(` goes through a symbolic link (${shown(at)})`);
          if (code === 'ENOTDIR') throw refuse(`: ${shown(at)} is not a directory`);
          if (code !== 'ENOENT') throw e;
          if (!options.create || attempt > 0) throw refuse(' does not exist');
          created = await make(dir, name, kind);
        }
      }
      opened.push(file);
      const st = await file.stat();
      if (st.isSymbolicLink()) throw refuse(` goes through a symbolic link (${shown(at)})`);
      if (kind === 'file' && !st.isFile()) throw refuse(`: ${shown(at)} is not a regular file`);
      // Belt and braces: what was opened is `name` in the directory held, not anything moved in or out.
      const expected = dirName === '/' ? `/${name}` : `${dirName}/${name}`;
      const fileName = await readlink(beneath(file));
      if (fileName !== expected) throw refuse(` moved while it was being opened (${shown(at)})`);
      if (last) {
        opened.length = 0;
        return new HeldPath(path, dir, name, file, created, i === 0);
      }
      opened.splice(opened.indexOf(dir), 1);
      await dir.close();
      dir = file;
      dirName = fileName;
      dirCreated = created;
    }
    throw refuse(' has no component below its root');
  } finally {
    for (const f of opened) await f.close();
  }
}

/** Makes `name` in `dir` as `kind`; false when something is already there (then opened and checked). */
async function make(dir: FileHandle, name: string, kind: HoldOptions['leaf']): Promise<boolean> {
  try {
    if (kind === 'file') {
      const f = await open(
        beneath(dir, name),
        constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
        0o644,
      );
      await f.close();
    } else {
      await mkdir(beneath(dir, name), { mode: 0o755 });
    }
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    return false;
  }
}

/** Removes `name` from the directory `dir` holds: a directory with all it holds, anything else unlinked. */
export async function removeEntry(dir: FileHandle, name: string): Promise<void> {
  let child: FileHandle;
  try {
    child = await open(beneath(dir, name), DIR_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    // A link (to a directory or not) or a file: the name goes, what a link points to stays.
    if (code === 'ELOOP' || code === 'ENOTDIR') return unlinkEntry(dir, name);
    throw e;
  }
  try {
    // A mount inside (what another storage set up) is not emptied: rmdir then fails with EBUSY.
    if ((await mountIdOf(child)) === (await mountIdOf(dir))) await emptyHeld(child);
  } finally {
    await child.close();
  }
  await rmdir(beneath(dir, name)).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'ENOENT') throw e;
  });
}

export async function unlinkEntry(dir: FileHandle, name: string): Promise<void> {
  await unlink(beneath(dir, name)).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'ENOENT') throw e;
  });
}

/** Removes all the directory `dir` holds, never following a link. */
async function emptyHeld(dir: FileHandle): Promise<void> {
  for (const name of await readdir(beneath(dir))) await removeEntry(dir, name);
}

/**
 * Removes the directory `held` holds: its contents through the descriptor, then its name in the held
 * parent if that name still is this directory (one moved away is left there, empty).
 */
export async function removeHeld(held: HeldPath): Promise<void> {
  await emptyHeld(held.file);
  const [now, was] = await Promise.all([lstat(held.at).catch(() => undefined), held.file.stat()]);
  if (now?.isDirectory() && now.dev === was.dev && now.ino === was.ino) {
    await rmdir(held.at).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
    });
  }
}
