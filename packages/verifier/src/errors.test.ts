// Every verifier error shares VerifierError and carries a `code`; only verdicts on the evidence are
// VerificationErrors, so catch sites that turn those into rejections leave the others alone.
import { describe, expect, it } from 'vitest';
import { VerificationError, VerifierError } from './errors.js';
import { createHttpGet, HttpGetError } from './http/get.js';

describe('verifier errors', () => {
  it('HTTP failures are VerifierErrors with a code, not verdicts', async () => {
    let caught: unknown;
    try {
      await createHttpGet()('not a url', { timeoutMs: 1000, maxBytes: 16 });
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(HttpGetError);
    expect(caught).toBeInstanceOf(VerifierError);
    expect(caught).not.toBeInstanceOf(VerificationError);
    expect((caught as VerifierError).code).toBe('HTTP_GET_FAILED');
    expect((caught as VerifierError).message).toBe('not a url is not a URL');
  });

  it('verdicts are VerifierErrors too', () => {
    const e = new VerificationError('REPORT_MALFORMED', 'why');
    expect(e).toBeInstanceOf(VerifierError);
    expect(e.code).toBe('REPORT_MALFORMED');
  });
});
