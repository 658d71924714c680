/**
 * The agent's messages: kata's request schema as @broker/agent-policy defines it (from kata's
 * agent.proto, oci.proto and types.proto), plus the responses and grpc.Health messages this agent
 * answers with, written from the field numbers of kata's agent.proto and health.proto.
 */
import { AGENT_PROTO, OCI_PROTO, TYPES_PROTO } from '@broker/agent-policy';
import { defineProto, type MessageCodec, messageCodec } from '@broker/ttrpc';

export const RESPONSES_PROTO = `
syntax = "proto3";
package grpc;

import "types.proto";

message Empty {}
message WaitProcessResponse { int32 status = 1; }
message WriteStreamResponse { uint32 len = 1; }

message AgentDetails {
  string version = 1;
  bool init_daemon = 2;
  repeated string device_handlers = 3;
  repeated string storage_handlers = 4;
  bool supports_seccomp = 5;
  repeated string extra_features = 6;
}
message GuestDetailsResponse {
  uint64 mem_block_size_bytes = 1;
  AgentDetails agent_details = 2;
  bool support_mem_hotplug_probe = 3;
}

message CpuUsage {
  uint64 total_usage = 1;
  repeated uint64 percpu_usage = 2;
  uint64 usage_in_kernelmode = 3;
  uint64 usage_in_usermode = 4;
}
message ThrottlingData {
  uint64 periods = 1;
  uint64 throttled_periods = 2;
  uint64 throttled_time = 3;
}
message CpuStats {
  CpuUsage cpu_usage = 1;
  ThrottlingData throttling_data = 2;
}
message PidsStats {
  uint64 current = 1;
  uint64 limit = 2;
}
message MemoryData {
  uint64 usage = 1;
  uint64 max_usage = 2;
  uint64 failcnt = 3;
  uint64 limit = 4;
}
message MemoryStats {
  uint64 cache = 1;
  MemoryData usage = 2;
  MemoryData swap_usage = 3;
  MemoryData kernel_usage = 4;
  bool use_hierarchy = 5;
  map<string, uint64> stats = 6;
}
message BlkioStatsEntry {
  uint64 major = 1;
  uint64 minor = 2;
  string op = 3;
  uint64 value = 4;
}
message BlkioStats {
  repeated BlkioStatsEntry io_service_bytes_recursive = 1;
  repeated BlkioStatsEntry io_serviced_recursive = 2;
  repeated BlkioStatsEntry io_queued_recursive = 3;
  repeated BlkioStatsEntry io_service_time_recursive = 4;
  repeated BlkioStatsEntry io_wait_time_recursive = 5;
  repeated BlkioStatsEntry io_merged_recursive = 6;
  repeated BlkioStatsEntry io_time_recursive = 7;
  repeated BlkioStatsEntry sectors_recursive = 8;
}
message HugetlbStats {
  uint64 usage = 1;
  uint64 max_usage = 2;
  uint64 failcnt = 3;
}
message CgroupStats {
  CpuStats cpu_stats = 1;
  MemoryStats memory_stats = 2;
  PidsStats pids_stats = 3;
  BlkioStats blkio_stats = 4;
  map<string, HugetlbStats> hugetlb_stats = 5;
}
message NetworkStats {
  string name = 1;
  uint64 rx_bytes = 2;
  uint64 rx_packets = 3;
  uint64 rx_errors = 4;
  uint64 rx_dropped = 5;
  uint64 tx_bytes = 6;
  uint64 tx_packets = 7;
  uint64 tx_errors = 8;
  uint64 tx_dropped = 9;
}
message StatsContainerResponse {
  CgroupStats cgroup_stats = 1;
  repeated NetworkStats network_stats = 2;
}

message OOMEvent { string container_id = 1; }

message Interfaces { repeated types.Interface Interfaces = 1; }

message VolumeUsage {
  enum Unit { UNKNOWN = 0; BYTES = 1; INODES = 2; }
  uint64 available = 1;
  uint64 total = 2;
  uint64 used = 3;
  Unit unit = 4;
}
message VolumeCondition {
  bool abnormal = 1;
  string message = 2;
}
message VolumeStatsResponse {
  repeated VolumeUsage usage = 1;
  VolumeCondition volume_condition = 2;
}

message CheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; }
  ServingStatus status = 1;
}
message VersionCheckResponse {
  string grpc_version = 1;
  string agent_version = 2;
}
`;

const root = defineProto(TYPES_PROTO, OCI_PROTO, AGENT_PROTO, RESPONSES_PROTO);

// biome-ignore lint/suspicious/noExplicitAny: decoded messages are plain objects; handlers read them by field name
export type Decoded = Record<string, any>;

/** The codec of a message of package `grpc` by its name, or of another package by its full name (`types.Interface`). */
export function codec(name: string): MessageCodec<Decoded> {
  return messageCodec<Decoded>(root, name.includes('.') ? name : `grpc.${name}`);
}
