// Storages against a container that shares a directory with a later request: between the agent's check
// of a path and its use, a component is swapped for a symbolic link to a directory outside the roots
// (the `afterCheck` seam runs the swap at exactly that moment). The bind mount, the emptyDir's mode, its
// removal and the unmount must still act on the directories the agent checked, never outside. Root only
// (real mounts, as the pod VM's agent makes them).
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, rename, stat, symlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidRequest } from './errors.js';
import { addStorage, type MountedStorage } from './storage.js';
import { tempDir } from './testing/index.js';

const run = promisify(execFile);
const IS_ROOT = process.getuid?.() === 0;

/** Mount points and mounted roots (as /proc/self/mountinfo spells them) that mention `fragment`. */
async function mountsMentioning(fragment: string): Promise<{ root: string; at: string }[]> {
  const decode = (s: string) =>
    s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(Number.parseInt(o, 8)));
  return (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split(' '))
    .map((f) => ({ root: decode(f[3]!), at: decode(f[4]!) }))
    .filter((m) => m.root.includes(fragment) || m.at.includes(fragment));
}

describe.skipIf(!IS_ROOT)('storages raced by a symbolic link between check and use', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let root: string;
  const extraMounts: string[] = [];

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    root = join(dir, 'kata');
    await mkdir(root);
  });
  afterAll(async () => {
    for (const m of (await mountsMentioning(basename(dir))).reverse()) {
      await run('umount', ['--lazy', m.at]).catch(() => {});
    }
    for (const m of extraMounts) await run('umount', ['--lazy', m]).catch(() => {});
    await cleanup?.();
  });

  /** What a container sharing `path`'s parent can do: move the directory away and leave a link. */
  const swap = async (path: string, to: string) => {
    await rename(path, `${path}.moved`);
    await symlink(to, path);
  };
  /** An outside directory holding `marker` (and `sub/` directories), mode 0700. */
  const outside = async (name: string, subs: string[] = []) => {
    const o = join(dir, `outside-${name}`);
    await mkdir(o, { mode: 0o700 });
    await writeFile(join(o, 'marker'), `outside ${name}`);
    for (const s of subs) await mkdir(join(o, s), { recursive: true, mode: 0o700 });
    return o;
  };
  const outsideMounts = () => mountsMentioning(`${basename(dir)}/outside-`);
  /** The storage, or the InvalidRequest it was refused with (anything else fails the test). */
  const attempt = async (p: Promise<MountedStorage>): Promise<MountedStorage | undefined> => {
    const r = await p.catch((e: unknown) => e);
    if (r instanceof Error) {
      expect(r).toBeInstanceOf(InvalidRequest);
      return undefined;
    }
    return r as MountedStorage;
  };

  it('bind storage: a source swapped after the check is not what gets mounted', async () => {
    const source = join(root, 'src1/data');
    await mkdir(source, { recursive: true });
    await writeFile(join(source, 'marker'), 'inside');
    const out = await outside('src1', ['data']);
    await writeFile(join(out, 'data/marker'), 'outside src1');
    const target = join(root, 'c1/mnt');
    const mounted = await attempt(
      addStorage(
        { driver: 'bind', source, mount_point: target, options: ['ro'] },
        {
          roots: [root],
          afterCheck: (use) => (use === 'bind' ? swap(join(root, 'src1'), out) : undefined),
        },
      ),
    );
    expect(await outsideMounts()).toEqual([]);
    expect(mounted).toBeDefined(); // this agent mounts on what it held
    if (mounted) {
      // The directory that was checked (now moved aside) is what the container sees, read-only.
      expect(await readFile(join(target, 'marker'), 'utf8')).toBe('inside');
      await expect(writeFile(join(target, 'x'), 'x')).rejects.toThrow(/EROFS/);
      await mounted.undo();
    }
    expect(await mountsMentioning(basename(dir))).toEqual([]);
  });

  it('bind storage: a target swapped after the check is not where it gets mounted', async () => {
    const source = join(root, 'src2');
    await mkdir(source, { recursive: true });
    await writeFile(join(source, 'marker'), 'inside');
    const out = await outside('c2', ['mnt']);
    const mounted = await attempt(
      addStorage(
        { driver: 'bind', source, mount_point: join(root, 'c2/mnt') },
        {
          roots: [root],
          afterCheck: (use) => (use === 'bind' ? swap(join(root, 'c2'), out) : undefined),
        },
      ),
    );
    expect(await outsideMounts()).toEqual([]);
    expect(await readdir(join(out, 'mnt'))).toEqual([]);
    expect(mounted).toBeDefined(); // this agent mounts on what it held
    if (mounted) {
      // On the directory that was checked, wherever it was moved to.
      expect(await readFile(join(root, 'c2.moved/mnt/marker'), 'utf8')).toBe('inside');
      await mounted.undo();
    }
    expect(await mountsMentioning(basename(dir))).toEqual([]);
  });

  it('bind storage: a file target is made in the checked directory, not through a swapped one', async () => {
    const source = join(root, 'src3/hosts');
    await mkdir(join(root, 'src3'));
    await writeFile(source, 'inside');
    const out = await outside('c3');
    const mounted = await attempt(
      addStorage(
        { driver: 'bind', source, mount_point: join(root, 'c3/etc/hosts') },
        {
          roots: [root],
          afterCheck: (use) => (use === 'bind' ? swap(join(root, 'c3/etc'), out) : undefined),
        },
      ),
    );
    expect(await outsideMounts()).toEqual([]);
    expect(await readdir(out)).toEqual(['marker']);
    expect(mounted).toBeDefined(); // this agent mounts on what it held
    if (mounted) {
      expect(await readFile(join(root, 'c3/etc.moved/hosts'), 'utf8')).toBe('inside');
      await mounted.undo();
    }
    expect(await mountsMentioning(basename(dir))).toEqual([]);
  });

  it('bind storage: the unmount on removal does not follow a swapped mount point', async () => {
    const source = join(root, 'src4');
    await mkdir(source, { recursive: true });
    await writeFile(join(source, 'marker'), 'inside');
    const mounted = await addStorage(
      { driver: 'bind', source, mount_point: join(root, 'c4/mnt') },
      { roots: [root] },
    );
    // Outside the roots, a mount of someone else's at the same relative place.
    const out = await outside('c4', ['mnt']);
    const theirs = await outside('theirs');
    await run('mount', ['--bind', theirs, join(out, 'mnt')]);
    extraMounts.push(join(out, 'mnt'));
    await swap(join(root, 'c4'), out);
    await mounted.undo();
    // Theirs is still mounted; the agent's own is gone.
    expect((await mountsMentioning(out)).map((m) => m.at)).toEqual([join(out, 'mnt')]);
    expect(await readFile(join(out, 'mnt/marker'), 'utf8')).toBe('outside theirs');
    expect(await readdir(join(root, 'c4.moved/mnt'))).toEqual([]);
  });

  it('local storage: the mode is set on the directory made, not on a link swapped in for it', async () => {
    const out = await outside('cache');
    const target = join(root, 'sandbox/local/cache');
    const made = await attempt(
      addStorage(
        { driver: 'local', mount_point: target, options: ['mode=0777'] },
        {
          roots: [root],
          afterCheck: (use) => (use === 'local' ? swap(target, out) : undefined),
        },
      ),
    );
    expect((await stat(out)).mode & 0o7777).toBe(0o700);
    expect(made).toBeDefined();
    if (made) {
      expect((await stat(`${target}.moved`)).mode & 0o7777).toBe(0o777);
      await made.undo();
    }
    expect(await readdir(out)).toEqual(['marker']);
  });

  it('local storage: removal does not follow a parent swapped for a link, nor links inside', async () => {
    const target = join(root, 'sandbox/local2/cache');
    const made = await addStorage({ driver: 'local', mount_point: target }, { roots: [root] });
    const out = await outside('local2', ['cache']);
    await writeFile(join(out, 'cache/precious'), 'keep me');
    // What the containers left in the emptyDir: files, directories, links out.
    await mkdir(join(target, 'a/b'), { recursive: true });
    await writeFile(join(target, 'a/b/f'), 'x');
    await symlink(out, join(target, 'a/out'));
    await symlink(join(out, 'cache/precious'), join(target, 'precious'));
    await swap(join(root, 'sandbox/local2'), out);
    await made.undo();
    expect(await readFile(join(out, 'cache/precious'), 'utf8')).toBe('keep me');
    expect((await readdir(out)).sort()).toEqual(['cache', 'marker']);
    // What the agent made is gone.
    await expect(readdir(join(root, 'sandbox/local2.moved'))).resolves.toEqual([]);
  });
});
