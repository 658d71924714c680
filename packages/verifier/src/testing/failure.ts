import { VerificationError } from '../errors.js';

/**
 * The VerificationError `p` rejects with, for tests that look at its code and message. A success, or
 * any other error, fails the test (the other error is rethrown as it is).
 */
export async function verificationFailure(p: Promise<unknown>): Promise<VerificationError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof VerificationError) return e;
    throw e;
  }
  throw new Error('verification succeeded, where it should have failed');
}
