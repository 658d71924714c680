import { describe, expect, it } from 'vitest';
import {
  Code,
  InvalidTtrpcAddress,
  parseTtrpcAddress,
  TtrpcClosedError,
  TtrpcLibraryError,
  TtrpcServer,
} from './index.js';

describe('TtrpcLibraryError', () => {
  it('is the base of the package’s errors: a string code for local failures', () => {
    let caught: unknown;
    try {
      parseTtrpcAddress('unix://');
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(InvalidTtrpcAddress);
    expect(caught).toBeInstanceOf(TtrpcLibraryError);
    expect((caught as TtrpcLibraryError).code).toBe('ADDRESS_INVALID');

    const server = new TtrpcServer();
    server.register('demo.Svc', {});
    expect(() => server.register('demo.Svc', {})).toThrow(
      expect.objectContaining({
        code: 'SERVICE_DUPLICATE',
        message: 'duplicate service demo.Svc registered',
      }),
    );
  });

  it('keeps the numeric gRPC status of a call’s error', () => {
    const e = new TtrpcClosedError();
    expect(e).toBeInstanceOf(TtrpcLibraryError);
    expect(e.code).toBe(Code.UNAVAILABLE);
  });
});
