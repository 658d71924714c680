import type { Tee } from '@broker/protocol';
import { describe, expect, it } from 'vitest';
import {
  getVerifier,
  SampleVerifier,
  supportedTees,
  VerificationError,
  VerifierNotSupported,
} from './index.js';

describe('verifier registry', () => {
  it('returns the sample verifier for "sample"', () => {
    const v = getVerifier('sample');
    expect(v).toBeInstanceOf(SampleVerifier);
    expect(v.tee).toBe('sample');
    expect(supportedTees()).toContain('sample');
  });

  it('refuses a TEE without a verifier with a typed error', () => {
    let err: unknown;
    try {
      getVerifier('sgx');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(VerifierNotSupported);
    expect(err).toBeInstanceOf(VerificationError);
    expect((err as VerifierNotSupported).code).toBe('VERIFIER_NOT_SUPPORTED');
    expect((err as VerifierNotSupported).tee).toBe('sgx');
  });

  it('refuses names that are not TEEs, including prototype members', () => {
    for (const name of ['Sample', 'constructor', '__proto__', 'toString', '']) {
      expect(() => getVerifier(name as Tee)).toThrow(VerifierNotSupported);
    }
  });
});
