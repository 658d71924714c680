// The RVPS's errors share RvpsError and carry a `code`, so callers branch on it (or on the class),
// never on `name`. RvpsClientError's `code` is the numeric gRPC status of the failed call.
import { describe, expect, it } from 'vitest';
import { RvpsClientError } from './client.js';
import { RvpsConfigError, RvpsError, type RvpsErrorCode } from './errors.js';
import { decodeHealthCheckRequest } from './health.js';

describe('RVPS errors', () => {
  const cases: [RvpsError, RvpsErrorCode, string][] = [
    [new RvpsError('MESSAGE_MALFORMED', 'why'), 'MESSAGE_MALFORMED', 'RvpsError'],
    [new RvpsError('RECORD_CORRUPT', 'why'), 'RECORD_CORRUPT', 'RvpsError'],
    [new RvpsConfigError('why'), 'CONFIG_INVALID', 'RvpsConfigError'],
  ];

  it.each(cases)('%s: shares RvpsError and names what failed in code', (e, code, name) => {
    expect(e).toBeInstanceOf(RvpsError);
    expect(e.code).toBe(code);
    expect(e.name).toBe(name);
    expect(e.message).toBe('why');
  });

  it('keeps the gRPC status as the client error code', () => {
    const e = new RvpsClientError('register: refused', 7);
    expect(e.code).toBe(7);
    expect(e).toBeInstanceOf(RvpsError);
  });

  it('refuses a malformed health check request with REQUEST_MALFORMED', () => {
    let caught: unknown;
    try {
      decodeHealthCheckRequest(Buffer.from([0x0a, 0x05, 0x61]));
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(RvpsError);
    expect((caught as RvpsError).code).toBe('REQUEST_MALFORMED');
    expect((caught as Error).message).toBe('truncated field');
  });
});
