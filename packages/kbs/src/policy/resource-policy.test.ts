import { createHash } from 'node:crypto';
import { PolicyCheckError } from '@broker/attestation';
import { MemoryStorage } from '@broker/kv-storage';
import { describe, expect, it } from 'vitest';
import { BUILTIN_RESOURCE_POLICIES, PolicyEngineError, ResourcePolicy } from './resource-policy.js';

const data = { plugin: 'resource', 'resource-path': ['default', 'key', '1'], query: {} };
const sampleClaims = {
  submods: {
    cpu0: { 'ear.status': 'affirming', 'ear.veraison.annotated-evidence': { sample: { svn: '1' } } },
  },
};
const snpClaims = {
  submods: {
    cpu0: { 'ear.status': 'warning', 'ear.veraison.annotated-evidence': { snp: { measurement: 'x' } } },
  },
};

async function withPolicy(text?: string): Promise<ResourcePolicy> {
  const p = new ResourcePolicy(new MemoryStorage());
  await p.seedDefault();
  if (text !== undefined) await p.set(text);
  return p;
}

describe('ResourcePolicy', () => {
  it("seeds trustee's default, which refuses the sample TEE and allows a real one", async () => {
    const p = await withPolicy();
    expect(await p.list()).toEqual(['resource-policy']);
    expect(await p.evaluate(sampleClaims, data)).toMatchObject({ allow: false });
    expect(await p.evaluate(snpClaims, data)).toMatchObject({ allow: true });
    expect(await p.evaluate(snpClaims, { ...data, plugin: 'other' })).toMatchObject({ allow: false });
  });

  it('names the policy text that decided, by its SHA-256', async () => {
    const p = await withPolicy(BUILTIN_RESOURCE_POLICIES.allow_all);
    const d = await p.evaluate(sampleClaims, data);
    expect(d.policy?.text).toBe(BUILTIN_RESOURCE_POLICIES.allow_all);
    expect(d.policy?.hash).toBe(
      createHash('sha256').update(BUILTIN_RESOURCE_POLICIES.allow_all).digest('hex'),
    );
    await p.set(BUILTIN_RESOURCE_POLICIES.deny_all);
    expect((await p.evaluate(sampleClaims, data)).policy?.text).toBe(BUILTIN_RESOURCE_POLICIES.deny_all);
  });

  it('does not overwrite a stored policy when seeding', async () => {
    const storage = new MemoryStorage();
    const a = new ResourcePolicy(storage);
    await a.set(BUILTIN_RESOURCE_POLICIES.allow_all);
    const b = new ResourcePolicy(storage);
    await b.seedDefault();
    expect(await b.evaluate(sampleClaims, data)).toMatchObject({ allow: true });
  });

  it('evaluates the other sample policies as upstream', async () => {
    expect(
      (await (await withPolicy(BUILTIN_RESOURCE_POLICIES.deny_all)).evaluate(snpClaims, data)).allow,
    ).toBe(false);
    const affirming = await withPolicy(BUILTIN_RESOURCE_POLICIES.affirming);
    expect((await affirming.evaluate(sampleClaims, data)).allow).toBe(true);
    expect((await affirming.evaluate(snpClaims, data)).allow).toBe(false);
    expect((await affirming.evaluate({ submods: {} }, data)).allow).toBe(false);
  });

  it('sees the resource path and query as data', async () => {
    const p = await withPolicy(
      'package policy\nimport rego.v1\ndefault allow := false\nallow if {\n  data["resource-path"][2] == "1"\n  data.query.v == "2"\n  input.submods.cpu0["ear.status"] == "warning"\n}\n',
    );
    expect((await p.evaluate(snpClaims, { ...data, query: { v: '2' } })).allow).toBe(true);
    expect((await p.evaluate(snpClaims, { ...data, query: { v: '3' } })).allow).toBe(false);
    expect((await p.evaluate(sampleClaims, { ...data, query: { v: '2' } })).allow).toBe(false);
  });

  it('gives the same answers while many distinct request documents come and go', async () => {
    const p = await withPolicy(
      'package policy\nimport rego.v1\ndefault allow := false\nallow if to_number(data.query.n) % 2 == 0\n',
    );
    for (let round = 0; round < 2; round++) {
      for (let n = 0; n < 100; n++) {
        const d = { ...data, query: { n: String(n) } };
        expect((await p.evaluate(snpClaims, d)).allow).toBe(n % 2 === 0);
      }
    }
  });

  it('treats an undefined or non-boolean allow as a denial and says why', async () => {
    const undef = await withPolicy('package policy\nimport rego.v1\nallow if { false }\n');
    expect(await undef.evaluate(snpClaims, data)).toMatchObject({
      allow: false,
      anomaly: expect.stringContaining('does not define'),
    });
    const str = await withPolicy('package policy\nallow := "yes"\n');
    expect(await str.evaluate(snpClaims, data)).toMatchObject({
      allow: false,
      anomaly: expect.stringContaining('not a boolean'),
    });
  });

  it('refuses a policy that does not compile and keeps the old one', async () => {
    const p = await withPolicy(BUILTIN_RESOURCE_POLICIES.allow_all);
    await expect(p.set('package policy\nallow if {')).rejects.toBeInstanceOf(PolicyEngineError);
    await expect(p.set('package policy\nallow if {')).rejects.toThrow(/Failed to load policy/);
    expect((await p.evaluate(snpClaims, data)).allow).toBe(true);
  });

  it('refuses a policy without `allow`, naming it, and keeps the old one', async () => {
    const p = await withPolicy(BUILTIN_RESOURCE_POLICIES.allow_all);
    for (const text of ['package policy\n', 'package other\nallow := true\n']) {
      const e = await p.set(text).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(PolicyCheckError);
      expect(e).toMatchObject({ code: 'missing_rule' });
      expect((e as Error).message).toMatch(/no `allow` rule in package `policy`/);
    }
    expect((await p.evaluate(snpClaims, data)).allow).toBe(true);
  });

  it('refuses a policy whose evaluation on the representative request exceeds the memory limit', async () => {
    const p = await withPolicy(BUILTIN_RESOURCE_POLICIES.allow_all);
    const bomb = `package policy
pad := sprintf("%08192d", [0])
bomb := {s | some i in numbers.range(1, 1000000); s := sprintf("%d%s", [i, pad])}
allow if count(bomb) > 0
`;
    const e = await p.set(bomb).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(PolicyCheckError);
    expect(e).toMatchObject({ code: 'limit_exceeded', limit: 'memory' });
    expect((e as Error).message).toMatch(/exceeded the memory limit of 67108864 bytes/);
    // Refused again from memory, without evaluating.
    await expect(p.set(bomb)).rejects.toThrow(/remembered/);
    const steps =
      'package policy\nallow if count([x | some i in numbers.range(1, 1000000); x := i * i]) > 0\n';
    await expect(p.set(steps)).rejects.toMatchObject({ code: 'limit_exceeded', limit: 'steps' });
    expect((await p.evaluate(snpClaims, data)).allow).toBe(true);
  });

  it('evaluates a policy that exceeds a limit on some claims once, then refuses without evaluating until it changes', async () => {
    const heard: boolean[] = [];
    const p = new ResourcePolicy(new MemoryStorage(), { onLimit: (remembered) => heard.push(remembered) });
    // Exceeds the step limit for the sample TEE only, so the upload check (no sample evidence) passes.
    await p.set(`package policy
default allow := false
svn := input.submods.cpu0["ear.veraison.annotated-evidence"].sample.svn
allow if { svn == "1"; count([x | some i in numbers.range(1, 1000000); x := i * i]) > 0 }
allow if { not svn }
`);
    expect((await p.evaluate(snpClaims, data)).allow).toBe(true);
    await expect(p.evaluate(sampleClaims, data)).rejects.toThrow(/limit of 1000000 steps/);
    expect(heard).toEqual([false]);
    // Every later request is refused at once, whatever its claims: not evaluated again.
    await expect(p.evaluate(sampleClaims, data)).rejects.toThrow(/not evaluated again until it changes/);
    await expect(p.evaluate(snpClaims, { ...data, 'resource-path': ['a', 'b', 'c'] })).rejects.toBeInstanceOf(
      PolicyEngineError,
    );
    expect(heard).toEqual([false, true, true]);
    await p.set(BUILTIN_RESOURCE_POLICIES.allow_all);
    expect((await p.evaluate(sampleClaims, data)).allow).toBe(true);
    expect(heard).toEqual([false, true, true]);
  });

  it('reports a missing policy', async () => {
    const p = new ResourcePolicy(new MemoryStorage());
    await expect(p.evaluate(snpClaims, data)).rejects.toThrow('Policy `resource-policy.rego` not found');
  });

  it('picks up a policy another replica stored', async () => {
    const storage = new MemoryStorage();
    const mine = new ResourcePolicy(storage);
    await mine.seedDefault();
    expect((await mine.evaluate(sampleClaims, data)).allow).toBe(false);
    await new ResourcePolicy(storage).set(BUILTIN_RESOURCE_POLICIES.allow_all);
    expect((await mine.evaluate(sampleClaims, data)).allow).toBe(true);
  });

  it('reuses a decision for the same frozen claims only while the policy and data are the same', async () => {
    const storage = new MemoryStorage();
    const p = new ResourcePolicy(storage);
    await p.set(BUILTIN_RESOURCE_POLICIES.affirming);
    const claims = structuredClone(snpClaims);
    deepFreeze(claims);
    expect((await p.evaluate(claims, data)).allow).toBe(false);
    expect((await p.evaluate(claims, data)).allow).toBe(false);
    // Another replica's policy applies to the same claims at once.
    await new ResourcePolicy(storage).set(BUILTIN_RESOURCE_POLICIES.allow_all);
    expect((await p.evaluate(claims, data)).allow).toBe(true);
    expect((await p.evaluate(claims, { ...data, plugin: 'other' })).allow).toBe(false);
    await p.set(BUILTIN_RESOURCE_POLICIES.deny_all);
    expect((await p.evaluate(claims, data)).allow).toBe(false);
  });

  it('evaluates a policy that draws random numbers every time, even for the same frozen claims', async () => {
    const p = await withPolicy(
      'package policy\nimport rego.v1\ndefault allow := false\nallow if rand.intn("coin", 2) == 0\n',
    );
    const claims = structuredClone(snpClaims);
    deepFreeze(claims);
    const seen = new Set<boolean>();
    // Both outcomes within 64 tosses, unless the decision was kept (or the coin is broken: 2^-63).
    for (let i = 0; i < 64; i++) seen.add((await p.evaluate(claims, data)).allow);
    expect(seen).toEqual(new Set([true, false]));
  });

  it('gives the same decisions for frozen and unfrozen claims', async () => {
    const p = await withPolicy(BUILTIN_RESOURCE_POLICIES.default);
    for (const c of [sampleClaims, snpClaims]) {
      const frozen = structuredClone(c);
      deepFreeze(frozen);
      for (let i = 0; i < 2; i++) expect(await p.evaluate(frozen, data)).toEqual(await p.evaluate(c, data));
    }
  });
});

function deepFreeze(v: unknown): void {
  if (typeof v !== 'object' || v === null) return;
  Object.freeze(v);
  for (const x of Object.values(v)) deepFreeze(x);
}
