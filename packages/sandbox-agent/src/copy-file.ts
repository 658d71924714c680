/**
 * CopyFile: how kata's runtime shares files (ConfigMaps, Secrets, /etc/hosts, resolv.conf) with a guest
 * that has no shared filesystem, as in peer pods. The path must be below the agent's roots; parents are
 * made with `dir_mode` (the immediate parent then owned by `uid`:`gid`); a directory is made (an existing
 * one kept), a symbolic link is (re)created holding `data` as its target, and a regular file is written
 * to `<path>.tmp` at `offset` and renamed over `path` once it has `file_size` bytes, so a file sent in
 * chunks appears whole. Nothing is followed through a symbolic link: the parents are checked with
 * lstat, the temporary file is opened with O_NOFOLLOW.
 */
import { constants } from 'node:fs';
import { chmod, chown, lchown, lstat, mkdir, open, rename, rm, symlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { InvalidRequest } from './errors.js';
import { checkNotProtected, resolveUnder, shown } from './paths.js';
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

export async function copyFile(
  roots: readonly string[],
  req: Decoded,
  protectedPaths: readonly string[] = [],
): Promise<void> {
  const path = checkNotProtected(
    await resolveUnder(roots, String(req.path ?? ''), { what: 'CopyFile path', leafMayBeLink: true }),
    protectedPaths,
    'CopyFile path',
  );
  const fileMode = Number(req.file_mode ?? 0);
  const uid = Number(req.uid ?? 0);
  const gid = Number(req.gid ?? 0);
  const parent = dirname(path);
  if (!roots.includes(parent)) {
    // The root itself keeps its owner and mode.
    const parentExisted = (await exists(parent)) !== undefined;
    await resolveUnder(roots, parent, { what: 'CopyFile parent', create: true });
    if (!parentExisted) await chmod(parent, Number(req.dir_mode ?? 0o755) & 0o777);
    await chown(parent, uid, gid);
  }
  // The path itself may be a leftover link: it is replaced, never followed.
  const current = await exists(path);
  const type = fileMode & S_IFMT;

  if (type === S_IFDIR) {
    if (current && !current.isDirectory()) await rm(path, { force: true });
    if (!current?.isDirectory()) await mkdir(path, { mode: fileMode & 0o777 });
    await chmod(path, fileMode & 0o7777);
    await chown(path, uid, gid);
    return;
  }
  const offset = Number(req.offset ?? 0);
  if (offset === 0 && current) await rm(path, { recursive: true, force: true });
  if (type === S_IFLNK) {
    const target = Buffer.from(req.data ?? new Uint8Array(0));
    if (target.length === 0 || target.includes(0))
      throw new InvalidRequest('CopyFile symlink without a target');
    await rm(path, { recursive: true, force: true });
    await symlink(target.toString('utf8'), path);
    await lchown(path, uid, gid);
    return;
  }
  const tmp = `${path}.tmp`;
  const tmpStat = await exists(tmp);
  if (tmpStat && !tmpStat.isFile())
    throw new InvalidRequest(`CopyFile temporary file ${shown(tmp)} is not a regular file`);
  const flags =
    constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | (offset === 0 ? constants.O_TRUNC : 0);
  const file = await open(tmp, flags, fileMode & 0o7777);
  try {
    const data = req.data as Uint8Array;
    await file.write(data, 0, data.length, offset);
    const size = (await file.stat()).size;
    if (size !== Number(req.file_size ?? 0)) return; // more chunks to come
    await file.chmod(fileMode & 0o7777);
    await file.chown(uid, gid);
  } finally {
    await file.close();
  }
  await rename(tmp, path);
}
