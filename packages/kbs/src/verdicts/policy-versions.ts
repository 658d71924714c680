// The policy texts that decided verdicts, kept by version (the SHA-256 of the text) in the KBS's store
// (namespace `kbs_policy_versions`, this KBS's own), so that a verdict can be replayed on the policy
// that decided it and that policy compared with the current one. Bounded: the 32 versions seen most
// recently are kept; the oldest is removed when a new one is written. Recording never waits for the
// store and never fails a request: a version that could not be written is simply not replayable.

import type { KvStorage } from '@broker/kv-storage';
import type { Logger } from 'pino';
import { policyHash } from '../policy/resource-policy.js';

export const POLICY_VERSIONS_NAMESPACE = 'kbs_policy_versions';
/** Versions kept in the store. */
export const MAX_POLICY_VERSIONS = 32;
/** Versions this process remembers having written (it writes each once). */
const MAX_KNOWN = 1024;
const HASH_RE = /^[0-9a-f]{64}$/;

export type PolicyKind = 'resource' | 'attestation';

export interface StoredPolicyVersion {
  readonly hash: string;
  readonly kind: PolicyKind;
  /** The policy id (`resource-policy`, or the attestation policy's id such as `default_cpu`). */
  readonly id: string;
  /** When this process (or another replica) last saw it decide, ISO 8601. */
  readonly seen: string;
  readonly text: string;
}

/** Whether `s` has the form of a version (64 lower-case hex digits). */
export function isPolicyHash(s: unknown): s is string {
  return typeof s === 'string' && HASH_RE.test(s);
}

export class PolicyVersions {
  private readonly known = new Set<string>();
  /** Writes one at a time, so that two new versions never prune each other's count. */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly storage: KvStorage,
    private readonly options: { readonly now?: () => number; readonly logger?: Logger } = {},
  ) {}

  /** Keeps `text` under its hash, once per process; returns at once. */
  remember(kind: PolicyKind, id: string, text: string, hash = policyHash(text)): void {
    if (this.known.has(hash)) return;
    if (this.known.size >= MAX_KNOWN) this.known.clear();
    this.known.add(hash);
    this.chain = this.chain.then(() =>
      this.write({
        hash,
        kind,
        id,
        text,
        seen: new Date((this.options.now ?? Date.now)()).toISOString(),
      }).catch((e: unknown) => {
        this.known.delete(hash);
        this.options.logger?.warn({ reason: (e as Error).message }, 'policy version not kept');
      }),
    );
  }

  /** Resolves once every version remembered so far was written (or failed); for tests and shutdown. */
  settled(): Promise<void> {
    return this.chain;
  }

  async get(hash: string): Promise<StoredPolicyVersion | undefined> {
    if (!isPolicyHash(hash)) return undefined;
    const raw = await this.storage.get(POLICY_VERSIONS_NAMESPACE, hash);
    return raw === undefined ? undefined : decode(hash, raw);
  }

  private async write(v: StoredPolicyVersion): Promise<void> {
    await this.storage.set(POLICY_VERSIONS_NAMESPACE, v.hash, Buffer.from(JSON.stringify(v), 'utf8'));
    const keys = (await this.storage.list(POLICY_VERSIONS_NAMESPACE)).filter(isPolicyHash);
    if (keys.length <= MAX_POLICY_VERSIONS) return;
    const seen: [string, string][] = [];
    for (const k of keys) {
      const raw = k === v.hash ? undefined : await this.storage.get(POLICY_VERSIONS_NAMESPACE, k);
      seen.push([k, k === v.hash ? v.seen : raw === undefined ? '' : (decode(k, raw)?.seen ?? '')]);
    }
    seen.sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    for (const [k] of seen.slice(0, seen.length - MAX_POLICY_VERSIONS)) {
      await this.storage.delete(POLICY_VERSIONS_NAMESPACE, k);
      this.known.delete(k);
    }
  }
}

function decode(hash: string, raw: Uint8Array): StoredPolicyVersion | undefined {
  try {
    const v = JSON.parse(Buffer.from(raw).toString('utf8')) as Partial<StoredPolicyVersion>;
    if (typeof v.text !== 'string' || policyHash(v.text) !== hash) return undefined;
    return {
      hash,
      kind: v.kind === 'attestation' ? 'attestation' : 'resource',
      id: typeof v.id === 'string' ? v.id : '',
      seen: typeof v.seen === 'string' ? v.seen : '',
      text: v.text,
    };
  } catch {
    return undefined;
  }
}
