// The policy versions kept for replay: by hash, bounded, refreshed when a version decides again, and a
// record whose text does not hash to its key is not handed out.

import { MemoryStorage } from '@broker/kv-storage';
import { describe, expect, it } from 'vitest';
import { policyHash } from '../policy/resource-policy.js';
import { MAX_POLICY_VERSIONS, POLICY_VERSIONS_NAMESPACE, PolicyVersions } from './policy-versions.js';

describe('PolicyVersions', () => {
  it('keeps each text under its SHA-256, writes it once, and keeps the most recently seen ones', async () => {
    const storage = new MemoryStorage();
    let t = 0;
    const versions = new PolicyVersions(storage, { now: () => ++t * 1000 });
    const texts = Array.from({ length: MAX_POLICY_VERSIONS + 3 }, (_, i) => `package policy\n# ${i}\n`);
    versions.remember('resource', 'resource-policy', texts[0] as string);
    await versions.settled();
    const first = await versions.get(policyHash(texts[0] as string));
    expect(first).toMatchObject({ kind: 'resource', id: 'resource-policy', text: texts[0] });
    // Remembered again in this process: not written again.
    versions.remember('resource', 'resource-policy', texts[0] as string);
    await versions.settled();
    expect((await versions.get(policyHash(texts[0] as string)))?.seen).toBe(first?.seen);
    for (const text of texts.slice(1)) versions.remember('attestation', 'default_cpu', text);
    await versions.settled();
    const kept = await storage.list(POLICY_VERSIONS_NAMESPACE);
    expect(kept).toHaveLength(MAX_POLICY_VERSIONS);
    // The three seen first are gone, the newest are there.
    for (const text of texts.slice(0, 3)) expect(await versions.get(policyHash(text))).toBeUndefined();
    expect((await versions.get(policyHash(texts.at(-1) as string)))?.kind).toBe('attestation');
  });

  it('refuses keys that are not hashes and records whose text does not match their key', async () => {
    const storage = new MemoryStorage();
    const versions = new PolicyVersions(storage);
    expect(await versions.get('../kbs/resource-policy.rego')).toBeUndefined();
    const hash = policyHash('package policy\n');
    await storage.set(
      POLICY_VERSIONS_NAMESPACE,
      hash,
      Buffer.from(JSON.stringify({ kind: 'resource', id: 'x', seen: '', text: 'package other\n' })),
    );
    expect(await versions.get(hash)).toBeUndefined();
    await storage.set(POLICY_VERSIONS_NAMESPACE, hash, Buffer.from('not json'));
    expect(await versions.get(hash)).toBeUndefined();
  });

  it('never fails the caller when the store refuses the write, and tries again next time', async () => {
    const storage = new MemoryStorage();
    let fail = true;
    const set = storage.set.bind(storage);
    storage.set = async (...args: Parameters<MemoryStorage['set']>) => {
      if (fail) throw new Error('store down');
      return set(...args);
    };
    const versions = new PolicyVersions(storage);
    versions.remember('resource', 'resource-policy', 'package policy\n');
    await versions.settled();
    expect(await versions.get(policyHash('package policy\n'))).toBeUndefined();
    fail = false;
    versions.remember('resource', 'resource-policy', 'package policy\n');
    await versions.settled();
    expect((await versions.get(policyHash('package policy\n')))?.text).toBe('package policy\n');
  });
});
