// Attestation policies under the evaluation limits: refused at upload when they lack `trust_claims` or
// exceed a limit on the representative evidence; evaluated once, then refused without evaluating, when
// they exceed one on a guest's evidence.

import { MemoryStorage } from '@broker/kv-storage';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { AttestationFailed, ParsePolicyError } from './errors.js';
import { PolicyCheckError } from './limits.js';
import { PolicyStore } from './policy.js';

const logger = pino({ level: 'silent' });
const none = async () => undefined;
const BOMB_SET = `pad := sprintf("%08192d", [0])
bomb := {s | some i in numbers.range(1, 1000000); s := sprintf("%d%s", [i, pad])}`;

describe('attestation policy checks and limits', () => {
  it('refuses, storing nothing, a policy without trust_claims or one that exceeds a limit on the representative evidence', async () => {
    const storage = new MemoryStorage();
    const store = new PolicyStore(storage, logger);
    await expect(store.set('p_cpu', 'package policy\nnot rego')).rejects.toBeInstanceOf(ParsePolicyError);
    const missing = await store.set('p_cpu', 'package policy\nextensions := []\n').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(PolicyCheckError);
    expect(missing).toMatchObject({ code: 'missing_rule' });
    expect((missing as Error).message).toMatch(/policy p_cpu defines no `trust_claims` rule/);
    const bomb = await store
      .set('p_cpu', `package policy\n${BOMB_SET}\ntrust_claims := {"executables": count(bomb)}\n`)
      .catch((e: unknown) => e);
    expect(bomb).toMatchObject({ code: 'limit_exceeded', limit: 'memory' });
    expect(await store.get('p_cpu')).toBeUndefined();
  });

  it('evaluates a policy that exceeds a limit on some evidence once, then refuses at once until it changes', async () => {
    const heard: boolean[] = [];
    const store = new PolicyStore(new MemoryStorage(), logger, { onLimit: (r) => heard.push(r) });
    const text = `package policy
${BOMB_SET}
default executables := 3
executables := count(bomb) if input.sample.svn == "7"
trust_claims := {"executables": executables}
`;
    await store.set('p_cpu', text);
    expect(await store.evaluate('p_cpu', { sample: { svn: '1' } }, none)).toMatchObject({
      trustClaims: { executables: 3 },
    });
    const first = await store.evaluate('p_cpu', { sample: { svn: '7' } }, none).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(AttestationFailed);
    expect((first as Error).message).toMatch(/memory limit/);
    expect(heard).toEqual([false]);
    const again = await store.evaluate('p_cpu', { sample: { svn: '1' } }, none).catch((e: unknown) => e);
    expect((again as Error).message).toMatch(/not evaluated again until it changes/);
    expect(heard).toEqual([false, true]);
    await store.set('p_cpu', 'package policy\ntrust_claims := {"executables": 2}\n');
    expect(await store.evaluate('p_cpu', { sample: { svn: '7' } }, none)).toMatchObject({
      trustClaims: { executables: 2 },
    });
    expect(heard).toEqual([false, true]);
  });
});
