/**
 * ttrpc's own envelope messages (package `ttrpc`) and `google.rpc.Status`,
 * written from the field names and numbers containerd/ttrpc puts on the wire.
 */
import type { StatusDetail } from './errors.js';
import { defineProto, messageCodec } from './proto.js';

const ENVELOPE_PROTO = `
syntax = "proto3";
package ttrpc;

// One call: routed by service and method; payload is the method's request message.
message Request {
  string service = 1;
  string method = 2;
  bytes payload = 3;
  // Remaining time the caller allows, in nanoseconds; 0 means no deadline.
  int64 timeout_nano = 4;
  repeated KeyValue metadata = 5;
}

// Ends a stream: a status and, when the status is OK, the method's response message.
message Response {
  google.rpc.Status status = 1;
  bytes payload = 2;
}

message KeyValue {
  string key = 1;
  string value = 2;
}
`;

const STATUS_PROTO = `
syntax = "proto3";
package google.rpc;

message Status {
  int32 code = 1;
  string message = 2;
  repeated google.protobuf.Any details = 3;
}
`;

const ANY_PROTO = `
syntax = "proto3";
package google.protobuf;

message Any {
  string type_url = 1;
  bytes value = 2;
}
`;

export interface KeyValue {
  key: string;
  value: string;
}

export interface RequestMessage {
  service: string;
  method: string;
  payload: Uint8Array;
  timeout_nano: bigint | number;
  metadata: KeyValue[];
}

export interface StatusMessage {
  code: number;
  message: string;
  details: StatusDetail[];
}

export interface ResponseMessage {
  status: StatusMessage | null;
  payload: Uint8Array;
}

const root = defineProto(ENVELOPE_PROTO, STATUS_PROTO, ANY_PROTO);

/** Codec of `ttrpc.Request`; decoded `timeout_nano` is a bigint. */
export const requestCodec = messageCodec<RequestMessage>(root, 'ttrpc.Request');
/** Codec of `ttrpc.Response`; a decoded absent status is `null` (which means OK). */
export const responseCodec = messageCodec<ResponseMessage>(root, 'ttrpc.Response');
