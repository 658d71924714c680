// The front ends' errors share AttestationServiceError and carry a `code`, so callers branch on it
// (or on the class), never on `name`.
import { describe, expect, it } from 'vitest';
import { AsConfigError } from './config.js';
import { AttestationServiceError, type AttestationServiceErrorCode } from './errors.js';
import { Aborted } from './grpc.js';
import { HttpError, startAsRestServer } from './rest.js';
import type { OpenedAttestationService } from './service.js';

describe('attestation service errors', () => {
  const cases: [AttestationServiceError, AttestationServiceErrorCode, string][] = [
    [new AsConfigError('why'), 'CONFIG_INVALID', 'AsConfigError'],
    [new Aborted('why'), 'REQUEST_ABORTED', 'Aborted'],
    [new HttpError(413, 'why'), 'HTTP_REQUEST_REFUSED', 'HttpError'],
  ];

  it.each(cases)('%s: shares AttestationServiceError and names what failed in code', (e, code, name) => {
    expect(e).toBeInstanceOf(AttestationServiceError);
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe(code);
    expect(e.name).toBe(name);
    expect(e.message).toBe('why');
  });

  it('keeps the HTTP status of a refused REST request', () => {
    expect(new HttpError(413, 'Payload too large').status).toBe(413);
  });

  it('refuses a listening address that is not HOST:PORT with ADDRESS_INVALID', async () => {
    const err = await startAsRestServer({} as OpenedAttestationService, 'no-port').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttestationServiceError);
    expect((err as AttestationServiceError).code).toBe('ADDRESS_INVALID');
    expect((err as Error).message).toBe('"no-port": expected HOST:PORT');
  });
});
