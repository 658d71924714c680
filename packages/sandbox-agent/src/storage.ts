/**
 * Storages of CreateSandbox and CreateContainer, by driver:
 * - `local`: an emptyDir, a directory made at the mount point (`mode=` option honoured);
 * - `bind`: the source bind-mounted at the mount point (`ro` honoured);
 * - `image_guest_pull`: the image named by `source` pulled through the data hub's
 *   `api.ImagePullService/PullImage` into `<first root>/<container id>`, which unpacks it at
 *   `…/rootfs`; that rootfs is bind-mounted at the mount point when the mount point is elsewhere.
 * Any other driver is refused by name. Paths obey `resolveUnder`.
 */
import { execFile } from 'node:child_process';
import { chmod, copyFile, lstat, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { InvalidRequest, RuntimeFailed, UnsupportedStorage } from './errors.js';
import { checkId, checkNotProtected, resolveUnder, shown } from './paths.js';
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

export function runMount(args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('mount', args, { timeout: 30_000 }, (err, _out, stderr) => {
      if (err)
        reject(
          new RuntimeFailed(`mount ${args.join(' ')}: ${(stderr || err.message).trim()}`, { cause: err }),
        );
      else resolve();
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
async function pauseRootfs(pauseBundle: string, bundle: string): Promise<void> {
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
  const target = join(bundle, 'rootfs', program);
  await mkdir(dirname(target), { recursive: true });
  await copyFile(join(pauseBundle, 'rootfs', program), target);
}

async function bindMount(source: string, target: string, readonly: boolean): Promise<void> {
  await runMount(['--bind', source, target]);
  if (readonly) await runMount(['-o', 'remount,bind,ro', target]);
}

/** A bind-mount target of the same kind as `source`: a directory, or an empty file. */
async function makeTarget(roots: readonly string[], target: string, sourceIsDir: boolean): Promise<void> {
  if (sourceIsDir) {
    await resolveUnder(roots, target, { what: 'storage mount point', create: true });
    return;
  }
  const parent = target.slice(0, target.lastIndexOf('/'));
  await resolveUnder(roots, parent, { what: 'storage mount point', create: true });
  await writeFile(target, '', { flag: 'a' });
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
      await resolveUnder(ctx.roots, target, { what: 'storage mount point', create: true });
      const mode = modeOption(options);
      if (mode !== undefined) await chmod(target, mode);
      return { driver, path: target, undo: () => rm(target, { recursive: true, force: true }) };
    }
    case 'bind': {
      const source = guarded(
        await resolveUnder(ctx.roots, String(storage.source ?? ''), {
          what: 'storage source',
          mustExist: true,
        }),
        'storage source',
      );
      const isDir = (await lstat(source)).isDirectory();
      await makeTarget(ctx.roots, target, isDir);
      await bindMount(source, target, options.includes('ro'));
      return { driver, path: target, undo: () => runUmount(target) };
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
      const bundle = await resolveUnder(ctx.roots, bundlePath, { what: 'image bundle', create: true });
      const removeBundle = () => rm(bundle, { recursive: true, force: true });
      try {
        if (sandbox) {
          await pauseRootfs(ctx.pauseBundle ?? DEFAULT_PAUSE_BUNDLE, bundle);
        } else if (pull !== undefined) {
          try {
            await pull(image, bundle, ctx.signal);
          } catch (e) {
            throw new RuntimeFailed(`pulling image ${shown(image)}: ${(e as Error).message}`, { cause: e });
          }
        }
        const rootfs = await resolveUnder(ctx.roots, join(bundle, 'rootfs'), {
          what: 'pulled rootfs',
          mustExist: true,
        });
        if (target === rootfs) return { driver, path: target, undo: removeBundle };
        await makeTarget(ctx.roots, target, true);
        await bindMount(rootfs, target, false);
      } catch (e) {
        // A refused or failed pull leaves nothing behind (a bundle made here goes).
        if (!existed) await removeBundle().catch(() => {});
        throw e;
      }
      return {
        driver,
        path: target,
        undo: async () => {
          await runUmount(target);
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
