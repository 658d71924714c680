// Attestation policies: stored as `<id>.rego` in `attestation_service_policy`,
// compiled once and cached per id, evaluated with the host builtin
// `query_reference_value(id)`.
//
// Rego builtins are synchronous while the RVPS is read asynchronously, so an
// evaluation runs against a snapshot of reference values: the ids a policy
// asked for before are fetched up front; if it asks for a new one, that value
// is fetched and the evaluation repeats. Results of a run that missed a value
// are discarded, so the answer is always computed from complete data.
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { KvStorage } from '../storage/types.js';
import { BROKER_DEFAULT_POLICY_CPU } from './broker-policy.js';
import { EAR_DEFAULT_POLICY_CPU, EAR_DEFAULT_POLICY_GPU } from './default-policies.gen.js';
import { AttestationFailed, InvalidPolicyId, ParsePolicyError } from './errors.js';
import { type CompiledPolicy, compilePolicy } from './rego-engine.js';

const NAMESPACE = 'attestation_service_policy';
const SUFFIX = '.rego';
/** Rego source size cap; trustee's own default policy is 12 KiB. */
export const MAX_POLICY_LENGTH = 1024 * 1024;
const POLICY_ID_RE = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$/;
/** A policy may look up more ids than this in one evaluation only by mistake (or malice). */
const MAX_REFERENCE_VALUE_IDS = 256;
const MAX_ROUNDS = 16;

/** The id of the project's stricter policy pair (`broker_default_cpu`, `broker_default_gpu`). */
export const BROKER_POLICY_ID = 'broker_default';

/**
 * The policies seeded (without overwriting) at start. `default_cpu` and `default_gpu` are trustee's
 * texts, unmodified, so that the KBS gives trustee's verdicts out of the box; the project's five-PCR
 * policy is `broker_default_cpu` (what `brokerctl render` and the demo install as `default_cpu`).
 * `trustee_default_*` repeat trustee's texts for stores and scripts that name them.
 */
export const DEFAULT_POLICIES: Readonly<Record<string, string>> = Object.freeze({
  default_cpu: EAR_DEFAULT_POLICY_CPU,
  default_gpu: EAR_DEFAULT_POLICY_GPU,
  [`${BROKER_POLICY_ID}_cpu`]: BROKER_DEFAULT_POLICY_CPU,
  [`${BROKER_POLICY_ID}_gpu`]: EAR_DEFAULT_POLICY_GPU,
  trustee_default_cpu: EAR_DEFAULT_POLICY_CPU,
  trustee_default_gpu: EAR_DEFAULT_POLICY_GPU,
});

export function checkPolicyId(id: string): void {
  if (!POLICY_ID_RE.test(id)) {
    throw new InvalidPolicyId(
      `invalid policy id ${JSON.stringify(id.slice(0, 64))}: use 1 to 128 of A-Z a-z 0-9 _ . - (not starting with .)`,
    );
  }
}

/** Reads reference values for the policy builtin; `undefined` when there is none. */
export type ReferenceValueSource = (name: string) => Promise<unknown>;

export interface PolicyResult {
  /** `data.policy.trust_claims` as JSON; undefined when the rule is absent or undefined. */
  readonly trustClaims: unknown;
  /** `data.policy.extensions` as JSON; undefined when absent or undefined. */
  readonly extensions: unknown;
}

interface CacheEntry {
  readonly text: string;
  readonly compiled: CompiledPolicy;
  /** Reference value ids this policy has asked for, fetched before the next evaluation. */
  readonly rvIds: Set<string>;
  checkedAt: number;
}

export interface PolicyStoreOptions {
  /**
   * How long a cached policy is used before the store is read again to notice
   * a change made by another replica, in ms. Changes through this instance
   * apply at once. Default 1000.
   */
  readonly revalidateMs?: number;
  readonly now?: () => number;
}

export class PolicyStore {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly revalidateMs: number;
  private readonly now: () => number;

  constructor(
    private readonly storage: KvStorage,
    private readonly logger: Logger,
    options: PolicyStoreOptions = {},
  ) {
    this.revalidateMs = options.revalidateMs ?? 1000;
    this.now = options.now ?? Date.now;
  }

  /** Writes the built-in policies unless a policy of that id is already stored. */
  async seedDefaults(): Promise<void> {
    for (const [id, text] of Object.entries(DEFAULT_POLICIES)) {
      const wrote = await this.storage.set(NAMESPACE, id + SUFFIX, Buffer.from(text, 'utf8'), {
        overwrite: false,
      });
      if (wrote) this.logger.debug({ policy: id }, 'seeded default attestation policy');
    }
    // A store seeded by an earlier version (or set so by an operator) keeps the project's five-PCR
    // policy as default_cpu: say so, since vTPM evidence is then not appraised by trustee's rules.
    if ((await this.get('default_cpu')) === BROKER_DEFAULT_POLICY_CPU) {
      this.logger.info(
        `attestation policy default_cpu is broker's five-PCR policy (${BROKER_POLICY_ID}_cpu), not trustee's default`,
      );
    }
  }

  /** Compiles, then stores (overwriting). A policy that does not compile is not stored. */
  async set(id: string, text: string): Promise<void> {
    checkPolicyId(id);
    const compiled = this.compile(id, text);
    await this.storage.set(NAMESPACE, id + SUFFIX, Buffer.from(text, 'utf8'), { overwrite: true });
    this.cache.set(id, { text, compiled, rvIds: new Set(), checkedAt: this.now() });
  }

  async get(id: string): Promise<string | undefined> {
    checkPolicyId(id);
    const bytes = await this.storage.get(NAMESPACE, id + SUFFIX);
    return bytes === undefined ? undefined : Buffer.from(bytes).toString('utf8');
  }

  async list(): Promise<string[]> {
    return (await this.storage.list(NAMESPACE))
      .filter((k) => k.endsWith(SUFFIX))
      .map((k) => k.slice(0, -SUFFIX.length));
  }

  private compile(id: string, text: string): CompiledPolicy {
    if (text.length > MAX_POLICY_LENGTH) {
      throw new ParsePolicyError(id, `policy ${id} is larger than ${MAX_POLICY_LENGTH} characters`);
    }
    try {
      return compilePolicy(id + SUFFIX, text);
    } catch (e) {
      throw new ParsePolicyError(id, `policy ${id} does not compile: ${(e as Error).message}`, { cause: e });
    }
  }

  /** The cached compiled policy, re-read from the store when the revalidation interval has passed. */
  private async entry(id: string): Promise<CacheEntry> {
    const cached = this.cache.get(id);
    const now = this.now();
    if (cached !== undefined && now - cached.checkedAt < this.revalidateMs) return cached;
    const text = await this.get(id);
    if (text === undefined) {
      this.cache.delete(id);
      throw new AttestationFailed('POLICY', `attestation policy ${id} not found`);
    }
    if (cached !== undefined && cached.text === text) {
      cached.checkedAt = now;
      return cached;
    }
    let compiled: CompiledPolicy;
    try {
      compiled = this.compile(id, text);
    } catch (e) {
      throw new AttestationFailed('POLICY', `stored attestation policy ${id} does not compile`, { cause: e });
    }
    const entry: CacheEntry = { text, compiled, rvIds: new Set(), checkedAt: now };
    this.cache.set(id, entry);
    this.logger.debug(
      { policy: id, sha384: createHash('sha384').update(text).digest('hex') },
      'loaded attestation policy',
    );
    return entry;
  }

  async evaluate(id: string, input: unknown, referenceValues: ReferenceValueSource): Promise<PolicyResult> {
    checkPolicyId(id);
    const entry = await this.entry(id);
    const snapshot = new Map<string, unknown>();
    const fetch = async (names: Iterable<string>): Promise<void> => {
      const todo = [...names].filter((n) => !snapshot.has(n));
      let values: unknown[];
      try {
        values = await Promise.all(todo.map((n) => referenceValues(n)));
      } catch (e) {
        throw new AttestationFailed('POLICY', `reference values for policy ${id} cannot be read`, {
          cause: e,
        });
      }
      todo.forEach((n, i) => {
        snapshot.set(n, values[i]);
      });
    };
    await fetch(entry.rvIds);
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const misses = new Set<string>();
      let result: PolicyResult;
      try {
        result = entry.compiled.evaluate(input, (name) => {
          if (snapshot.has(name)) return { found: true, value: snapshot.get(name) };
          if (snapshot.size + misses.size >= MAX_REFERENCE_VALUE_IDS) {
            throw new Error(`more than ${MAX_REFERENCE_VALUE_IDS} reference values queried`);
          }
          misses.add(name);
          return { found: false };
        });
      } catch (e) {
        throw new AttestationFailed('POLICY', `attestation policy ${id} failed: ${(e as Error).message}`, {
          cause: e,
        });
      }
      if (misses.size === 0) return result;
      for (const n of misses) if (entry.rvIds.size < MAX_REFERENCE_VALUE_IDS) entry.rvIds.add(n);
      await fetch(misses);
    }
    throw new AttestationFailed('POLICY', `attestation policy ${id} kept asking for new reference values`);
  }
}
