// The health messages are encoded by hand: check them against the protobuf wire format.
import { describe, expect, it } from 'vitest';
import {
  decodeHealthCheckRequest,
  encodeHealthCheckRequest,
  encodeHealthCheckResponse,
  HealthStatus,
} from './health.js';

describe('grpc.health.v1 messages', () => {
  it('reads the service name, skipping fields it does not know, and round-trips long names', () => {
    expect(decodeHealthCheckRequest(Buffer.alloc(0))).toEqual({ service: '' });
    // field 2 varint 150, field 1 "ab", field 3 fixed64, field 4 fixed32
    const bytes = Buffer.from([
      0x10, 0x96, 0x01, 0x0a, 0x02, 0x61, 0x62, 0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x25, 1, 2, 3, 4,
    ]);
    expect(decodeHealthCheckRequest(bytes)).toEqual({ service: 'ab' });
    const long = 'x'.repeat(300);
    expect(decodeHealthCheckRequest(encodeHealthCheckRequest({ service: long }))).toEqual({ service: long });
  });

  it('refuses truncated or malformed requests and oversized names', () => {
    expect(() => decodeHealthCheckRequest(Buffer.from([0x0a, 0x05, 0x61]))).toThrow(/truncated/);
    expect(() => decodeHealthCheckRequest(Buffer.from([0x0f]))).toThrow(/wire type/);
    expect(() => decodeHealthCheckRequest(Buffer.from([0x10, 0x80]))).toThrow(/varint/);
    expect(() => decodeHealthCheckRequest(encodeHealthCheckRequest({ service: 'y'.repeat(2000) }))).toThrow(
      /too long/,
    );
  });

  it('writes SERVING as field 1 = 1, and UNKNOWN as the empty message', () => {
    expect(encodeHealthCheckResponse({ status: HealthStatus.SERVING })).toEqual(Buffer.from([0x08, 0x01]));
    expect(encodeHealthCheckResponse({ status: HealthStatus.UNKNOWN })).toEqual(Buffer.alloc(0));
  });
});
