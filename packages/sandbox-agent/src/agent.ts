/**
 * The sandbox agent's state and the RPCs it implements: one sandbox, its containers, their processes.
 * Containers run under Debian's runc; requests' paths stay below the agent's roots (`paths.ts`).
 */

import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, realpath, rm, rmdir, stat, statfs, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { makeDirectory } from '@broker/cli';
import { Code } from '@broker/ttrpc';
import { type ClockOptions, setGuestDateTime } from './clock.js';
import {
  type BindSource,
  bindContainerPaths,
  type ContainerMounts,
  removeBundle,
} from './container-mounts.js';
import { copyFile } from './copy-file.js';
import {
  InvalidRequest,
  NotFound,
  RuntimeFailed,
  SandboxAgentError,
  UnimplementedRpc,
  WrongState,
} from './errors.js';
import { onlineCpuMem } from './hotplug.js';
import { Network, type NetworkOptions } from './network.js';
import { OomEvents } from './oom.js';
import { checkId, checkNotProtected, resolveUnder, shown } from './paths.js';
import type { Decoded } from './proto.js';
import { AgentProcess, hostTerminal, Runc } from './runc.js';
import { processToOci, resourcesToOci, specToOci } from './spec.js';
import { parseRuncJson, statsFromRunc } from './stats.js';
import {
  addStorages,
  type ImagePuller,
  type MountedStorage,
  removeStorages,
  runUmount,
  StorageTable,
} from './storage.js';

/** Where kata's runtime puts everything it shares with the guest; the default root. */
export const DEFAULT_ROOT = '/run/kata-containers';
/** The agent's own state: bundles and runc's state. */
export const DEFAULT_STATE_DIR = '/run/sandbox-agent';

export interface AgentLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface SandboxAgentOptions {
  /** Directories request paths must stay below [default: `/run/kata-containers`]. The first one also holds pulled image bundles. */
  readonly roots?: readonly string[];
  /** Bundles and runc state [default: `/run/sandbox-agent`]. */
  readonly stateDir?: string;
  /** The runc executable [default: `runc`]. */
  readonly runc?: string;
  /** Pulls images for `image_guest_pull` storages; without it that driver is refused. */
  readonly pullImage?: ImagePuller;
  /** The guest's pause image (`config.json`, `rootfs/`) for the sandbox container [default: `/pause_bundle`]. */
  readonly pauseBundle?: string;
  /** Bytes of unread stdout (and of stderr) kept per process before the process is made to wait. */
  readonly outputLimit?: number;
  /**
   * Give the pod one IPC and one UTS namespace, made at CreateSandbox, that every container joins
   * [default: true]. Needs CAP_SYS_ADMIN; without it each container gets its own.
   */
  readonly sharedNamespaces?: boolean;
  /**
   * The agent's own paths besides its state directory: its listening sockets and the data hub's socket.
   * No request may mount, replace or remove them or a directory holding them.
   */
  readonly protectedPaths?: readonly string[];
  /** Where sysfs is mounted, for OnlineCPUMem [default: `/sys`]. */
  readonly sysfs?: string;
  /** How the network RPCs run `ip` (the executable, or a named network namespace for tests). */
  readonly network?: NetworkOptions;
  /** How SetGuestDateTime runs `date` (the executable, or an environment for tests). */
  readonly clock?: ClockOptions;
  readonly logger?: AgentLogger;
  /**
   * Tests only: runs once CreateContainer holds the container's root and bind-mount sources, before
   * it mounts them into the bundle.
   */
  readonly afterContainerHold?: () => void | Promise<void>;
}

type ContainerState = 'created' | 'running' | 'stopped';

interface Container {
  readonly id: string;
  readonly bundle: string;
  readonly storages: MountedStorage[];
  /** The root and bind-mount sources as runc finds them, bound into the bundle. */
  readonly mounts: ContainerMounts;
  readonly init: AgentProcess;
  /** CreateContainer's `exec_id`: kata's runtime names the container's own process by it (the container id). */
  readonly initExecId: string;
  readonly execs: Map<string, AgentProcess>;
  state: ContainerState;
  readonly createdAt: number;
  /** Joins this container's PID namespace at StartContainer (the pod shares one). */
  readonly joinPidnsOf: Container | undefined;
}

interface Sandbox {
  readonly id: string;
  readonly hostname: string;
  readonly storages: MountedStorage[];
  /** The pod's IPC and UTS namespaces, kept by bind mounts on these files; every container joins them. */
  readonly namespaces: { readonly ipc: string; readonly uts: string } | undefined;
  /** CreateSandbox asked for one PID namespace for the pod. */
  readonly sharedPidns: boolean;
  /** The container whose PID namespace the pod shares: the first one created that shares it. */
  pidnsHolder: Container | undefined;
}

/** Where CopyFile writes, below the first root: kata's share directory for a guest without a shared filesystem. */
const SHARE_DIR = 'shared/containers';
const SYSFS_BLOCK_SIZE = '/sys/devices/system/memory/block_size_bytes';
const SYSFS_HOTPLUG_PROBE = '/sys/devices/system/memory/probe';

const silent: AgentLogger = { info() {}, warn() {} };

export class SandboxAgent {
  readonly stateDir: string;
  readonly runc: Runc;
  /** The guest's interfaces, routes and neighbours. */
  readonly network: Network;
  #roots: string[] = [];
  #protected: string[] = [];
  /** The bundles' directory, canonical (its mounts are found by path in /proc/self/mountinfo). */
  #containersDir = '';
  readonly #requestedRoots: readonly string[];
  readonly #options: SandboxAgentOptions;
  readonly #log: AgentLogger;
  #sandbox: Sandbox | undefined;
  readonly #containers = new Map<string, Container>();
  readonly #oom: OomEvents;
  /** The pod's storages by mount point: a storage named again is shared, not set up twice. */
  readonly #storages = new StorageTable();

  constructor(options: SandboxAgentOptions = {}) {
    this.#options = options;
    this.#requestedRoots = options.roots ?? [DEFAULT_ROOT];
    this.stateDir = options.stateDir ?? DEFAULT_STATE_DIR;
    this.runc = new Runc({ binary: options.runc, stateRoot: join(this.stateDir, 'runc') });
    this.#oom = new OomEvents(this.runc.binary, this.runc.stateRoot);
    this.#log = options.logger ?? silent;
    this.network = new Network(options.network);
  }

  /** Makes the roots and state directories; call once before serving. */
  async init(): Promise<void> {
    if (this.#requestedRoots.length === 0) throw new Error('sandbox-agent needs at least one root');
    this.#roots = [];
    for (const r of this.#requestedRoots) {
      await makeDirectory(r, 0o755);
      this.#roots.push(await realpath(r));
    }
    await makeDirectory(join(this.stateDir, 'runc'), 0o700);
    this.#protected = [];
    for (const p of [this.stateDir, ...(this.#options.protectedPaths ?? [])]) {
      // Canonical as the roots are: the real directory holding it, then its own name.
      const dir = await realpath(dirname(p)).catch(() => dirname(p));
      this.#protected.push(join(dir, basename(p)));
    }
    await makeDirectory(join(this.stateDir, 'containers'), 0o700);
    this.#containersDir = await realpath(join(this.stateDir, 'containers'));
    // Containers of an earlier run of the agent: their processes lost their parent, nobody can wait
    // for them, and the host will create its pod again. They go, their bundles' mounts first.
    for (const id of await readdir(this.#containersDir)) {
      await this.runc
        .delete(id)
        .catch((e) => this.#log.warn({ container: id, err: (e as Error).message }, 'stale container'));
      try {
        await removeBundle(this.#containersDir, id);
        this.#log.warn({ container: id }, 'removed a container left by an earlier run');
      } catch (e) {
        this.#log.warn({ container: id, err: (e as Error).message }, 'cannot remove a stale container');
      }
    }
  }

  /** The canonical roots. */
  get roots(): readonly string[] {
    return this.#roots;
  }

  /** Storage mount points in use, with how many containers (or the sandbox) use each. */
  get storagesInUse(): ReadonlyMap<string, number> {
    return this.#storages.inUse;
  }

  get sandboxId(): string | undefined {
    return this.#sandbox?.id;
  }

  // ----- sandbox -----

  async createSandbox(req: Decoded, signal?: AbortSignal): Promise<void> {
    if (this.#sandbox)
      throw new SandboxAgentError(Code.ALREADY_EXISTS, `sandbox ${this.#sandbox.id} already exists`);
    const id = checkId(String(req.sandbox_id ?? ''), 'sandbox id');
    if ((req.kernel_modules ?? []).length > 0)
      throw new UnimplementedRpc('CreateSandbox with kernel_modules');
    if (req.guest_hook_path) throw new UnimplementedRpc('CreateSandbox with guest_hook_path');
    const hostname = String(req.hostname ?? '');
    const storages = await addStorages(req.storages ?? [], {
      roots: this.#roots,
      signal,
      table: this.#storages,
      protectedPaths: this.#protected,
    });
    let namespaces: Sandbox['namespaces'];
    try {
      namespaces =
        this.#options.sharedNamespaces === false ? undefined : await this.#sharedNamespaces(hostname);
    } catch (e) {
      await removeStorages(storages).catch(() => {});
      throw e;
    }
    this.#sandbox = {
      id,
      hostname,
      storages,
      namespaces,
      sharedPidns: Boolean(req.sandbox_pidns),
      pidnsHolder: undefined,
    };
    this.#log.info({ sandbox: id, storages: storages.length }, 'sandbox created');
  }

  /**
   * The pod's shared IPC and UTS namespaces, as kata's agent makes them at CreateSandbox: `unshare`
   * (util-linux) creates both, keeps them by bind-mounting them on files, and sets the sandbox's
   * hostname inside the new UTS namespace.
   */
  async #sharedNamespaces(hostname: string): Promise<Sandbox['namespaces']> {
    const dir = join(this.stateDir, 'sandbox-ns');
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { mode: 0o700 });
    const ipc = join(dir, 'ipc');
    const uts = join(dir, 'uts');
    await writeFile(ipc, '');
    await writeFile(uts, '');
    const inside = hostname === '' ? ['true'] : ['hostname', hostname];
    await new Promise<void>((resolve, reject) => {
      execFile(
        'unshare',
        [`--ipc=${ipc}`, `--uts=${uts}`, ...inside],
        { timeout: 30_000 },
        (err, _out, stderr) => {
          if (err)
            reject(
              new RuntimeFailed(`creating the sandbox's namespaces: ${(stderr || err.message).trim()}`, {
                cause: err,
              }),
            );
          else resolve();
        },
      );
    });
    return { ipc, uts };
  }

  async destroySandbox(): Promise<void> {
    for (const id of [...this.#containers.keys()]) await this.removeContainer({ container_id: id });
    if (this.#sandbox) {
      await removeStorages(this.#sandbox.storages);
      const ns = this.#sandbox.namespaces;
      if (ns) {
        await runUmount(ns.ipc);
        await runUmount(ns.uts);
        await rm(dirname(ns.ipc), { recursive: true, force: true });
      }
      await removeCgroups(this.#sandbox.id);
      this.#log.info({ sandbox: this.#sandbox.id }, 'sandbox destroyed');
    }
    this.#sandbox = undefined;
  }

  // ----- containers -----

  #container(id: string): Container {
    const c = this.#containers.get(id);
    if (!c) throw new NotFound(Code.INVALID_ARGUMENT, `Invalid container id ${shown(id)}`);
    return c;
  }

  #process(cid: string, eid: string): AgentProcess {
    const c = this.#container(cid);
    if (eid === '' || eid === c.initExecId) return c.init;
    const p = c.execs.get(eid);
    if (!p) throw new NotFound(Code.NOT_FOUND, `Invalid exec id ${shown(eid)} in container ${shown(cid)}`);
    return p;
  }

  /**
   * Checks the spec's mounts: a bind mount's source must be below the roots; any other mount must not
   * name a guest path as its source (`proc`, `tmpfs`, `devpts`… do not), so the host cannot mount one of
   * the guest's block devices into a container. Returns the bind mounts, by their index in the spec.
   */
  async #checkMounts(spec: Decoded): Promise<BindSource[]> {
    const binds: BindSource[] = [];
    for (const [index, m] of ((spec.Mounts ?? []) as Decoded[]).entries()) {
      const options = (m.options ?? []) as string[];
      const source = String(m.source ?? '');
      if (m.type === 'bind' || options.includes('bind') || options.includes('rbind')) {
        const what = `source of mount ${shown(m.destination)}`;
        const checked = checkNotProtected(
          await resolveUnder(this.#roots, source, { what, mustExist: true }),
          this.#protected,
          what,
        );
        binds.push({ index, source: checked });
      } else if (source.startsWith('/')) {
        throw new InvalidRequest(
          `mount ${shown(m.destination)} of type ${shown(String(m.type ?? ''))} names the guest path ${shown(source)}; only bind mounts from below the agent's roots may`,
        );
      }
    }
    return binds;
  }

  async createContainer(req: Decoded, signal?: AbortSignal): Promise<void> {
    const createdAt = performance.now();
    const sandbox = this.#sandbox;
    if (!sandbox) throw new WrongState('CreateSandbox has not been called');
    const id = checkId(String(req.container_id ?? ''), 'container id');
    if (this.#containers.has(id))
      throw new SandboxAgentError(Code.ALREADY_EXISTS, `container ${id} already exists`);
    const initExecId = req.exec_id ? checkId(String(req.exec_id), 'exec id') : '';
    const spec = req.OCI as Decoded | null;
    if (!spec) throw new InvalidRequest('CreateContainer without an OCI spec');
    if ((req.devices ?? []).length > 0) throw new UnimplementedRpc('CreateContainer with devices');
    if ((req.shared_mounts ?? []).length > 0)
      throw new UnimplementedRpc('CreateContainer with shared_mounts');
    if (!spec.Process) throw new InvalidRequest('the OCI spec has no process');
    const hooks = spec.Hooks as Decoded | null;
    if (hooks && Object.values(hooks).some((h) => Array.isArray(h) && h.length > 0)) {
      throw new InvalidRequest('OCI hooks are not accepted from the host');
    }

    const bundle = join(this.#containersDir, id);
    await mkdir(bundle, { mode: 0o700 }).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'EEXIST')
        throw new SandboxAgentError(
          Code.ALREADY_EXISTS,
          `a bundle for ${id} is left over; remove the container first`,
        );
      throw e;
    });
    let storages: MountedStorage[] = [];
    let mounts: ContainerMounts | undefined;
    try {
      storages = await addStorages(req.storages ?? [], {
        roots: this.#roots,
        containerId: id,
        pullImage: this.#options.pullImage,
        pauseBundle: this.#options.pauseBundle,
        signal,
        table: this.#storages,
        protectedPaths: this.#protected,
      });
      const rootPath = checkNotProtected(
        await resolveUnder(this.#roots, String(spec.Root?.Path ?? ''), {
          what: 'container root',
          mustExist: true,
        }),
        this.#protected,
        'container root',
      );
      const binds = await this.#checkMounts(spec);
      // runc resolves config.json's paths when the container starts, long after these checks: it
      // gets what was checked, held and bound into the bundle, not the paths the host named.
      mounts = await bindContainerPaths(bundle, rootPath, binds, {
        roots: this.#roots,
        afterHold: this.#options.afterContainerHold,
      });
      const oci = specToOci(spec);
      oci.root = { path: mounts.rootfs, readonly: Boolean(spec.Root?.Readonly) };
      const ociMounts = oci.mounts as { source?: string }[];
      for (const [index, path] of mounts.sources) ociMounts[index]!.source = path;
      const linux = (oci.linux ?? {}) as Record<string, unknown>;
      // The pod's network is the guest's: no namespace of its own. Namespace paths name the host's
      // namespaces, meaningless here: IPC and UTS are the sandbox's, the others new (see the README).
      const shared = sandbox.namespaces;
      const namespaces = ((linux.namespaces ?? []) as { type: string }[])
        .filter((n) => n.type !== 'network')
        .map((n) =>
          n.type === 'ipc' && shared
            ? { type: 'ipc', path: shared.ipc }
            : n.type === 'uts' && shared
              ? { type: 'uts', path: shared.uts }
              : { type: n.type },
        );
      // As kata's agent: a container always gets a PID namespace, never the guest's.
      if (!namespaces.some((n) => n.type === 'pid')) namespaces.push({ type: 'pid' });
      linux.namespaces = namespaces;
      linux.cgroupsPath = `/sandbox-agent/${sandbox.id}/${id}`;
      oci.linux = linux;
      // The hostname is the pod's, set in the shared UTS namespace at CreateSandbox.
      if (shared) delete oci.hostname;
      await writeFile(join(bundle, 'config.json'), JSON.stringify(oci), { mode: 0o600 });
    } catch (e) {
      await mounts?.undo().catch(() => {});
      await removeStorages(storages).catch(() => {});
      await removeBundle(this.#containersDir, id).catch((err: Error) =>
        this.#log.warn(
          { container: id, err: err.message },
          'cannot remove the bundle of a refused container',
        ),
      );
      throw e;
    }
    const sharesPidns = sandbox.sharedPidns || Boolean(req.sandbox_pidns);
    const container: Container = {
      id,
      bundle,
      storages,
      mounts,
      init: Object.assign(new AgentProcess(this.#options.outputLimit), {
        terminal: Boolean(spec.Process.Terminal),
      }),
      initExecId,
      execs: new Map(),
      state: 'created',
      createdAt,
      joinPidnsOf: sharesPidns ? sandbox.pidnsHolder : undefined,
    };
    if (sharesPidns && !sandbox.pidnsHolder) sandbox.pidnsHolder = container;
    this.#containers.set(id, container);
    this.#log.info({ container: id, storages: storages.length }, 'container created');
  }

  async startContainer(req: Decoded): Promise<void> {
    const c = this.#container(String(req.container_id ?? ''));
    if (c.state !== 'created') throw new WrongState(`container ${c.id} is ${c.state}, not created`);
    if (c.joinPidnsOf) await this.#joinPidns(c, c.joinPidnsOf);
    c.state = 'running';
    try {
      await this.runc.run(c.init, c.id, c.bundle, join(c.bundle, 'init.pid'));
    } catch (e) {
      c.state = 'stopped';
      const detail = await errorOutput(c.init);
      throw new RuntimeFailed(`${(e as Error).message}${detail}`, { cause: e });
    }
    const stopWatching = this.#oom.watch(c.id);
    void c.init.wait().then((status) => {
      c.state = 'stopped';
      // Let runc report an OOM kill that ended the process before the watcher goes.
      setTimeout(stopWatching, 1000).unref();
      this.#log.info({ container: c.id, status }, 'container exited');
    });
    const first = firstOutput(c.init);
    void first.then((at) => {
      if (at !== undefined) {
        // With the agent's resident memory then (a pod running), read where only the console reaches.
        this.#log.info(
          {
            container: c.id,
            ms: Math.round((at - c.createdAt) * 10) / 10,
            agentRssKiB: Math.round(process.memoryUsage.rss() / 1024),
          },
          'first output, measured from CreateContainer',
        );
      }
    });
    this.#log.info({ container: c.id, pid: c.init.pid }, 'container started');
  }

  /**
   * The pod shares one PID namespace (CreateSandbox's or CreateContainer's `sandbox_pidns`): the first
   * container that shares it (normally the pause container) holds it, and the others join it through
   * its process, whose pid is only known once it runs; so the path goes into config.json here.
   */
  async #joinPidns(c: Container, holder: Container): Promise<void> {
    if (holder.state !== 'running' || holder.init.pid === undefined) {
      throw new WrongState(`the pod's PID namespace is held by container ${holder.id}, which is not running`);
    }
    const config = join(c.bundle, 'config.json');
    const oci = JSON.parse(await readFile(config, 'utf8')) as {
      linux?: { namespaces?: { type: string; path?: string }[] };
    };
    const namespaces = (oci.linux?.namespaces ?? []).filter((n) => n.type !== 'pid');
    namespaces.push({ type: 'pid', path: `/proc/${holder.init.pid}/ns/pid` });
    oci.linux = { ...oci.linux, namespaces };
    await writeFile(config, JSON.stringify(oci), { mode: 0o600 });
  }

  async execProcess(req: Decoded): Promise<void> {
    const c = this.#container(String(req.container_id ?? ''));
    const eid = checkId(String(req.exec_id ?? ''), 'exec id');
    if (c.state !== 'running') throw new WrongState(`container ${c.id} is ${c.state}, not running`);
    if (c.execs.has(eid) || eid === c.initExecId)
      throw new SandboxAgentError(Code.ALREADY_EXISTS, `exec ${eid} already exists in ${c.id}`);
    const proc = req.process as Decoded | null;
    if (!proc) throw new InvalidRequest('ExecProcess without a process');
    const p = new AgentProcess(this.#options.outputLimit);
    p.terminal = Boolean(proc.Terminal);
    c.execs.set(eid, p);
    const file = join(c.bundle, `exec-${eid}.json`);
    try {
      await writeFile(file, JSON.stringify(processToOci(proc)), { mode: 0o600 });
      await this.runc.exec(p, c.id, file, join(c.bundle, `exec-${eid}.pid`));
    } catch (e) {
      c.execs.delete(eid);
      const detail = await errorOutput(p);
      throw new RuntimeFailed(`${(e as Error).message}${detail}`, { cause: e });
    }
  }

  async signalProcess(req: Decoded): Promise<void> {
    const cid = String(req.container_id ?? '');
    const eid = String(req.exec_id ?? '');
    const p = this.#process(cid, eid);
    const signal = Number(req.signal ?? 0);
    if (p.status !== undefined) return; // already gone: nothing to signal
    const c = this.#container(cid);
    if (!p.started) {
      // Here the process of a container that was never started does not exist yet (see the README);
      // in kata's agent it would be waiting to start, and SIGKILL or SIGTERM would end it. So it ends.
      if (p !== c.init || (signal !== 9 && signal !== 15)) {
        throw new WrongState(`process ${eid || 'init'} of ${cid} has not started`);
      }
      c.state = 'stopped';
      p.abandon(128 + signal);
      return;
    }
    if (p === c.init) {
      await this.runc.kill(cid, signal);
      return;
    }
    try {
      process.kill(p.pid!, signal);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
    }
  }

  /** The host pid of a started process (the container's own when `eid` is empty), or undefined. */
  pidOf(cid: string, eid = ''): number | undefined {
    return this.#process(cid, eid).pid;
  }

  async waitProcess(req: Decoded, signal?: AbortSignal): Promise<number> {
    const cid = String(req.container_id ?? '');
    const eid = String(req.exec_id ?? '');
    const p = this.#process(cid, eid);
    const status = await abortable(p.wait(), signal);
    const c = this.#containers.get(cid);
    if (c && p !== c.init) c.execs.delete(eid); // reaped, as waitpid does
    return status;
  }

  async readStream(req: Decoded, which: 'stdout' | 'stderr', signal?: AbortSignal): Promise<Uint8Array> {
    const p = this.#process(String(req.container_id ?? ''), String(req.exec_id ?? ''));
    return p[which].read(Number(req.len ?? 0), signal);
  }

  async writeStdin(req: Decoded): Promise<number> {
    const p = this.#process(String(req.container_id ?? ''), String(req.exec_id ?? ''));
    const stdin = p.child?.stdin;
    if (!stdin || stdin.writableEnded || p.status !== undefined)
      throw new WrongState('the process has no open stdin');
    const data = req.data as Uint8Array;
    await new Promise<void>((resolve, reject) => stdin.write(data, (e) => (e ? reject(e) : resolve())));
    return data.length;
  }

  /** TtyWinResize: the size of the terminal runc reads from, which runc passes on to the process's. */
  async ttyWinResize(req: Decoded): Promise<void> {
    const p = this.#process(String(req.container_id ?? ''), String(req.exec_id ?? ''));
    const rows = Number(req.row ?? 0);
    const columns = Number(req.column ?? 0);
    if (![rows, columns].every((n) => Number.isInteger(n) && n >= 0 && n <= 0xffff))
      throw new InvalidRequest(`invalid terminal size ${rows}x${columns}`);
    if (!p.terminal) throw new WrongState('the process has no terminal');
    const tty = await hostTerminal(p);
    await new Promise<void>((resolve, reject) => {
      execFile(
        'stty',
        ['-F', tty, 'rows', String(rows), 'cols', String(columns)],
        { timeout: 10_000 },
        (err, _o, stderr) => {
          if (err)
            reject(
              new RuntimeFailed(`resizing the terminal: ${(stderr || err.message).trim()}`, { cause: err }),
            );
          else resolve();
        },
      );
    });
  }

  async closeStdin(req: Decoded): Promise<void> {
    const p = this.#process(String(req.container_id ?? ''), String(req.exec_id ?? ''));
    p.child?.stdin.end();
  }

  async removeContainer(req: Decoded): Promise<void> {
    const c = this.#container(String(req.container_id ?? ''));
    this.#oom.unwatch(c.id);
    if (c.init.started) await this.runc.delete(c.id); // before StartContainer runc has never seen it
    for (const p of [c.init, ...c.execs.values()]) {
      if (!p.started) p.abandon();
      else if (p.status === undefined) p.child?.kill('SIGKILL');
    }
    await Promise.race([
      Promise.all([c.init.wait(), ...[...c.execs.values()].map((p) => p.wait())]),
      new Promise((r) => setTimeout(r, 5_000).unref()),
    ]);
    this.#containers.delete(c.id);
    if (this.#sandbox?.pidnsHolder === c) this.#sandbox.pidnsHolder = undefined;
    // Each step is tried even if one before failed; the bundle's removal unmounts what is left in it.
    let first: unknown;
    for (const step of [
      () => c.mounts.undo(),
      () => removeStorages(c.storages),
      () => removeBundle(this.#containersDir, c.id),
    ]) {
      try {
        await step();
      } catch (e) {
        first ??= e;
      }
    }
    if (first !== undefined) throw first;
    this.#log.info({ container: c.id }, 'container removed');
  }

  /** `runc update --resources <file>`: the new limits of a running container's cgroup. */
  async updateContainer(req: Decoded): Promise<void> {
    const c = this.#container(String(req.container_id ?? ''));
    if (c.state !== 'running') throw new WrongState(`container ${c.id} is ${c.state}, not running`);
    const resources = resourcesToOci(req.resources ?? null);
    if (!resources) throw new InvalidRequest('UpdateContainer without resources');
    const file = join(c.bundle, 'update.json');
    await writeFile(file, JSON.stringify(resources), { mode: 0o600 });
    await this.runc.command(['update', '--resources', file, c.id], `updating container ${c.id}`);
  }

  /** `runc events --stats`: the container's cgroup statistics. */
  async statsContainer(req: Decoded): Promise<Decoded> {
    const c = this.#container(String(req.container_id ?? ''));
    if (c.state !== 'running') throw new WrongState(`container ${c.id} is ${c.state}, not running`);
    const out = await this.runc.command(['events', '--stats', c.id], `statistics of container ${c.id}`);
    const event = parseRuncJson(out);
    if (event.type !== 'stats') throw new RuntimeFailed(`runc events --stats ${c.id}: unexpected output`);
    return statsFromRunc((event.data ?? {}) as Record<string, unknown>);
  }

  async pauseContainer(req: Decoded): Promise<void> {
    const c = this.#container(String(req.container_id ?? ''));
    if (c.state !== 'running') throw new WrongState(`container ${c.id} is ${c.state}, not running`);
    await this.runc.command(['pause', c.id], `pausing container ${c.id}`);
  }

  async resumeContainer(req: Decoded): Promise<void> {
    const c = this.#container(String(req.container_id ?? ''));
    if (c.state !== 'running') throw new WrongState(`container ${c.id} is ${c.state}, not running`);
    await this.runc.command(['resume', c.id], `resuming container ${c.id}`);
  }

  /** What the runtime asks at sandbox start: memory block size, hotplug probe, the agent's details. */
  async guestDetails(req: Decoded, version: string): Promise<Decoded> {
    let blockSize = 0n;
    if (req.mem_block_size) {
      const text = await readFile(SYSFS_BLOCK_SIZE, 'utf8').catch((e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT') return '';
        throw e;
      });
      if (text.trim() !== '') {
        if (!/^[0-9a-fA-F]+$/.test(text.trim()))
          throw new RuntimeFailed(`${SYSFS_BLOCK_SIZE}: not a hexadecimal size`);
        blockSize = BigInt(`0x${text.trim()}`);
      }
    }
    const probe = req.mem_hotplug_probe
      ? await stat(SYSFS_HOTPLUG_PROBE).then(
          () => true,
          () => false,
        )
      : false;
    const status = await readFile('/proc/self/status', 'utf8').catch(() => '');
    return {
      mem_block_size_bytes: blockSize,
      support_mem_hotplug_probe: probe,
      agent_details: {
        version,
        init_daemon: process.pid === 1,
        device_handlers: [],
        storage_handlers: this.#options.pullImage ? ['bind', 'image_guest_pull', 'local'] : ['bind', 'local'],
        supports_seccomp: /^Seccomp:/m.test(status),
        extra_features: [],
      },
    };
  }

  /** CopyFile, below `<first root>/shared/containers` only, as kata's agent keeps it in its share directory. */
  async copyFile(req: Decoded): Promise<void> {
    const share = await resolveUnder(this.#roots, join(this.#roots[0]!, SHARE_DIR), {
      what: 'the share directory',
      create: true,
    });
    await copyFile([share], req, this.#protected);
  }

  /** GetVolumeStats: bytes and inodes of the filesystem holding a volume below the roots (statfs). */
  async volumeStats(req: Decoded): Promise<Decoded> {
    const path = await resolveUnder(this.#roots, String(req.volume_guest_path ?? ''), {
      what: 'volume path',
      mustExist: true,
    });
    const fs = await statfs(path, { bigint: true });
    const bytes = { total: fs.blocks * fs.bsize, available: fs.bfree * fs.bsize };
    return {
      usage: [
        { ...bytes, used: bytes.total - bytes.available, unit: 1 },
        { total: fs.files, available: fs.ffree, used: fs.files - fs.ffree, unit: 2 },
      ],
      volume_condition: { abnormal: false, message: 'OK' },
    };
  }

  /** OnlineCPUMem: hot-plugged CPUs and memory brought online. */
  onlineCpuMem(req: Decoded): Promise<void> {
    return onlineCpuMem(this.#options.sysfs ?? '/sys', req);
  }

  /** SetGuestDateTime: the guest's clock set to the request's time, logged with the clock before and after. */
  async setGuestDateTime(req: Decoded): Promise<void> {
    const { beforeMs, afterMs } = await setGuestDateTime(req, this.#options.clock);
    this.#log.info(
      { before: new Date(beforeMs).toISOString(), after: new Date(afterMs).toISOString() },
      'guest clock set',
    );
  }

  /** GetOOMEvent: the id of the next container that ran out of memory. */
  oomEvent(signal?: AbortSignal): Promise<string> {
    return this.#oom.next(signal);
  }

  /** Kills and removes everything: the agent is stopping. */
  async shutdown(): Promise<void> {
    this.#oom.close();
    await this.destroySandbox().catch((e) => this.#log.warn({ err: (e as Error).message }, 'cleanup failed'));
  }
}

/** The sandbox's cgroup directories (runc removes each container's own, not the parents it made). */
async function removeCgroups(sandboxId: string): Promise<void> {
  const base = '/sys/fs/cgroup';
  const hierarchies = await readdir(base).catch(() => [] as string[]);
  for (const dir of ['', ...hierarchies.map((h) => `/${h}`)]) {
    for (const path of [`${base}${dir}/sandbox-agent/${sandboxId}`, `${base}${dir}/sandbox-agent`]) {
      await rmdir(path).catch(() => {}); // absent, or still in use by another sandbox
    }
  }
}

/** runc's words when a start fails: what it wrote to the process's stderr. */
async function errorOutput(p: AgentProcess): Promise<string> {
  const bytes = await Promise.race([
    (p.terminal ? p.stdout : p.stderr).read(4096), // a terminal carries both
    new Promise<Uint8Array>((r) => setTimeout(() => r(new Uint8Array(0)), 200).unref()),
  ]);
  const text = Buffer.from(bytes).toString('utf8').trim();
  return text === '' ? '' : `: ${text}`;
}

function firstOutput(p: AgentProcess): Promise<number | undefined> {
  return Promise.race([p.stdout.first, p.stderr.first, p.wait().then(() => undefined)]);
}

function abortable<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
