/**
 * Our own `.proto` text for the kata agent's ttrpc API (`grpc.AgentService`), written from the field
 * names and numbers of kata-containers' `src/libs/protocols/protos/{agent,oci,types}.proto`.
 *
 * Names are verbatim (snake_case in agent.proto, PascalCase in oci.proto, mixed in types.proto): the policy
 * input is keyed by them. Every request message the policy reads is here, with everything it contains.
 * Responses are forwarded as raw bytes, so only `ReadStreamResponse` (redacted on deny) is defined.
 */

import { defineProto, type ProtoRoot } from '@broker/ttrpc';
import { AgentPolicyError } from './errors.js';

export const TYPES_PROTO = `
syntax = "proto3";
package types;

enum IPFamily { v4 = 0; v6 = 1; }
enum FSGroupChangePolicy { Always = 0; OnRootMismatch = 1; }

message IPAddress {
  IPFamily family = 1;
  string address = 2;
  string mask = 3;
}

message Interface {
  string device = 1;
  string name = 2;
  repeated IPAddress IPAddresses = 3;
  uint64 mtu = 4;
  string hwAddr = 5;
  string devicePath = 6;
  string type = 7;
  uint32 raw_flags = 8;
}

message Route {
  string dest = 1;
  string gateway = 2;
  string device = 3;
  string source = 4;
  uint32 scope = 5;
  IPFamily family = 6;
  uint32 flags = 7;
  uint32 mtu = 8;
}

message ARPNeighbor {
  IPAddress toIPAddress = 1;
  string device = 2;
  string lladdr = 3;
  int32 state = 4;
  int32 flags = 5;
}
`;

export const OCI_PROTO = `
syntax = "proto3";
package grpc;

message Spec {
  string Version = 1;
  Process Process = 2;
  Root Root = 3;
  string Hostname = 4;
  repeated Mount Mounts = 5;
  Hooks Hooks = 6;
  map<string, string> Annotations = 7;
  Linux Linux = 8;
  Solaris Solaris = 9;
  Windows Windows = 10;
}

message Process {
  bool Terminal = 1;
  Box ConsoleSize = 2;
  User User = 3;
  repeated string Args = 4;
  repeated string Env = 5;
  string Cwd = 6;
  LinuxCapabilities Capabilities = 7;
  repeated POSIXRlimit Rlimits = 8;
  bool NoNewPrivileges = 9;
  string ApparmorProfile = 10;
  int64 OOMScoreAdj = 11;
  string SelinuxLabel = 12;
}

message Box {
  uint32 Height = 1;
  uint32 Width = 2;
}

message User {
  uint32 UID = 1;
  uint32 GID = 2;
  repeated uint32 AdditionalGids = 3;
  string Username = 4;
}

message LinuxCapabilities {
  repeated string Bounding = 1;
  repeated string Effective = 2;
  repeated string Inheritable = 3;
  repeated string Permitted = 4;
  repeated string Ambient = 5;
}

message POSIXRlimit {
  string Type = 1;
  uint64 Hard = 2;
  uint64 Soft = 3;
}

message Mount {
  string destination = 1;
  string source = 2;
  string type = 3;
  repeated string options = 4;
}

message Root {
  string Path = 1;
  bool Readonly = 2;
}

message Hooks {
  repeated Hook Prestart = 1;
  repeated Hook Poststart = 2;
  repeated Hook Poststop = 3;
  repeated Hook CreateRuntime = 4;
  repeated Hook CreateContainer = 5;
  repeated Hook StartContainer = 6;
}

message Hook {
  string Path = 1;
  repeated string Args = 2;
  repeated string Env = 3;
  int64 Timeout = 4;
}

message Linux {
  repeated LinuxIDMapping UIDMappings = 1;
  repeated LinuxIDMapping GIDMappings = 2;
  map<string, string> Sysctl = 3;
  LinuxResources Resources = 4;
  string CgroupsPath = 5;
  repeated LinuxNamespace Namespaces = 6;
  repeated LinuxDevice Devices = 7;
  LinuxSeccomp Seccomp = 8;
  string RootfsPropagation = 9;
  repeated string MaskedPaths = 10;
  repeated string ReadonlyPaths = 11;
  string MountLabel = 12;
  LinuxIntelRdt IntelRdt = 13;
}

message Windows { string dummy = 1; }
message Solaris { string dummy = 1; }

message LinuxIDMapping {
  uint32 HostID = 1;
  uint32 ContainerID = 2;
  uint32 Size = 3;
}

message LinuxNamespace {
  string Type = 1;
  string Path = 2;
}

message LinuxDevice {
  string Path = 1;
  string Type = 2;
  int64 Major = 3;
  int64 Minor = 4;
  uint32 FileMode = 5;
  uint32 UID = 6;
  uint32 GID = 7;
}

message LinuxResources {
  repeated LinuxDeviceCgroup Devices = 1;
  LinuxMemory Memory = 2;
  LinuxCPU CPU = 3;
  LinuxPids Pids = 4;
  LinuxBlockIO BlockIO = 5;
  repeated LinuxHugepageLimit HugepageLimits = 6;
  LinuxNetwork Network = 7;
}

message LinuxMemory {
  int64 Limit = 1;
  int64 Reservation = 2;
  int64 Swap = 3;
  int64 Kernel = 4;
  int64 KernelTCP = 5;
  uint64 Swappiness = 6;
  bool DisableOOMKiller = 7;
}

message LinuxCPU {
  uint64 Shares = 1;
  int64 Quota = 2;
  uint64 Period = 3;
  int64 RealtimeRuntime = 4;
  uint64 RealtimePeriod = 5;
  string Cpus = 6;
  string Mems = 7;
}

message LinuxWeightDevice {
  int64 Major = 1;
  int64 Minor = 2;
  uint32 Weight = 3;
  uint32 LeafWeight = 4;
}

message LinuxThrottleDevice {
  int64 Major = 1;
  int64 Minor = 2;
  uint64 Rate = 3;
}

message LinuxBlockIO {
  uint32 Weight = 1;
  uint32 LeafWeight = 2;
  repeated LinuxWeightDevice WeightDevice = 3;
  repeated LinuxThrottleDevice ThrottleReadBpsDevice = 4;
  repeated LinuxThrottleDevice ThrottleWriteBpsDevice = 5;
  repeated LinuxThrottleDevice ThrottleReadIOPSDevice = 6;
  repeated LinuxThrottleDevice ThrottleWriteIOPSDevice = 7;
}

message LinuxPids { int64 Limit = 1; }

message LinuxDeviceCgroup {
  bool Allow = 1;
  string Type = 2;
  int64 Major = 3;
  int64 Minor = 4;
  string Access = 5;
}

message LinuxNetwork {
  uint32 ClassID = 1;
  repeated LinuxInterfacePriority Priorities = 2;
}

message LinuxHugepageLimit {
  string Pagesize = 1;
  uint64 Limit = 2;
}

message LinuxInterfacePriority {
  string Name = 1;
  uint32 Priority = 2;
}

message LinuxSeccomp {
  string DefaultAction = 1;
  repeated string Architectures = 2;
  repeated string Flags = 3;
  repeated LinuxSyscall Syscalls = 4;
}

message LinuxSeccompArg {
  uint64 Index = 1;
  uint64 Value = 2;
  uint64 ValueTwo = 3;
  string Op = 4;
}

message LinuxSyscall {
  repeated string Names = 1;
  string Action = 2;
  oneof ErrnoRet { uint32 errnoret = 3; }
  repeated LinuxSeccompArg Args = 4;
}

message LinuxIntelRdt { string L3CacheSchema = 1; }
`;

export const AGENT_PROTO = `
syntax = "proto3";
package grpc;
import "oci.proto";
import "types.proto";

message CreateContainerRequest {
  string container_id = 1;
  string exec_id = 2;
  StringUser string_user = 3;
  repeated Device devices = 4;
  repeated Storage storages = 5;
  Spec OCI = 6;
  bool sandbox_pidns = 7;
  repeated SharedMount shared_mounts = 8;
  uint32 stdin_port = 9;
  uint32 stdout_port = 10;
  uint32 stderr_port = 11;
}

message StartContainerRequest { string container_id = 1; }

message RemoveContainerRequest {
  string container_id = 1;
  uint32 timeout = 2;
}

message ExecProcessRequest {
  string container_id = 1;
  string exec_id = 2;
  StringUser string_user = 3;
  Process process = 4;
  uint32 stdin_port = 5;
  uint32 stdout_port = 6;
  uint32 stderr_port = 7;
}

message SignalProcessRequest {
  string container_id = 1;
  string exec_id = 2;
  uint32 signal = 3;
}

message WaitProcessRequest {
  string container_id = 1;
  string exec_id = 2;
}

message UpdateContainerRequest {
  string container_id = 1;
  LinuxResources resources = 2;
}

message StatsContainerRequest { string container_id = 1; }
message PauseContainerRequest { string container_id = 1; }
message ResumeContainerRequest { string container_id = 1; }

message WriteStreamRequest {
  string container_id = 1;
  string exec_id = 2;
  bytes data = 3;
}

message ReadStreamRequest {
  string container_id = 1;
  string exec_id = 2;
  uint32 len = 3;
}

message ReadStreamResponse { bytes data = 1; }

message CloseStdinRequest {
  string container_id = 1;
  string exec_id = 2;
}

message TtyWinResizeRequest {
  string container_id = 1;
  string exec_id = 2;
  uint32 row = 3;
  uint32 column = 4;
}

message KernelModule {
  string name = 1;
  repeated string parameters = 2;
}

message CreateSandboxRequest {
  string hostname = 1;
  repeated string dns = 2;
  repeated Storage storages = 3;
  bool sandbox_pidns = 4;
  string sandbox_id = 5;
  string guest_hook_path = 6;
  repeated KernelModule kernel_modules = 7;
}

message DestroySandboxRequest {}
message RemoveStaleVirtiofsShareMountsRequest {}

message Routes { repeated types.Route Routes = 1; }

message UpdateInterfaceRequest { types.Interface interface = 1; }
message UpdateRoutesRequest { Routes routes = 1; }
message UpdateEphemeralMountsRequest { repeated Storage storages = 1; }
message ListInterfacesRequest {}
message ListRoutesRequest {}

message ARPNeighbors { repeated types.ARPNeighbor ARPNeighbors = 1; }
message AddARPNeighborsRequest { ARPNeighbors neighbors = 1; }

message GetIPTablesRequest { bool is_ipv6 = 1; }

message SetIPTablesRequest {
  bool is_ipv6 = 1;
  bytes data = 2;
}

message OnlineCPUMemRequest {
  bool wait = 1;
  uint32 nb_cpus = 2;
  bool cpu_only = 3;
}

message ReseedRandomDevRequest { bytes data = 2; }

message GuestDetailsRequest {
  bool mem_block_size = 1;
  bool mem_hotplug_probe = 2;
}

message MemHotplugByProbeRequest { repeated uint64 memHotplugProbeAddr = 1; }

message SetGuestDateTimeRequest {
  int64 Sec = 1;
  int64 Usec = 2;
}

message FSGroup {
  uint32 group_id = 2;
  types.FSGroupChangePolicy group_change_policy = 3;
}

message SharedMount {
  string name = 1;
  string src_ctr = 2;
  string src_path = 3;
  string dst_ctr = 4;
  string dst_path = 5;
}

message Storage {
  string driver = 1;
  repeated string driver_options = 2;
  string source = 3;
  string fstype = 4;
  repeated string options = 5;
  string mount_point = 6;
  FSGroup fs_group = 7;
  bool shared = 8;
}

message Device {
  string id = 1;
  string type = 2;
  string vm_path = 3;
  string container_path = 4;
  repeated string options = 5;
}

message StringUser {
  string uid = 1;
  string gid = 2;
  repeated string additionalGids = 3;
}

message CopyFileRequest {
  string path = 1;
  int64 file_size = 2;
  uint32 file_mode = 3;
  uint32 dir_mode = 4;
  int32 uid = 5;
  int32 gid = 6;
  int64 offset = 7;
  bytes data = 8;
}

message GetOOMEventRequest {}
message AddSwapRequest { repeated uint32 PCIPath = 1; }
message AddSwapPathRequest { string path = 1; }
message GetMetricsRequest {}
message VolumeStatsRequest { string volume_guest_path = 1; }

message ResizeVolumeRequest {
  string volume_guest_path = 1;
  uint64 size = 2;
}

message SetPolicyRequest { string policy = 1; }

message GetDiagnosticDataRequest {
  string log_type = 1;
  string container_id = 2;
}

message MemAgentMemcgConfig {
  optional bool disabled = 1;
  optional bool swap = 2;
  optional uint32 swappiness_max = 3;
  optional uint64 period_secs = 4;
  optional uint32 period_psi_percent_limit = 5;
  optional uint32 eviction_psi_percent_limit = 6;
  optional uint64 eviction_run_aging_count_min = 7;
}

message MemAgentCompactConfig {
  optional bool disabled = 1;
  optional uint64 period_secs = 2;
  optional uint32 period_psi_percent_limit = 3;
  optional uint32 compact_psi_percent_limit = 4;
  optional int64 compact_sec_max = 5;
  optional uint32 compact_order = 6;
  optional uint64 compact_threshold = 7;
  optional uint64 compact_force_times = 8;
}
`;

export const AGENT_SERVICE = 'grpc.AgentService';
export const HEALTH_SERVICE = 'grpc.Health';

/**
 * The RPCs of `grpc.AgentService` and the request message each takes. The message type name is what the
 * policy is queried with (`data.agent_policy.<request>`), as kata does with `descriptor_dyn().name()`.
 */
export const AGENT_METHODS: Readonly<Record<string, string>> = Object.freeze({
  CreateContainer: 'CreateContainerRequest',
  StartContainer: 'StartContainerRequest',
  RemoveContainer: 'RemoveContainerRequest',
  ExecProcess: 'ExecProcessRequest',
  SignalProcess: 'SignalProcessRequest',
  WaitProcess: 'WaitProcessRequest',
  UpdateContainer: 'UpdateContainerRequest',
  UpdateEphemeralMounts: 'UpdateEphemeralMountsRequest',
  StatsContainer: 'StatsContainerRequest',
  PauseContainer: 'PauseContainerRequest',
  ResumeContainer: 'ResumeContainerRequest',
  RemoveStaleVirtiofsShareMounts: 'RemoveStaleVirtiofsShareMountsRequest',
  GetDiagnosticData: 'GetDiagnosticDataRequest',
  WriteStdin: 'WriteStreamRequest',
  ReadStdout: 'ReadStreamRequest',
  ReadStderr: 'ReadStreamRequest',
  CloseStdin: 'CloseStdinRequest',
  TtyWinResize: 'TtyWinResizeRequest',
  UpdateInterface: 'UpdateInterfaceRequest',
  UpdateRoutes: 'UpdateRoutesRequest',
  ListInterfaces: 'ListInterfacesRequest',
  ListRoutes: 'ListRoutesRequest',
  AddARPNeighbors: 'AddARPNeighborsRequest',
  GetIPTables: 'GetIPTablesRequest',
  SetIPTables: 'SetIPTablesRequest',
  GetMetrics: 'GetMetricsRequest',
  MemAgentMemcgSet: 'MemAgentMemcgConfig',
  MemAgentCompactSet: 'MemAgentCompactConfig',
  CreateSandbox: 'CreateSandboxRequest',
  DestroySandbox: 'DestroySandboxRequest',
  OnlineCPUMem: 'OnlineCPUMemRequest',
  ReseedRandomDev: 'ReseedRandomDevRequest',
  GetGuestDetails: 'GuestDetailsRequest',
  MemHotplugByProbe: 'MemHotplugByProbeRequest',
  SetGuestDateTime: 'SetGuestDateTimeRequest',
  CopyFile: 'CopyFileRequest',
  GetOOMEvent: 'GetOOMEventRequest',
  AddSwap: 'AddSwapRequest',
  AddSwapPath: 'AddSwapPathRequest',
  GetVolumeStats: 'VolumeStatsRequest',
  ResizeVolume: 'ResizeVolumeRequest',
  SetPolicy: 'SetPolicyRequest',
});

/** Request message type names the policy can be asked about, sorted. */
export const REQUEST_TYPES: readonly string[] = Object.freeze(
  [...new Set(Object.values(AGENT_METHODS))].sort(),
);

/**
 * Which version of kata's agent.proto the gate reads requests with. The field set decides both the wire
 * schema and the policy input: a field the agent's proto lacks is absent from the input, not a default,
 * and genpolicy policies that compare whole objects (such as `Storage`) depend on that.
 *
 * - `current`: kata-containers as of 2026-08 (3.29 and later). The default.
 * - `3.3`: the request fields of kata 3.3.0 through 3.14.x (3.13 only added the MemAgent messages, which
 *   this profile keeps). The regorus kata suites were recorded with agents of that period (April–May
 *   2024). Compared with `current`:
 *   - `Storage.shared` (8) does not exist (added in 3.28.0);
 *   - `types.Route.flags` (7) and `types.Route.mtu` (8) do not exist (added in 3.15.0 and 3.17.0);
 *   - `types.Interface` field 6 is `pciPath` (renamed `devicePath` in 3.15.0);
 *   - CopyFile is given to the policy as the whole `CopyFileRequest`, `data` included (the reduced
 *     `PolicyCopyFileRequest` arrived in 3.29.0).
 *
 * The RPC table is the same in every profile: RPCs added after 3.3 (MemAgent* in 3.13, AddSwapPath in
 * 3.15, GetDiagnosticData in 3.29) are still checked, and an older agent answers them UNIMPLEMENTED.
 */
export type AgentProtoProfile = 'current' | '3.3';

/** Every profile, the default first. */
export const AGENT_PROTO_PROFILES: readonly AgentProtoProfile[] = Object.freeze(['current', '3.3']);

export function isAgentProtoProfile(name: string): name is AgentProtoProfile {
  return (AGENT_PROTO_PROFILES as readonly string[]).includes(name);
}

/** Replaces `from` in `text` exactly once; the edit of an older profile must still apply. */
function edit(text: string, from: string, to: string): string {
  const at = text.indexOf(from);
  if (at < 0 || text.indexOf(from, at + 1) >= 0)
    throw new AgentPolicyError(`agent-proto profile edit: ${from}`, { code: 'SCHEMA_INVALID' });
  return text.slice(0, at) + to + text.slice(at + from.length);
}

/** The `.proto` texts (`types`, `oci`, `agent`) of a profile. */
export function agentProtoSources(profile: AgentProtoProfile): readonly [string, string, string] {
  if (profile === 'current') return [TYPES_PROTO, OCI_PROTO, AGENT_PROTO];
  let types = edit(TYPES_PROTO, 'string devicePath = 6;', 'string pciPath = 6;');
  types = edit(types, '  uint32 flags = 7;\n  uint32 mtu = 8;\n', '');
  const agent = edit(AGENT_PROTO, '  bool shared = 8;\n', '');
  return [types, OCI_PROTO, agent];
}

const roots = new Map<AgentProtoProfile, ProtoRoot>();

/** The parsed schema of a profile (default `current`), built once. */
export function agentProtoRoot(profile: AgentProtoProfile = 'current'): ProtoRoot {
  let root = roots.get(profile);
  if (!root) {
    root = defineProto(...agentProtoSources(profile));
    roots.set(profile, root);
  }
  return root;
}
