/**
 * Paths and ids that arrive in requests. Every path the host names (a storage's mount point or source,
 * a container's root, a bind mount's source) must be absolute, spelled without `.` or `..` segments,
 * strictly below one of the agent's roots, and reached without following a symbolic link: each existing
 * component below the root is checked with lstat. Missing components are created one at a time, never
 * through a link.
 */
import { lstat, mkdir } from 'node:fs/promises';
import { InvalidRequest } from './errors.js';

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
