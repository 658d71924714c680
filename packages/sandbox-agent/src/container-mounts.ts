/**
 * The container's root and its spec's bind-mount sources as runc gets them. runc resolves the paths in
 * `config.json` itself, when the container starts; a container sharing a directory with this one (an
 * emptyDir) could swap a component of such a path for a link after CreateContainer checked it. So
 * CreateContainer holds each one (`openUnder`: every component opened in the directory already held,
 * without following a link), bind-mounts what it holds onto a fresh directory or file in the
 * container's bundle, and writes those paths into `config.json`. The bundle is in the agent's state
 * directory, which no request can name and no container can reach, so what runc finds there is what
 * was checked, whatever happens to the original path later.
 */

import type { FileHandle } from 'node:fs/promises';
import { open, readFile } from 'node:fs/promises';
import { DIR_FLAGS, type HeldPath, holdBeneath, openUnder, removeEntry } from './paths.js';
import { bindMount, runUmount, unmountHeld } from './storage.js';

/** Where the bundle keeps the bind-mount sources, one entry per mount of the spec (by its index). */
const SOURCES_DIR = 'mounts';

/** A bind mount of the spec to take over: its index in the spec's mounts and its checked source. */
export interface BindSource {
  readonly index: number;
  readonly source: string;
}

export interface ContainerMounts {
  /** The container's root, bound into the bundle: config.json's `root.path`. */
  readonly rootfs: string;
  /** The bundle's path for the source of each bind mount, by the mount's index in the spec. */
  readonly sources: ReadonlyMap<number, string>;
  /** Unmounts all of them (lazily: a container may still hold them); reports the first failure. */
  undo(): Promise<void>;
}

export interface ContainerMountOptions {
  readonly roots: readonly string[];
  /**
   * Tests only: runs once the root and the sources are held, before they are mounted, where a
   * container racing the agent would swap a component for a link.
   */
  readonly afterHold?: () => void | Promise<void>;
}

/**
 * Holds `rootPath` and each bind source below the roots, and bind-mounts them (recursively, as runc
 * then binds them) into `bundle` (a directory the agent made): `rootfs` and `mounts/<index>`. On any
 * failure, what was mounted is unmounted and the error rethrown.
 */
export async function bindContainerPaths(
  bundle: string,
  rootPath: string,
  binds: readonly BindSource[],
  options: ContainerMountOptions,
): Promise<ContainerMounts> {
  const held: HeldPath[] = [];
  const mounted: { root: FileHandle; path: string }[] = [];
  const undo = async () => {
    let first: unknown;
    for (const m of mounted.splice(0).reverse()) {
      try {
        await unmountHeld(m.root, m.path);
      } catch (e) {
        first ??= e;
      } finally {
        await m.root.close();
      }
    }
    if (first !== undefined) throw first;
  };
  const bundleDir = await open(bundle, DIR_FLAGS);
  try {
    const root = await openUnder(options.roots, rootPath, { what: 'container root', leaf: 'directory' });
    held.push(root);
    const sources: HeldPath[] = [];
    for (const b of binds) {
      const what = `source of mount ${b.index}`;
      const source = await openUnder(options.roots, b.source, { what, leaf: 'any' });
      held.push(source);
      sources.push(source);
    }
    await options.afterHold?.();
    const bindInto = async (source: HeldPath, components: string[]): Promise<string> => {
      const isDir = (await source.file.stat()).isDirectory();
      const target = await holdBeneath(bundleDir, bundle, components, {
        what: 'bundle mount point',
        leaf: isDir ? 'directory' : 'file',
        create: true,
      });
      try {
        const root = await bindMount(source, target, { recursive: true, what: 'bundle mount point' });
        mounted.push({ root, path: target.path });
      } finally {
        await target.close();
      }
      return target.path;
    };
    const rootfs = await bindInto(root, ['rootfs']);
    const paths = new Map<number, string>();
    for (let i = 0; i < binds.length; i++) {
      paths.set(binds[i]!.index, await bindInto(sources[i]!, [SOURCES_DIR, String(binds[i]!.index)]));
    }
    return { rootfs, sources: paths, undo };
  } catch (e) {
    await undo().catch(() => {});
    throw e;
  } finally {
    for (const h of held) await h.close();
    await bundleDir.close();
  }
}

/** Mount points in this mount namespace at `dir` or below it, deepest first (`dir` canonical). */
async function mountsBelow(dir: string): Promise<string[]> {
  const decode = (s: string) =>
    s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  return info
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((at): at is string => at !== undefined)
    .map(decode)
    .filter((at) => at === dir || at.startsWith(`${dir}/`))
    .sort((a, b) => b.split('/').length - a.split('/').length);
}

/**
 * Removes the bundle `name` from the directory `containersDir` (canonical, the agent's own). Whatever
 * is still mounted in it (left by an earlier run of the agent, or an unmount that failed) is unmounted
 * first, by path: nothing but the agent reaches its state directory. The removal never descends into
 * a mount, so a mount that stays refuses the removal (EBUSY) instead of losing what it shows.
 */
export async function removeBundle(containersDir: string, name: string): Promise<void> {
  for (const at of await mountsBelow(`${containersDir}/${name}`)) await runUmount(at);
  const dir = await open(containersDir, DIR_FLAGS);
  try {
    await removeEntry(dir, name);
  } finally {
    await dir.close();
  }
}
