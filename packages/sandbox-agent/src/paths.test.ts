import { lstat, mkdir, readdir, readlink, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidRequest } from './errors.js';
import { checkId, openUnder, resolveUnder } from './paths.js';
import { tempDir } from './testing/index.js';

describe('resolveUnder', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let root: string;
  let roots: string[];

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    root = join(dir, 'root');
    await mkdir(join(root, 'a/b'), { recursive: true });
    await mkdir(join(dir, 'outside'), { recursive: true });
    await writeFile(join(dir, 'outside/secret'), 'x');
    await writeFile(join(root, 'file'), 'x');
    await symlink(join(dir, 'outside'), join(root, 'escape')); // a directory link out of the root
    await symlink('b', join(root, 'a/inner')); // a link that stays inside is still refused
    roots = [root];
  });
  afterAll(() => cleanup());

  const refused = async (path: string, reason: RegExp, create = false) => {
    const err = await resolveUnder(roots, path, { what: 'mount point', create }).catch((e) => e);
    expect(err).toBeInstanceOf(InvalidRequest);
    expect(err.code).toBe(3);
    expect(err.message).toMatch(reason);
  };

  it('accepts a path below a root and creates what is missing', async () => {
    const path = join(root, 'a/b/c/d');
    expect(await resolveUnder(roots, path, { what: 'mount point', create: true })).toBe(path);
    expect(await resolveUnder(roots, `${root}//a/b/c/d/`, { what: 'mount point', mustExist: true })).toBe(
      path,
    );
  });

  it('refuses "..", whether or not it would stay below the root', async () => {
    await refused(`${root}/../outside/secret`, /"\." or "\.\." segment/);
    await refused(`${root}/a/../a/b`, /"\." or "\.\." segment/);
    await refused(`${root}/./a`, /"\." or "\.\." segment/);
  });

  it('refuses relative paths, the root itself and paths beside it', async () => {
    await refused('a/b', /not an absolute path/);
    await refused(root, /not below the agent's roots/);
    await refused(`${root}-sibling/x`, /not below the agent's roots/);
    await refused('/etc/shadow', /not below the agent's roots/);
    await refused('', /empty/);
    await refused(`${root}/a\0b`, /NUL/);
  });

  it('refuses a symbolic link on the way or at the end, and does not create through it', async () => {
    await refused(`${root}/escape/secret`, /symbolic link/);
    await refused(`${root}/escape/new/dir`, /symbolic link/, true);
    await refused(`${root}/escape`, /symbolic link/);
    await refused(`${root}/a/inner`, /symbolic link/);
    expect(await readlink(join(root, 'escape'))).toBe(join(dir, 'outside'));
  });

  it('refuses a file where a directory must be, and a missing path that must exist', async () => {
    await refused(`${root}/file/x`, /is not a directory/, true);
    await expect(resolveUnder(roots, `${root}/nope`, { what: 'root', mustExist: true })).rejects.toThrow(
      /does not exist/,
    );
  });
});

describe('openUnder', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let root: string;

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    root = join(dir, 'root');
    await mkdir(join(root, 'a/b'), { recursive: true });
    await mkdir(join(dir, 'outside'));
    await writeFile(join(root, 'file'), 'x');
    await symlink(join(dir, 'outside'), join(root, 'escape'));
    await symlink(join(root, 'file'), join(root, 'a/filelink'));
  });
  afterAll(() => cleanup());

  const refused = async (path: string, leaf: 'directory' | 'file' | 'any' | 'parent', reason: RegExp) => {
    const err = await openUnder([root], path, { what: 'mount point', leaf, create: true }).catch((e) => e);
    expect(err).toBeInstanceOf(InvalidRequest);
    expect(err.message).toMatch(reason);
  };

  it('holds the checked directory and its parent, making what is missing', async () => {
    const held = await openUnder([root], join(root, 'a/b/new/leaf'), {
      what: 'mount point',
      leaf: 'directory',
      create: true,
    });
    try {
      expect([held.path, held.name, held.created, held.parentIsRoot]).toEqual([
        join(root, 'a/b/new/leaf'),
        'leaf',
        true,
        false,
      ]);
      expect((await held.file.stat()).ino).toBe((await lstat(join(root, 'a/b/new/leaf'))).ino);
      expect((await held.parent.stat()).ino).toBe((await lstat(join(root, 'a/b/new'))).ino);
    } finally {
      await held.close();
    }
  });

  it('refuses what resolveUnder refuses, links at the end included, and makes nothing through a link', async () => {
    await refused(`${root}/../outside`, 'directory', /"\." or "\.\." segment/);
    await refused(root, 'directory', /not below the agent's roots/);
    await refused(`${root}/escape/new`, 'directory', /symbolic link/);
    await refused(`${root}/escape`, 'any', /symbolic link/);
    await refused(`${root}/escape`, 'directory', /symbolic link/);
    await refused(`${root}/a/filelink`, 'file', /symbolic link/);
    await refused(`${root}/escape/x`, 'parent', /symbolic link/);
    await refused(`${root}/file/x`, 'directory', /is not a directory/);
    await refused(`${root}/a/b`, 'file', /is not a regular file/);
    expect(await readdir(join(dir, 'outside'))).toEqual([]);
    const missing = await openUnder([root], `${root}/nope`, { what: 'root', leaf: 'any' }).catch((e) => e);
    expect(missing.message).toMatch(/does not exist/);
  });
});

describe('checkId', () => {
  it('accepts one path component of safe characters', () => {
    expect(checkId('web-0_a.b', 'container id')).toBe('web-0_a.b');
  });
  it.each(['', '..', '.hidden', '../etc', 'a/b', '/abs', 'a\nb', 'x'.repeat(129)])('refuses %j', (id) => {
    expect(() => checkId(id, 'container id')).toThrow(InvalidRequest);
  });
});
