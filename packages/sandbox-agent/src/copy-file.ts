/**
 * CopyFile: how kata's runtime shares files (ConfigMaps, Secrets, /etc/hosts, resolv.conf) with a guest
 * that has no shared filesystem, as in peer pods. The path must be below the agent's roots; parents are
 * made with `dir_mode` (the immediate parent then owned by `uid`:`gid`); a directory is made (an existing
 * one kept), a symbolic link is (re)created holding `data` as its target, and a regular file is written
 * to `<path>.tmp` at `offset` and renamed over `path` once it has `file_size` bytes, so a file sent in
 * chunks appears whole. Nothing is followed through a symbolic link: the parents are opened one by one
 * below the root (`openUnder`), and everything after acts on the held parent directory (its mode and
 * owner through its descriptor, the file by its name in it), so a parent swapped for a link meanwhile
 * changes nothing. The temporary file is opened with O_NOFOLLOW and must be a regular file.
 */
import { constants } from 'node:fs';
import { type FileHandle, lchown, lstat, mkdir, open, rename, symlink } from 'node:fs/promises';
import { InvalidRequest } from './errors.js';
import {
  beneath,
  checkNotProtected,
  DIR_FLAGS,
  openUnder,
  removeEntry,
  shown,
  spelled,
  unlinkEntry,
} from './paths.js';
import type { Decoded } from './proto.js';

const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;

async function exists(path: string): Promise<Awaited<ReturnType<typeof lstat>> | undefined> {
  try {
    return await lstat(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** Opens `at` (a name in a held directory) with O_NOFOLLOW; a link raced in is refused. */
async function openNoLink(at: string, flags: number, mode: number | undefined, path: string) {
  try {
    return await open(at, flags | constants.O_NOFOLLOW, mode);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    // With O_DIRECTORY, Linux answers a link with ENOTDIR rather than ELOOP.
    if (code === 'ELOOP' || (code === 'ENOTDIR' && (await exists(at))?.isSymbolicLink()))
      throw new InvalidRequest(`CopyFile path ${shown(path)} was replaced by a symbolic link`);
    throw e;
  }
}

export async function copyFile(
  roots: readonly string[],
  req: Decoded,
  protectedPaths: readonly string[] = [],
  /** Tests only: runs after the parents are held, before anything is written. */
  afterCheck?: () => void | Promise<void>,
): Promise<void> {
  const { path } = spelled(roots, String(req.path ?? ''), 'CopyFile path');
  checkNotProtected(path, protectedPaths, 'CopyFile path');
  const fileMode = Number(req.file_mode ?? 0);
  const uid = Number(req.uid ?? 0);
  const gid = Number(req.gid ?? 0);
  const held = await openUnder(roots, path, { what: 'CopyFile path', leaf: 'parent', create: true });
  try {
    await afterCheck?.();
    if (!held.parentIsRoot) {
      // The root itself keeps its owner and mode.
      if (held.created) await held.parent.chmod(Number(req.dir_mode ?? 0o755) & 0o777);
      await held.parent.chown(uid, gid);
    }
    await write(held.parent, held.name, path, req, fileMode, uid, gid);
  } finally {
    await held.close();
  }
}

async function write(
  dir: FileHandle,
  name: string,
  path: string,
  req: Decoded,
  fileMode: number,
  uid: number,
  gid: number,
): Promise<void> {
  const at = beneath(dir, name);
  // The path itself may be a leftover link: it is replaced, never followed.
  const current = await exists(at);
  const type = fileMode & S_IFMT;

  if (type === S_IFDIR) {
    if (current && !current.isDirectory()) await unlinkEntry(dir, name);
    if (!current?.isDirectory()) await mkdir(at, { mode: fileMode & 0o777 });
    const made = await openNoLink(at, DIR_FLAGS, undefined, path);
    try {
      await made.chmod(fileMode & 0o7777);
      await made.chown(uid, gid);
    } finally {
      await made.close();
    }
    return;
  }
  const offset = Number(req.offset ?? 0);
  if (offset === 0 && current) await removeEntry(dir, name);
  if (type === S_IFLNK) {
    const target = Buffer.from(req.data ?? new Uint8Array(0));
    if (target.length === 0 || target.includes(0))
      throw new InvalidRequest('CopyFile symlink without a target');
    await removeEntry(dir, name);
    await symlink(target.toString('utf8'), at);
    await lchown(at, uid, gid);
    return;
  }
  const tmpName = `${name}.tmp`;
  const tmp = `${path}.tmp`;
  const tmpAt = beneath(dir, tmpName);
  const tmpStat = await exists(tmpAt);
  if (tmpStat && !tmpStat.isFile())
    throw new InvalidRequest(`CopyFile temporary file ${shown(tmp)} is not a regular file`);
  // O_NONBLOCK: a FIFO raced in is not waited on; it is refused below.
  const flags =
    constants.O_RDWR | constants.O_CREAT | constants.O_NONBLOCK | (offset === 0 ? constants.O_TRUNC : 0);
  const file = await openNoLink(tmpAt, flags, fileMode & 0o7777, tmp);
  try {
    if (!(await file.stat()).isFile())
      throw new InvalidRequest(`CopyFile temporary file ${shown(tmp)} is not a regular file`);
    const data = req.data as Uint8Array;
    await file.write(data, 0, data.length, offset);
    const size = (await file.stat()).size;
    if (size !== Number(req.file_size ?? 0)) return; // more chunks to come
    await file.chmod(fileMode & 0o7777);
    await file.chown(uid, gid);
  } finally {
    await file.close();
  }
  await rename(tmpAt, at);
}
