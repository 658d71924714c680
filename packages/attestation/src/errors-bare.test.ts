// A failure raised inside a policy's evaluation is an AttestationError with a code, as every other
// (the engine keeps the message of what the builtin threw, not the error).

import { MemoryStorage } from '@broker/kv-storage';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { AttestationError, AttestationFailed } from './errors.js';
import { PolicyStore } from './policy.js';

describe('a policy asking for too many reference values', () => {
  it('fails with AttestationFailed, code ATTESTATION_FAILED, the message unchanged', async () => {
    const store = new PolicyStore(new MemoryStorage(), pino({ level: 'silent' }));
    await store.set(
      'p_cpu',
      `package policy
names := [sprintf("rv%d", [i]) | some i in numbers.range(1, 300)]
trust_claims := {"executables": count([v | some n in names; v := query_reference_value(n)])}
`,
    );
    const err = await store.evaluate('p_cpu', {}, async () => undefined).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttestationFailed);
    expect(err).toBeInstanceOf(AttestationError);
    expect((err as AttestationError).code).toBe('ATTESTATION_FAILED');
    expect((err as Error).message).toMatch(/more than 256 reference values queried/);
  });
});
