/**
 * Storages of CreateSandbox and CreateContainer, by driver:
 * - `local`: an emptyDir, a directory made at the mount point (`mode=` option honoured);
 * - `bind`: the source bind-mounted at the mount point (`ro` honoured);
 * - `image_guest_pull`: the image named by `source` pulled through the data hub's
 *   `api.ImagePullService/PullImage` into `<first root>/<container id>`, which unpacks it at
 *   `…/rootfs`; that rootfs is bind-mounted at the mount point when the mount point is elsewhere.
 * Any other driver is refused by name. Paths are checked as `resolveUnder` says and used only through
 * descriptors `openUnder` holds: `mount` is given them as its fds 3 and 4 and named `/proc/self/fd/3`
 * and `/proc/self/fd/4` (`--no-canonicalize`, so it passes them to the kernel as they are), modes are
 * set with fchmod, and removal walks the held directory without following a link.
 */
import { execFile, spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { type FileHandle, lstat, open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidRequest, RuntimeFailed, UnsupportedStorage } from './errors.js';
import {
  ANY_FLAGS,
  checkId,
  checkNotProtected,
  DIR_FLAGS,
  type HeldPath,
  holdBeneath,
  mountIdOf,
  openUnder,
  removeHeld,
  resolveUnder,
  shown,
  unlinkEntry,
} from './paths.js';
import type { Decoded } from './proto.js';

/** Where kata's guest keeps the pause image. */
export const DEFAULT_PAUSE_BUNDLE = '/pause_bundle';

/** Pulls `image` into `bundlePath` (unpacked at `<bundlePath>/rootfs`). */
export type ImagePuller = (image: string, bundlePath: string, signal?: AbortSignal) => Promise<void>;

/** Undoes one storage: unmount, or remove the directory the agent made. */
export interface MountedStorage {
  readonly driver: string;
  readonly path: string;
  readonly undo: () => Promise<void>;
}

/**
 * Runs util-linux's `command` with `files` as its fds 3, 4…, which `args` name `/proc/self/fd/3`…
 * The kernel follows those links to exactly the files held, and `--no-canonicalize` keeps `mount`
 * from resolving them to path strings first. `shownAs` is the command as messages show it.
 */
function runHeld(
  command: 'mount' | 'umount',
  args: readonly string[],
  files: readonly FileHandle[],
  shownAs: string,
  tolerate?: RegExp,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, ['--no-canonicalize', ...args], {
      stdio: ['ignore', 'ignore', 'pipe', ...files.map((f) => f.fd)],
      timeout: 30_000,
    });
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    child.on('error', (err) => reject(new RuntimeFailed(`${shownAs}: ${err.message}`, { cause: err })));
    child.on('close', (code, signal) => {
      if (code === 0 || (tolerate?.test(stderr) ?? false)) resolve();
      else reject(new RuntimeFailed(`${shownAs}: ${stderr.trim() || `exited with ${code ?? signal}`}`));
    });
  });
}

export function runUmount(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('umount', ['--lazy', path], { timeout: 30_000 }, (err, _out, stderr) => {
      if (err && !/not mounted|no mount point/.test(stderr)) {
        reject(new RuntimeFailed(`umount ${path}: ${(stderr || err.message).trim()}`, { cause: err }));
      } else resolve();
    });
  });
}

export interface StorageContext {
  readonly roots: readonly string[];
  readonly containerId?: string;
  readonly pullImage?: ImagePuller;
  /** The pause image baked into the guest (`config.json` and `rootfs/`), for the sandbox container. */
  readonly pauseBundle?: string;
  readonly signal?: AbortSignal;
  /** The agent's own paths (sockets, state): no storage may name them or a directory holding them. */
  readonly protectedPaths?: readonly string[];
  /** Storages already set up in the pod, shared by mount point (see `StorageTable`). */
  readonly table?: StorageTable;
  /**
   * Tests only: runs after a storage's paths are checked and held, before they are used, where a
   * container racing the agent would swap a component for a link.
   */
  readonly afterCheck?: (use: 'bind' | 'local') => void | Promise<void>;
}

/**
 * The pod's storages by mount point, as kata's agent counts them: a storage whose mount point is
 * already set up (the same emptyDir named by an init container and the main container, for instance)
 * is not set up again but shared, and it is undone when the last container or sandbox that named it
 * goes. The same mount point under another driver is refused.
 */
export class StorageTable {
  readonly #entries = new Map<string, { driver: string; refs: number; ready: Promise<MountedStorage> }>();

  /** Mount points in use, with how many users each has. */
  get inUse(): ReadonlyMap<string, number> {
    return new Map([...this.#entries].map(([path, e]) => [path, e.refs]));
  }

  async add(storage: Decoded, ctx: StorageContext): Promise<MountedStorage> {
    const driver = String(storage.driver ?? '');
    const path = await resolveUnder(ctx.roots, String(storage.mount_point ?? ''), {
      what: 'storage mount point',
    });
    let entry = this.#entries.get(path);
    if (entry !== undefined && entry.driver !== driver) {
      throw new InvalidRequest(
        `storage mount point ${shown(path)} is already set up by the ${shown(entry.driver)} driver`,
      );
    }
    if (entry === undefined) {
      const ready = addStorage(storage, { ...ctx, table: undefined });
      entry = { driver, refs: 0, ready };
      this.#entries.set(path, entry);
      ready.catch(() => {
        if (this.#entries.get(path) === entry) this.#entries.delete(path);
      });
    }
    entry.refs++;
    let mounted: MountedStorage;
    try {
      mounted = await entry.ready;
    } catch (e) {
      entry.refs--;
      throw e;
    }
    let released = false;
    const shared = entry;
    return {
      driver,
      path,
      undo: async () => {
        if (released) return;
        released = true;
        if (--shared.refs > 0) return;
        if (this.#entries.get(path) === shared) this.#entries.delete(path);
        await mounted.undo();
      },
    };
  }
}

const CONTAINER_TYPE_KEYS = ['io.kubernetes.cri.container-type', 'io.kubernetes.cri-o.ContainerType'];

/** The `image_guest_pull=<json>` driver option's metadata says this is the pod's sandbox (pause) container. */
export function isSandboxImage(driverOptions: readonly string[]): boolean {
  for (const o of driverOptions) {
    if (!o.startsWith('image_guest_pull=')) continue;
    let volume: { metadata?: Record<string, unknown> };
    try {
      volume = JSON.parse(o.slice('image_guest_pull='.length));
    } catch (e) {
      throw new InvalidRequest(`invalid image_guest_pull driver option: ${(e as Error).message}`);
    }
    return CONTAINER_TYPE_KEYS.some((k) => volume.metadata?.[k] === 'sandbox');
  }
  return false;
}

/**
 * The sandbox container's rootfs from the guest's own pause bundle instead of a pull, as kata's agent
 * does: the one program its `config.json` runs, copied into `<bundle>/rootfs`.
 */
async function pauseRootfs(pauseBundle: string, bundle: HeldPath): Promise<void> {
  let config: { process?: { args?: string[] } };
  try {
    config = JSON.parse(await readFile(join(pauseBundle, 'config.json'), 'utf8'));
  } catch (e) {
    throw new RuntimeFailed(
      `the guest's pause bundle ${pauseBundle} is missing or unreadable: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
  const program = config.process?.args?.[0];
  if (!program?.startsWith('/') || program.split('/').some((s) => s === '..')) {
    throw new RuntimeFailed(`the pause bundle's config.json does not name an absolute program`);
  }
  const source = join(pauseBundle, 'rootfs', program);
  const bytes = await readFile(source);
  const mode = (await lstat(source)).mode & 0o7777;
  const parts = program.split('/').filter((s) => s !== '' && s !== '.');
  const target = await holdBeneath(bundle.file, bundle.path, ['rootfs', ...parts], {
    what: 'pause program',
    leaf: 'parent',
    create: true,
  });
  try {
    // A bundle left over may hold anything at that name: it is replaced, never written through.
    await unlinkEntry(target.parent, target.name);
    const file = await open(
      target.at,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      mode,
    );
    try {
      await file.writeFile(bytes);
      await file.chmod(mode);
    } finally {
      await file.close();
    }
  } finally {
    await target.close();
  }
}

export interface BindOptions {
  /** Remount the new mount read-only. */
  readonly readonly?: boolean;
  /** Bind the mounts below the source too (`--rbind`). */
  readonly recursive?: boolean;
  /** What the target is, for messages [default: `storage mount point`]. */
  readonly what?: string;
}

/**
 * Bind-mounts `source` on `target` (both held) and returns the new mount's root, held: it is what a
 * read-only remount and the unmount act on. The target held before the mount is the directory under
 * it, so the mount's root is reopened by its name in the held parent and checked to be the source,
 * on a mount other than the target's.
 */
export async function bindMount(
  source: HeldPath,
  target: HeldPath,
  options: BindOptions = {},
): Promise<FileHandle> {
  const { readonly = false, recursive = false, what = 'storage mount point' } = options;
  const flag = recursive ? '--rbind' : '--bind';
  const shownAs = `mount ${flag} ${source.path} ${target.path}`;
  await runHeld('mount', [flag, '/proc/self/fd/3', '/proc/self/fd/4'], [source.file, target.file], shownAs);
  const sourceStat = await source.file.stat();
  const mountRoot = await open(target.at, sourceStat.isDirectory() ? DIR_FLAGS : ANY_FLAGS).catch(
    (e: unknown) => {
      throw new InvalidRequest(
        `${what} ${shown(target.path)} changed while it was being mounted: ${(e as Error).message}`,
      );
    },
  );
  try {
    const st = await mountRoot.stat();
    if (
      st.dev !== sourceStat.dev ||
      st.ino !== sourceStat.ino ||
      (await mountIdOf(mountRoot)) === (await mountIdOf(target.file))
    ) {
      throw new InvalidRequest(`${what} ${shown(target.path)} changed while it was being mounted`);
    }
    if (readonly) {
      await runHeld(
        'mount',
        ['-o', 'remount,bind,ro', '/proc/self/fd/3'],
        [mountRoot],
        `${shownAs} (read-only)`,
      );
    }
  } catch (e) {
    await mountRoot.close();
    throw e;
  }
  return mountRoot;
}

/** Unmounts the mount whose root `mountRoot` holds (lazily: a container may still have it open). */
export async function unmountHeld(mountRoot: FileHandle, path: string): Promise<void> {
  await runHeld(
    'umount',
    ['--lazy', '/proc/self/fd/3'],
    [mountRoot],
    `umount ${path}`,
    /not mounted|no mount point/,
  );
}

/** A bind-mount target of the same kind as `source`: a directory, or an empty file. */
async function makeTarget(roots: readonly string[], target: string, source: HeldPath): Promise<HeldPath> {
  const isDir = (await source.file.stat()).isDirectory();
  return openUnder(roots, target, {
    what: 'storage mount point',
    leaf: isDir ? 'directory' : 'file',
    create: true,
  });
}

function modeOption(options: readonly string[]): number | undefined {
  for (const o of options) {
    if (!o.startsWith('mode=')) continue;
    const mode = Number.parseInt(o.slice(5), 8);
    if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777)
      throw new InvalidRequest(`invalid storage option ${shown(o)}`);
    return mode;
  }
  return undefined;
}

/** Sets up one storage; the result undoes it. */
export async function addStorage(storage: Decoded, ctx: StorageContext): Promise<MountedStorage> {
  const driver = String(storage.driver ?? '');
  const options = (storage.options ?? []) as string[];
  const guarded = (path: string, what: string) => checkNotProtected(path, ctx.protectedPaths ?? [], what);
  const target = guarded(
    await resolveUnder(ctx.roots, String(storage.mount_point ?? ''), { what: 'storage mount point' }),
    'storage mount point',
  );
  switch (driver) {
    case 'local': {
      const mode = modeOption(options);
      const dir = await openUnder(ctx.roots, target, {
        what: 'storage mount point',
        leaf: 'directory',
        create: true,
      });
      try {
        await ctx.afterCheck?.('local');
        if (mode !== undefined) await dir.file.chmod(mode);
      } catch (e) {
        await dir.close();
        throw e;
      }
      return {
        driver,
        path: target,
        undo: async () => {
          try {
            await removeHeld(dir);
          } finally {
            await dir.close();
          }
        },
      };
    }
    case 'bind': {
      const sourcePath = guarded(
        await resolveUnder(ctx.roots, String(storage.source ?? ''), {
          what: 'storage source',
          mustExist: true,
        }),
        'storage source',
      );
      const source = await openUnder(ctx.roots, sourcePath, { what: 'storage source', leaf: 'any' });
      let mountRoot: FileHandle;
      try {
        const held = await makeTarget(ctx.roots, target, source);
        try {
          await ctx.afterCheck?.('bind');
          mountRoot = await bindMount(source, held, { readonly: options.includes('ro') });
        } finally {
          await held.close();
        }
      } finally {
        await source.close();
      }
      return {
        driver,
        path: target,
        undo: async () => {
          try {
            await unmountHeld(mountRoot, target);
          } finally {
            await mountRoot.close();
          }
        },
      };
    }
    case 'image_guest_pull': {
      const cid = checkId(ctx.containerId ?? '', 'container id');
      const image = String(storage.source ?? '');
      if (image === '') throw new InvalidRequest('image_guest_pull storage without an image in source');
      const sandbox = isSandboxImage((storage.driver_options ?? []) as string[]);
      const pull = ctx.pullImage;
      if (!sandbox && pull === undefined) throw new UnsupportedStorage(`${driver} (no data hub configured)`);
      const bundlePath = guarded(join(ctx.roots[0]!, cid), 'image bundle');
      const existed = await lstat(bundlePath).then(
        () => true,
        () => false,
      );
      const bundle = await openUnder(ctx.roots, bundlePath, {
        what: 'image bundle',
        leaf: 'directory',
        create: true,
      });
      const removeBundle = async () => {
        try {
          await removeHeld(bundle);
        } finally {
          await bundle.close();
        }
      };
      let mountRoot: FileHandle | undefined;
      try {
        if (sandbox) {
          await pauseRootfs(ctx.pauseBundle ?? DEFAULT_PAUSE_BUNDLE, bundle);
        } else if (pull !== undefined) {
          try {
            // The data hub is another process: it is given the path, and what it unpacked is checked below.
            await pull(image, bundle.path, ctx.signal);
          } catch (e) {
            throw new RuntimeFailed(`pulling image ${shown(image)}: ${(e as Error).message}`, { cause: e });
          }
        }
        const rootfs = await holdBeneath(bundle.file, bundle.path, ['rootfs'], {
          what: 'pulled rootfs',
          leaf: 'directory',
        });
        try {
          if (target !== rootfs.path) {
            const held = await makeTarget(ctx.roots, target, rootfs);
            try {
              await ctx.afterCheck?.('bind');
              mountRoot = await bindMount(rootfs, held);
            } finally {
              await held.close();
            }
          }
        } finally {
          await rootfs.close();
        }
      } catch (e) {
        // A refused or failed pull leaves nothing behind (a bundle made here goes).
        if (!existed) await removeBundle().catch(() => {});
        else await bundle.close();
        throw e;
      }
      const mounted = mountRoot;
      return {
        driver,
        path: target,
        undo: async () => {
          if (mounted !== undefined) {
            try {
              await unmountHeld(mounted, target);
            } finally {
              await mounted.close();
            }
          }
          await removeBundle();
        },
      };
    }
    default:
      throw new UnsupportedStorage(driver);
  }
}

/** Sets up `storages` in order; on failure undoes those already set up and rethrows. */
export async function addStorages(
  storages: readonly Decoded[],
  ctx: StorageContext,
): Promise<MountedStorage[]> {
  const done: MountedStorage[] = [];
  try {
    for (const s of storages) done.push(await (ctx.table ? ctx.table.add(s, ctx) : addStorage(s, ctx)));
  } catch (e) {
    await removeStorages(done);
    throw e;
  }
  return done;
}

/** Undoes storages, last first; reports the first failure after trying all. */
export async function removeStorages(storages: readonly MountedStorage[]): Promise<void> {
  let first: unknown;
  for (const s of [...storages].reverse()) {
    try {
      await s.undo();
    } catch (e) {
      first ??= e;
    }
  }
  if (first !== undefined) throw first;
}
