// Containers from our OCI image layouts, run by Debian's runc as a kubelet or docker compose would run
// them: the image unpacked by skopeo and umoci, the pod's volumes laid out as Kubernetes lays them out
// (ConfigMap and Secret volumes as the kubelet's atomic writer does: `..data` links), the image's user,
// env and command unless the pod spec overrides them, and a network namespace of our own per pod so
// that every container listens on its upstream port (8080, 50004, 50003).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, posix } from 'node:path';

export interface ImageConfig {
  readonly User?: string;
  readonly Env?: readonly string[];
  readonly Cmd?: readonly string[];
  readonly Entrypoint?: readonly string[];
  readonly WorkingDir?: string;
}

export interface UnpackedImage {
  readonly rootfs: string;
  readonly config: ImageConfig;
}

function run(cmd: string, args: readonly string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** `layout:tag` for `arch`, unpacked into `dir/rootfs` (skopeo picks the platform, umoci unpacks). */
export function unpackImage(layout: string, tag: string, dir: string, arch = 'amd64'): UnpackedImage {
  const single = join(dir, 'single');
  const bundle = join(dir, 'bundle');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  run('skopeo', ['copy', '--quiet', '--override-arch', arch, `oci:${layout}:${tag}`, `oci:${single}:image`]);
  run('umoci', ['unpack', '--image', `${single}:image`, bundle]);
  const config = JSON.parse(run('skopeo', ['inspect', '--config', `oci:${single}:image`])) as {
    config: ImageConfig;
  };
  rmSync(single, { recursive: true, force: true });
  return { rootfs: join(bundle, 'rootfs'), config: config.config };
}

/** A pod's network namespace, with loopback up and `/etc/netns/<name>/hosts` naming `hosts` at 127.0.0.1. */
export class NetworkNamespace {
  constructor(
    readonly name: string,
    hosts: readonly string[] = [],
  ) {
    run('ip', ['netns', 'add', name]);
    run('ip', ['netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up']);
    // `ip netns exec` binds /etc/netns/<name>/* over /etc/*: the clients the test runs in the
    // namespace resolve the service names as the containers do.
    mkdirSync(this.etcDir, { recursive: true });
    writeFileSync(join(this.etcDir, 'hosts'), this.hostsFile(hosts));
  }

  get path(): string {
    return `/var/run/netns/${this.name}`;
  }

  get etcDir(): string {
    return `/etc/netns/${this.name}`;
  }

  hostsFile(hosts: readonly string[]): string {
    return `127.0.0.1\tlocalhost ${hosts.join(' ')}\n::1\tlocalhost\n`;
  }

  /** Runs a command inside the namespace. */
  exec(
    cmd: string,
    args: readonly string[],
    timeoutMs = 60_000,
  ): { code: number; stdout: string; stderr: string } {
    try {
      const stdout = execFileSync('ip', ['netns', 'exec', this.name, cmd, ...args], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: timeoutMs,
      });
      return { code: 0, stdout, stderr: '' };
    } catch (e) {
      const err = e as { status?: number; stdout?: string; stderr?: string };
      return { code: err.status ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
    }
  }

  /** A kubelet-style HTTP(S) probe (HTTPS without verifying the certificate, as the kubelet does). */
  probe(url: string): number {
    const r = this.exec('curl', ['-sk', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '5', url]);
    return Number(r.stdout) || 0;
  }

  remove(): void {
    try {
      run('ip', ['netns', 'delete', this.name]);
    } catch {
      // already gone
    }
    rmSync(this.etcDir, { recursive: true, force: true });
  }
}

/** A pod volume, laid out on the host as the kubelet lays it out. */
export type Volume =
  | { readonly configMap: Readonly<Record<string, string | Buffer>>; readonly defaultMode?: number }
  | { readonly secret: Readonly<Record<string, string | Buffer>>; readonly defaultMode?: number }
  | { readonly emptyDir: true }
  | { readonly hostPath: string };

export interface VolumeMount {
  readonly name: string;
  readonly mountPath: string;
  readonly subPath?: string;
  readonly readOnly?: boolean;
}

export interface ContainerSpec {
  readonly name: string;
  readonly image: UnpackedImage;
  /** Kubernetes' `command` (replaces the image's entrypoint and command) and `args`. */
  readonly command?: readonly string[];
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly volumeMounts?: readonly VolumeMount[];
  readonly securityContext?: {
    readonly runAsNonRoot?: boolean;
    readonly runAsUser?: number;
    readonly readOnlyRootFilesystem?: boolean;
    readonly allowPrivilegeEscalation?: boolean;
    readonly dropAllCapabilities?: boolean;
  };
  /** Service names that resolve to the pod (a compose network's names), written to /etc/hosts. */
  readonly hosts?: readonly string[];
  /** Kubernetes' `resources.limits.memory`, in bytes: the container's memory cgroup limit. */
  readonly memoryLimitBytes?: number;
}

export interface RunningContainer {
  readonly id: string;
  readonly process: ChildProcess;
  output(): string;
  exited(): boolean;
  /** The most memory its cgroup has held (cgroup v1 max_usage_in_bytes or v2 memory.peak), if known. */
  memoryPeakBytes(): number | undefined;
  /** Sends `signal` through runc and waits for the container to end; its exit code and how long. */
  stop(signal?: string, timeoutMs?: number): Promise<{ code: number | null; ms: number }>;
}

function writeAtomicWriterVolume(
  dir: string,
  files: Readonly<Record<string, string | Buffer>>,
  mode = 0o644,
  generation = 0,
): void {
  // The kubelet's atomic writer: the files in a time-stamped folder, `..data` linking to it, and one
  // link per key through `..data`, so that an update swaps one link.
  const stamp = `..2026_01_01_00_00_${String(generation).padStart(2, '0')}.000000000`;
  mkdirSync(join(dir, stamp), { recursive: true });
  for (const [key, value] of Object.entries(files)) {
    writeFileSync(join(dir, stamp, key), value);
    chmodSync(join(dir, stamp, key), mode);
  }
  let previous: string | undefined;
  try {
    previous = readlinkSync(join(dir, '..data'));
  } catch {
    previous = undefined;
  }
  const before = previous === undefined ? [] : readdirSync(join(dir, previous));
  // An update: `..data_tmp` renamed over `..data`, then the key links added and removed, then the old
  // folder deleted.
  symlinkSync(stamp, join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  for (const key of Object.keys(files))
    if (!before.includes(key)) symlinkSync(posix.join('..data', key), join(dir, key));
  for (const key of before) if (!Object.hasOwn(files, key)) rmSync(join(dir, key));
  if (previous !== undefined) rmSync(join(dir, previous), { recursive: true });
}

/** A pod: volumes on the host under `dir`, containers in one network namespace. */
export class Pod {
  private readonly volumeDirs = new Map<string, string>();
  private readonly generations = new Map<string, number>();
  private readonly runcRoot: string;
  private readonly running: RunningContainer[] = [];
  private template: Record<string, unknown> | undefined;

  constructor(
    private readonly dir: string,
    readonly netns: NetworkNamespace,
    volumes: Readonly<Record<string, Volume>>,
  ) {
    this.runcRoot = join(dir, 'runc-state');
    mkdirSync(this.runcRoot, { recursive: true });
    for (const [name, v] of Object.entries(volumes)) {
      if ('hostPath' in v) {
        this.volumeDirs.set(name, v.hostPath);
        continue;
      }
      const vdir = join(dir, 'volumes', name);
      mkdirSync(vdir, { recursive: true });
      if ('emptyDir' in v) chmodSync(vdir, 0o777);
      else writeAtomicWriterVolume(vdir, 'configMap' in v ? v.configMap : v.secret, v.defaultMode);
      this.volumeDirs.set(name, vdir);
    }
  }

  /** Replaces a ConfigMap or Secret volume's files as the kubelet does when the object changes. */
  update(name: string, files: Readonly<Record<string, string | Buffer>>, mode = 0o644): void {
    const generation = (this.generations.get(name) ?? 0) + 1;
    this.generations.set(name, generation);
    writeAtomicWriterVolume(this.volume(name), files, mode, generation);
  }

  /** The host folder of a volume (to look at what a container wrote, or to stage files). */
  volume(name: string): string {
    const d = this.volumeDirs.get(name);
    if (d === undefined) throw new Error(`no volume ${name}`);
    return d;
  }

  private runcTemplate(): Record<string, unknown> {
    if (this.template === undefined) {
      const tdir = join(this.dir, 'spec-template');
      mkdirSync(tdir, { recursive: true });
      rmSync(join(tdir, 'config.json'), { force: true });
      run('runc', ['spec', '--bundle', tdir]);
      this.template = JSON.parse(readFileSync(join(tdir, 'config.json'), 'utf8')) as Record<string, unknown>;
    }
    return structuredClone(this.template);
  }

  start(c: ContainerSpec): RunningContainer {
    const id = `${this.netns.name}-${c.name}`;
    const bundle = join(this.dir, 'bundles', c.name);
    mkdirSync(bundle, { recursive: true });
    const spec = this.runcTemplate() as {
      process: Record<string, unknown>;
      root: Record<string, unknown>;
      mounts: Record<string, unknown>[];
      linux: { namespaces: { type: string; path?: string }[] } & Record<string, unknown>;
      hostname?: string;
    };
    const [imageUid, imageGid] = (c.image.config.User ?? '0:0').split(':').map(Number) as [number, number?];
    const uid = c.securityContext?.runAsUser ?? imageUid;
    if (c.securityContext?.runAsNonRoot === true && uid === 0)
      throw new Error(`container ${c.name} has runAsNonRoot and its image will run as root`);
    const cmd = c.command ?? [...(c.image.config.Entrypoint ?? []), ...(c.image.config.Cmd ?? [])];
    const args =
      c.command !== undefined
        ? (c.args ?? [])
        : c.args !== undefined
          ? [...(c.image.config.Entrypoint ?? []), ...c.args]
          : [];
    const env = [...(c.image.config.Env ?? [])];
    for (const [k, v] of Object.entries(c.env ?? {})) {
      const i = env.findIndex((e) => e.startsWith(`${k}=`));
      if (i >= 0) env[i] = `${k}=${v}`;
      else env.push(`${k}=${v}`);
    }
    spec.process.terminal = false;
    spec.process.user = { uid, gid: imageGid ?? uid };
    spec.process.args = [...cmd, ...args];
    spec.process.env = env;
    spec.process.cwd = c.image.config.WorkingDir || '/';
    if (c.securityContext?.allowPrivilegeEscalation === false) spec.process.noNewPrivileges = true;
    if (c.securityContext?.dropAllCapabilities === true)
      spec.process.capabilities = {
        bounding: [],
        effective: [],
        permitted: [],
        inheritable: [],
        ambient: [],
      };
    spec.root = { path: c.image.rootfs, readonly: c.securityContext?.readOnlyRootFilesystem === true };
    spec.hostname = c.name;
    // With a limit, a cgroup at a known path (runc removes it with the container), to read its peak.
    const cgroup = `broker-test-${id}`;
    if (c.memoryLimitBytes !== undefined) {
      spec.linux.cgroupsPath = `/${cgroup}`;
      spec.linux.resources = {
        ...(spec.linux.resources as Record<string, unknown> | undefined),
        memory: { limit: c.memoryLimitBytes },
      };
    }
    spec.linux.namespaces = spec.linux.namespaces
      .filter((n) => n.type !== 'network')
      .concat([{ type: 'network', path: this.netns.path }]);
    const hostsFile = join(bundle, 'hosts');
    writeFileSync(hostsFile, this.netns.hostsFile(c.hosts ?? []));
    spec.mounts.push({
      destination: '/etc/hosts',
      type: 'bind',
      source: hostsFile,
      options: ['rbind', 'ro'],
    });
    for (const m of c.volumeMounts ?? []) {
      const vdir = this.volume(m.name);
      const source = m.subPath === undefined ? vdir : join(vdir, m.subPath);
      spec.mounts.push({
        destination: m.mountPath,
        type: 'bind',
        source,
        options: ['rbind', m.readOnly === true ? 'ro' : 'rw'],
      });
    }
    writeFileSync(join(bundle, 'config.json'), JSON.stringify(spec, null, 1));
    const child = spawn('runc', ['--root', this.runcRoot, 'run', '--bundle', bundle, id], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    let ended = false;
    const exit = new Promise<number | null>((res) =>
      child.on('exit', (code) => {
        ended = true;
        res(code);
      }),
    );
    const runcRoot = this.runcRoot;
    const container: RunningContainer = {
      id,
      process: child,
      output: () => out,
      exited: () => ended,
      memoryPeakBytes() {
        if (c.memoryLimitBytes === undefined) return undefined;
        for (const f of [
          `/sys/fs/cgroup/memory/${cgroup}/memory.max_usage_in_bytes`,
          `/sys/fs/cgroup/${cgroup}/memory.peak`,
        ]) {
          try {
            return Number(readFileSync(f, 'utf8').trim());
          } catch {
            // not this cgroup version, or the container is gone
          }
        }
        return undefined;
      },
      async stop(signal = 'TERM', timeoutMs = 30_000) {
        const t0 = performance.now();
        if (!ended) {
          try {
            run('runc', ['--root', runcRoot, 'kill', id, signal]);
          } catch {
            // it ended meanwhile
          }
        }
        const timer = setTimeout(() => {
          try {
            run('runc', ['--root', runcRoot, 'kill', id, 'KILL']);
          } catch {
            // gone
          }
        }, timeoutMs);
        const code = await exit;
        clearTimeout(timer);
        const ms = performance.now() - t0;
        try {
          run('runc', ['--root', runcRoot, 'delete', '--force', id]);
        } catch {
          // runc removed it when it ended
        }
        return { code, ms };
      },
    };
    this.running.push(container);
    return container;
  }

  /** Stops every container still running and removes the namespace. */
  async remove(): Promise<void> {
    await Promise.all(this.running.filter((c) => !c.exited()).map((c) => c.stop('KILL', 5_000)));
    this.netns.remove();
  }
}

/** Polls `probe` until it answers 200; the milliseconds it took. */
export async function waitForProbe(
  probe: () => number,
  container: RunningContainer,
  timeoutMs = 60_000,
): Promise<number> {
  const t0 = performance.now();
  while (performance.now() - t0 < timeoutMs) {
    if (container.exited()) throw new Error(`container ${container.id} ended:\n${container.output()}`);
    if (probe() === 200) return performance.now() - t0;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `container ${container.id} did not answer its probe in ${timeoutMs} ms:\n${container.output()}`,
  );
}

export function hostDir(path: string, uid?: number): string {
  mkdirSync(path, { recursive: true });
  if (uid !== undefined) execFileSync('chown', ['-R', `${uid}:${uid}`, path]);
  return path;
}
