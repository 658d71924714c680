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

export function codec(name: string): MessageCodec<Decoded> {
  return messageCodec<Decoded>(root, `grpc.${name}`);
}
