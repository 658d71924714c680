// The standard gRPC health service (`grpc.health.v1.Health`), as Kubernetes `grpc:` probes call it and
// as trustee's grpc-as and rvps serve it next to their own services. Its two messages have one field
// each, so they are read and written here directly instead of through generated code:
//   HealthCheckRequest  { string service = 1; }
//   HealthCheckResponse { ServingStatus status = 1; }  (UNKNOWN 0, SERVING 1, NOT_SERVING 2, SERVICE_UNKNOWN 3)
import {
  type Server,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type sendUnaryData,
  status,
} from '@grpc/grpc-js';
import { RvpsError } from './errors.js';

export const HEALTH_SERVICE_NAME = 'grpc.health.v1.Health';

export const HealthStatus = { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } as const;
export type HealthStatus = (typeof HealthStatus)[keyof typeof HealthStatus];

/** The longest service name read from a request; no real service is named with more. */
const MAX_SERVICE_NAME_BYTES = 1024;

function readVarint(buf: Buffer, at: number): [value: number, next: number] {
  let value = 0;
  let shift = 0;
  for (let i = at; i < buf.length && i < at + 10; i++) {
    const b = buf[i] as number;
    value += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) return [value, i + 1];
    shift += 7;
  }
  throw new RvpsError('REQUEST_MALFORMED', 'truncated varint');
}

/** The `service` field of a HealthCheckRequest; unknown fields are skipped as protobuf requires. */
export function decodeHealthCheckRequest(buf: Buffer): { service: string } {
  let service = '';
  let at = 0;
  while (at < buf.length) {
    const [key, afterKey] = readVarint(buf, at);
    const field = Math.floor(key / 8);
    const wire = key % 8;
    at = afterKey;
    if (wire === 0) {
      [, at] = readVarint(buf, at);
    } else if (wire === 1 || wire === 5) {
      at += wire === 1 ? 8 : 4;
    } else if (wire === 2) {
      const [len, start] = readVarint(buf, at);
      if (start + len > buf.length) throw new RvpsError('REQUEST_MALFORMED', 'truncated field');
      if (field === 1) {
        if (len > MAX_SERVICE_NAME_BYTES) throw new RvpsError('REQUEST_MALFORMED', 'service name too long');
        service = buf.subarray(start, start + len).toString('utf8');
      }
      at = start + len;
    } else {
      throw new RvpsError('REQUEST_MALFORMED', `unsupported wire type ${wire}`);
    }
    if (at > buf.length) throw new RvpsError('REQUEST_MALFORMED', 'truncated field');
  }
  return { service };
}

export function encodeHealthCheckRequest(req: { service: string }): Buffer {
  const name = Buffer.from(req.service, 'utf8');
  if (name.length === 0) return Buffer.alloc(0);
  const len: number[] = [];
  for (let n = name.length; ; n = Math.floor(n / 128)) {
    if (n < 128) {
      len.push(n);
      break;
    }
    len.push((n % 128) | 0x80);
  }
  return Buffer.concat([Buffer.from([0x0a, ...len]), name]);
}

export function encodeHealthCheckResponse(res: { status: HealthStatus }): Buffer {
  // Field 1, varint; proto3 leaves a zero value out.
  return res.status === 0 ? Buffer.alloc(0) : Buffer.from([0x08, res.status]);
}

function decodeHealthCheckResponse(buf: Buffer): { status: HealthStatus } {
  return { status: (buf.length >= 2 && buf[0] === 0x08 ? buf[1] : 0) as HealthStatus };
}

export const HealthService: ServiceDefinition = {
  check: {
    path: `/${HEALTH_SERVICE_NAME}/Check`,
    requestStream: false,
    responseStream: false,
    requestSerialize: encodeHealthCheckRequest,
    requestDeserialize: decodeHealthCheckRequest,
    responseSerialize: encodeHealthCheckResponse,
    responseDeserialize: decodeHealthCheckResponse,
  },
  watch: {
    path: `/${HEALTH_SERVICE_NAME}/Watch`,
    requestStream: false,
    responseStream: true,
    requestSerialize: encodeHealthCheckRequest,
    requestDeserialize: decodeHealthCheckRequest,
    responseSerialize: encodeHealthCheckResponse,
    responseDeserialize: decodeHealthCheckResponse,
  },
};

export interface HealthHandle {
  /** Ends the open Watch streams, so that a graceful shutdown does not wait for probes that never end. */
  close(): void;
}

/**
 * Serves `grpc.health.v1.Health` on `server`: SERVING for the whole server (`""`) and for each of
 * `services` (full names such as `reference.ReferenceValueProviderService`), NOT_FOUND (Check) or
 * SERVICE_UNKNOWN (Watch) for any other name. The process only serves once everything behind it is up
 * (the attestation service checks its RVPS before it listens), so every answer is SERVING.
 */
export function addHealthService(server: Server, services: readonly string[]): HealthHandle {
  const known = new Set(['', HEALTH_SERVICE_NAME, ...services]);
  const watches = new Set<ServerWritableStream<{ service: string }, { status: HealthStatus }>>();
  server.addService(HealthService, {
    check(call: ServerUnaryCall<{ service: string }, unknown>, callback: sendUnaryData<unknown>) {
      const name = call.request.service;
      if (!known.has(name)) {
        callback({
          code: status.NOT_FOUND,
          details: `unknown service ${JSON.stringify(name.slice(0, 100))}`,
        });
        return;
      }
      callback(null, { status: HealthStatus.SERVING });
    },
    watch(call: ServerWritableStream<{ service: string }, { status: HealthStatus }>) {
      const name = call.request.service;
      call.write({ status: known.has(name) ? HealthStatus.SERVING : HealthStatus.SERVICE_UNKNOWN });
      // The status never changes while the process serves: the stream stays open until the client
      // cancels it or the server stops.
      watches.add(call);
      const drop = () => watches.delete(call);
      call.on('cancelled', drop);
      call.on('close', drop);
    },
  });
  return {
    close() {
      for (const call of watches) call.end();
      watches.clear();
    },
  };
}
