// Every error of the attestation service shares AttestationError and carries a `code`, so callers
// branch on it (or on the class), never on `name`.
import { describe, expect, it } from 'vitest';
import {
  AttestationError,
  type AttestationErrorCode,
  AttestationFailed,
  InvalidPolicyId,
  ParsePolicyError,
  RemoteWriteRefused,
} from './errors.js';
import { PolicyCheckError } from './limits.js';

describe('attestation errors', () => {
  const cases: [AttestationError, AttestationErrorCode, string][] = [
    [new AttestationFailed('EVIDENCE', 'why'), 'ATTESTATION_FAILED', 'AttestationFailed'],
    [new ParsePolicyError('default', 'why'), 'POLICY_PARSE_FAILED', 'ParsePolicyError'],
    [new InvalidPolicyId('why'), 'INVALID_POLICY_ID', 'InvalidPolicyId'],
    [new RemoteWriteRefused('UNAUTHENTICATED', 'why'), 'UNAUTHENTICATED', 'RemoteWriteRefused'],
    [new RemoteWriteRefused('PERMISSION_DENIED', 'why'), 'PERMISSION_DENIED', 'RemoteWriteRefused'],
    [new PolicyCheckError('missing_rule', 'why'), 'missing_rule', 'PolicyCheckError'],
    [new PolicyCheckError('limit_exceeded', 'why', 'steps'), 'limit_exceeded', 'PolicyCheckError'],
    [new PolicyCheckError('busy', 'why'), 'busy', 'PolicyCheckError'],
  ];

  it.each(cases)('%s: shares AttestationError and names what failed in code', (e, code, name) => {
    expect(e).toBeInstanceOf(AttestationError);
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe(code);
    expect(e.name).toBe(name);
    expect(e.message).toBe('why');
  });

  it('keeps the subclass fields and the cause', () => {
    const cause = new Error('underlying');
    const failed = new AttestationFailed('POLICY', 'why', { cause });
    expect(failed.reason).toBe('POLICY');
    expect(failed.cause).toBe(cause);
    expect(new ParsePolicyError('p1', 'why').policyId).toBe('p1');
    expect(new PolicyCheckError('limit_exceeded', 'why', 'steps').limit).toBe('steps');
  });
});
