/**
 * kata's `grpc.Spec` (oci.proto: the OCI runtime spec with PascalCase field names, every field present
 * with its proto3 default once decoded) turned into the OCI runtime spec JSON that runc reads from
 * `config.json`. Zero values of optional settings (resources, rlimits, console size) are left out, as
 * the OCI spec's "absent" is what proto3's zero stands for there.
 */

// biome-ignore lint/suspicious/noExplicitAny: decoded protobuf messages are plain, loosely typed objects
type Msg = Record<string, any>;
type Json = Record<string, unknown>;

const num = (v: unknown): number => (typeof v === 'bigint' ? Number(v) : typeof v === 'number' ? v : 0);
const list = (v: unknown): Msg[] => (Array.isArray(v) ? (v as Msg[]) : []);
const strings = (v: unknown): string[] => (Array.isArray(v) ? (v as string[]) : []);

/** Copies the members whose value is not a zero, empty or undefined value. */
function compact(o: Json): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(o)) {
    if (v === undefined || v === null || v === '' || v === 0 || v === false) continue;
    if (Array.isArray(v) && v.length === 0) continue;
    if (typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0) continue;
    out[k] = v;
  }
  return out;
}

export function processToOci(p: Msg): Json {
  const user = (p.User ?? {}) as Msg;
  const caps = p.Capabilities as Msg | null;
  return {
    terminal: Boolean(p.Terminal),
    ...(p.ConsoleSize && {
      consoleSize: { height: num(p.ConsoleSize.Height), width: num(p.ConsoleSize.Width) },
    }),
    user: compact({
      uid: num(user.UID),
      gid: num(user.GID),
      additionalGids: list(user.AdditionalGids).map(num),
      username: user.Username,
    }),
    args: strings(p.Args),
    env: strings(p.Env),
    cwd: p.Cwd || '/',
    ...(caps && {
      capabilities: {
        bounding: strings(caps.Bounding),
        effective: strings(caps.Effective),
        inheritable: strings(caps.Inheritable),
        permitted: strings(caps.Permitted),
        ambient: strings(caps.Ambient),
      },
    }),
    ...(list(p.Rlimits).length > 0 && {
      rlimits: list(p.Rlimits).map((r) => ({ type: r.Type, hard: num(r.Hard), soft: num(r.Soft) })),
    }),
    noNewPrivileges: Boolean(p.NoNewPrivileges),
    ...compact({
      apparmorProfile: p.ApparmorProfile,
      oomScoreAdj: num(p.OOMScoreAdj),
      selinuxLabel: p.SelinuxLabel,
    }),
  };
}

function hooks(h: Msg | null): Json | undefined {
  if (!h) return undefined;
  const one = (x: Msg) =>
    compact({ path: x.Path, args: strings(x.Args), env: strings(x.Env), timeout: num(x.Timeout) });
  return compact({
    prestart: list(h.Prestart).map(one),
    createRuntime: list(h.CreateRuntime).map(one),
    createContainer: list(h.CreateContainer).map(one),
    startContainer: list(h.StartContainer).map(one),
    poststart: list(h.Poststart).map(one),
    poststop: list(h.Poststop).map(one),
  });
}

/** `LinuxResources` as the OCI spec (and `runc update --resources`) spells it. */
export function resourcesToOci(r: Msg | null): Json | undefined {
  if (!r) return undefined;
  const weight = (d: Msg) =>
    compact({
      major: num(d.Major),
      minor: num(d.Minor),
      weight: num(d.Weight),
      leafWeight: num(d.LeafWeight),
    });
  const throttle = (d: Msg) => ({ major: num(d.Major), minor: num(d.Minor), rate: num(d.Rate) });
  return compact({
    devices: list(r.Devices).map((d) => ({
      allow: Boolean(d.Allow),
      ...compact({ type: d.Type, access: d.Access }),
      ...(num(d.Major) !== 0 || d.Type === 'c' || d.Type === 'b' ? { major: num(d.Major) } : {}),
      ...(num(d.Minor) !== 0 || d.Type === 'c' || d.Type === 'b' ? { minor: num(d.Minor) } : {}),
    })),
    memory: r.Memory
      ? compact({
          limit: num(r.Memory.Limit),
          reservation: num(r.Memory.Reservation),
          swap: num(r.Memory.Swap),
          kernel: num(r.Memory.Kernel),
          kernelTCP: num(r.Memory.KernelTCP),
          swappiness: num(r.Memory.Swappiness),
          disableOOMKiller: Boolean(r.Memory.DisableOOMKiller),
        })
      : undefined,
    cpu: r.CPU
      ? compact({
          shares: num(r.CPU.Shares),
          quota: num(r.CPU.Quota),
          period: num(r.CPU.Period),
          realtimeRuntime: num(r.CPU.RealtimeRuntime),
          realtimePeriod: num(r.CPU.RealtimePeriod),
          cpus: r.CPU.Cpus,
          mems: r.CPU.Mems,
        })
      : undefined,
    pids: r.Pids && num(r.Pids.Limit) !== 0 ? { limit: num(r.Pids.Limit) } : undefined,
    blockIO: r.BlockIO
      ? compact({
          weight: num(r.BlockIO.Weight),
          leafWeight: num(r.BlockIO.LeafWeight),
          weightDevice: list(r.BlockIO.WeightDevice).map(weight),
          throttleReadBpsDevice: list(r.BlockIO.ThrottleReadBpsDevice).map(throttle),
          throttleWriteBpsDevice: list(r.BlockIO.ThrottleWriteBpsDevice).map(throttle),
          throttleReadIOPSDevice: list(r.BlockIO.ThrottleReadIOPSDevice).map(throttle),
          throttleWriteIOPSDevice: list(r.BlockIO.ThrottleWriteIOPSDevice).map(throttle),
        })
      : undefined,
    hugepageLimits: list(r.HugepageLimits).map((h) => ({ pageSize: h.Pagesize, limit: num(h.Limit) })),
    network: r.Network
      ? compact({
          classID: num(r.Network.ClassID),
          priorities: list(r.Network.Priorities).map((p) => ({ name: p.Name, priority: num(p.Priority) })),
        })
      : undefined,
  });
}

function linux(l: Msg | null): Json | undefined {
  if (!l) return undefined;
  const idMap = (m: Msg) => ({ containerID: num(m.ContainerID), hostID: num(m.HostID), size: num(m.Size) });
  const seccomp = l.Seccomp as Msg | null;
  return compact({
    uidMappings: list(l.UIDMappings).map(idMap),
    gidMappings: list(l.GIDMappings).map(idMap),
    sysctl: l.Sysctl ?? {},
    resources: resourcesToOci(l.Resources),
    cgroupsPath: l.CgroupsPath,
    namespaces: list(l.Namespaces).map((n) => compact({ type: n.Type, path: n.Path })),
    devices: list(l.Devices).map((d) =>
      compact({
        path: d.Path,
        type: d.Type,
        major: num(d.Major),
        minor: num(d.Minor),
        fileMode: num(d.FileMode),
        uid: num(d.UID),
        gid: num(d.GID),
      }),
    ),
    seccomp: seccomp
      ? compact({
          defaultAction: seccomp.DefaultAction,
          architectures: strings(seccomp.Architectures),
          flags: strings(seccomp.Flags),
          syscalls: list(seccomp.Syscalls).map((s) => ({
            names: strings(s.Names),
            action: s.Action,
            ...(s.errnoret !== undefined && { errnoRet: num(s.errnoret) }),
            ...(list(s.Args).length > 0 && {
              args: list(s.Args).map((a) =>
                compact({ index: num(a.Index), value: num(a.Value), valueTwo: num(a.ValueTwo), op: a.Op }),
              ),
            }),
          })),
        })
      : undefined,
    rootfsPropagation: l.RootfsPropagation,
    maskedPaths: strings(l.MaskedPaths),
    readonlyPaths: strings(l.ReadonlyPaths),
    mountLabel: l.MountLabel,
    intelRdt: l.IntelRdt ? compact({ l3CacheSchema: l.IntelRdt.L3CacheSchema }) : undefined,
  });
}

/** The OCI runtime spec JSON of a decoded `grpc.Spec`. */
export function specToOci(spec: Msg): Json {
  const oci: Json = {
    ociVersion: spec.Version || '1.0.2',
    ...(spec.Process && { process: processToOci(spec.Process) }),
    root: { path: spec.Root?.Path ?? '', readonly: Boolean(spec.Root?.Readonly) },
    ...compact({ hostname: spec.Hostname }),
    mounts: list(spec.Mounts).map((m) =>
      compact({ destination: m.destination, type: m.type, source: m.source, options: strings(m.options) }),
    ),
  };
  const h = hooks(spec.Hooks);
  if (h && Object.keys(h).length > 0) oci.hooks = h;
  if (spec.Annotations && Object.keys(spec.Annotations).length > 0) oci.annotations = spec.Annotations;
  const l = linux(spec.Linux);
  if (l) oci.linux = l;
  return oci;
}
