import { mkdir, readlink, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidRequest } from './errors.js';
import { checkId, resolveUnder } from './paths.js';
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

describe('checkId', () => {
  it('accepts one path component of safe characters', () => {
    expect(checkId('web-0_a.b', 'container id')).toBe('web-0_a.b');
  });
  it.each(['', '..', '.hidden', '../etc', 'a/b', '/abs', 'a\nb', 'x'.repeat(129)])('refuses %j', (id) => {
    expect(() => checkId(id, 'container id')).toThrow(InvalidRequest);
  });
});
