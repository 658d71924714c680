import {
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rename,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFile } from './copy-file.js';
import { InvalidRequest } from './errors.js';
import { tempDir } from './testing/index.js';

const uid = process.getuid?.() ?? 0;
const gid = process.getgid?.() ?? 0;
const REG = 0o100000;
const DIR = 0o040000;
const LNK = 0o120000;

describe('CopyFile', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let root: string;
  const shared = () => join(root, 'shared/containers');

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    root = join(dir, 'kata');
    await mkdir(root);
    await mkdir(join(dir, 'outside'));
    await writeFile(join(dir, 'outside/passwd'), 'original');
  });
  afterAll(() => cleanup());

  const req = (path: string, data: string, extra: object = {}) => ({
    path,
    data: Buffer.from(data),
    file_size: Buffer.byteLength(data),
    file_mode: REG | 0o640,
    dir_mode: 0o750,
    uid,
    gid,
    offset: 0,
    ...extra,
  });

  it('writes a file below the root, making its parents', async () => {
    const path = join(shared(), 'c1-hosts');
    await copyFile([root], req(path, '127.0.0.1 localhost\n'));
    expect(await readFile(path, 'utf8')).toBe('127.0.0.1 localhost\n');
    expect((await stat(path)).mode & 0o7777).toBe(0o640);
    expect((await stat(shared())).mode & 0o777).toBe(0o750);
  });

  it('assembles a file sent in chunks and shows it only when whole', async () => {
    const path = join(shared(), 'cm/data/big');
    await copyFile([root], req(path, 'first-', { file_size: 11 }));
    await expect(stat(path)).rejects.toThrow(/ENOENT/);
    await copyFile([root], { ...req(path, 'last.'), file_size: 11, offset: 6 });
    expect(await readFile(path, 'utf8')).toBe('first-last.');
  });

  it('makes directories and symbolic links (as ConfigMap volumes need)', async () => {
    const d = join(shared(), 'cm/..2026');
    await copyFile([root], { ...req(d, ''), file_mode: DIR | 0o755 });
    expect((await stat(d)).isDirectory()).toBe(true);
    const link = join(shared(), 'cm/..data');
    await copyFile([root], { ...req(link, '..2026'), file_mode: LNK | 0o777 });
    expect(await readlink(link)).toBe('..2026');
    // Sent again (an update), the link is replaced, not followed.
    await copyFile([root], { ...req(link, '..2027'), file_mode: LNK | 0o777 });
    expect(await readlink(link)).toBe('..2027');
  });

  it('refuses paths that escape the root', async () => {
    await symlink(join(dir, 'outside'), join(shared(), 'escape'));
    for (const path of [
      join(root, '../outside/passwd'),
      '/etc/passwd',
      'relative/file',
      join(shared(), 'escape/passwd'),
      join(shared(), 'escape/new/file'),
    ]) {
      const e = await copyFile([root], req(path, 'owned')).catch((err) => err);
      expect([path, e]).toEqual([path, expect.any(InvalidRequest)]);
    }
    expect(await readFile(join(dir, 'outside/passwd'), 'utf8')).toBe('original');
  });

  it('replaces a link at the path instead of writing through it, and refuses a link as the temporary file', async () => {
    const path = join(shared(), 'victim');
    await symlink(join(dir, 'outside/passwd'), path);
    await copyFile([root], req(path, 'replaced'));
    expect((await lstat(path)).isFile()).toBe(true);
    expect(await readFile(join(dir, 'outside/passwd'), 'utf8')).toBe('original');
    const other = join(shared(), 'other');
    await symlink(join(dir, 'outside/passwd'), `${other}.tmp`);
    await expect(copyFile([root], req(other, 'x'))).rejects.toThrow(InvalidRequest);
    expect(await readFile(join(dir, 'outside/passwd'), 'utf8')).toBe('original');
  });

  it('writes into the directory it checked when a parent is swapped for a link before the write', async () => {
    const out = join(dir, 'outside-cm');
    await mkdir(join(out, 'data'), { recursive: true, mode: 0o700 });
    const swapped = join(shared(), 'raced');
    const path = join(swapped, 'data/config');
    const e = await copyFile([root], req(path, 'the config'), [], async () => {
      // A container sharing the directory moves it aside and leaves a link to outside the root.
      await rename(swapped, `${swapped}.moved`);
      await symlink(out, swapped);
    }).catch((err: unknown) => err);
    // The write lands in the directory that was held (now moved aside), not outside.
    expect(e).toBeUndefined();
    expect(await readFile(join(`${swapped}.moved`, 'data/config'), 'utf8')).toBe('the config');
    expect(await readdir(join(out, 'data'))).toEqual([]);
    expect((await stat(join(out, 'data'))).mode & 0o777).toBe(0o700);
    expect(await readFile(join(dir, 'outside/passwd'), 'utf8')).toBe('original');
  });
});
