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
import type { KvStorage } from '@broker/kv-storage';
import type { RegoLimitError } from '@broker/rego';
import type { Logger } from 'pino';
import { BROKER_DEFAULT_POLICY_CPU } from './broker-policy.js';
import {
  EAR_DEFAULT_POLICY_CPU,
  EAR_DEFAULT_POLICY_GPU,
  EAR_DEFAULT_POLICY_PPCIE,
  EAR_DEFAULT_POLICY_SWITCH,
} from './default-policies.gen.js';
import { AttestationFailed, InvalidPolicyId, ParsePolicyError } from './errors.js';
import { limitErrorOf, limitFailures, limitRefusal, PolicyCheckError, policyChecks } from './limits.js';
import { type CompiledPolicy, compilePolicy, TRUST_CLAIMS_RULE } from './rego-engine.js';

const NAMESPACE = 'attestation_service_policy';
const SUFFIX = '.rego';
/** Rego source size cap; trustee's own default policy is 12 KiB. */
export const MAX_POLICY_LENGTH = 1024 * 1024;
const POLICY_ID_RE = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$/;
/** A policy may look up more ids than this in one evaluation only by mistake (or malice). */
const MAX_REFERENCE_VALUE_IDS = 256;
const MAX_ROUNDS = 16;

/** The id of the project's stricter policy set (`broker_default_cpu`, `broker_default_gpu`, …). */
export const BROKER_POLICY_ID = 'broker_default';

/**
 * The policies seeded (without overwriting) at start, one per TEE class (`cpu`, `gpu`, `switch` for an
 * NVSwitch, `ppcie` for a protected PCIe topology) as trustee's attestation service seeds them.
 * `default_*` are trustee's texts, unmodified, so that the KBS gives trustee's verdicts out of the box;
 * the project's five-PCR policy is `broker_default_cpu` (what `brokerctl render` and the demo install as
 * `default_cpu`), its other classes trustee's. `trustee_default_*` repeat trustee's texts for stores and
 * scripts that name them.
 */
export const DEFAULT_POLICIES: Readonly<Record<string, string>> = Object.freeze({
  default_cpu: EAR_DEFAULT_POLICY_CPU,
  default_gpu: EAR_DEFAULT_POLICY_GPU,
  default_switch: EAR_DEFAULT_POLICY_SWITCH,
  default_ppcie: EAR_DEFAULT_POLICY_PPCIE,
  [`${BROKER_POLICY_ID}_cpu`]: BROKER_DEFAULT_POLICY_CPU,
  [`${BROKER_POLICY_ID}_gpu`]: EAR_DEFAULT_POLICY_GPU,
  [`${BROKER_POLICY_ID}_switch`]: EAR_DEFAULT_POLICY_SWITCH,
  [`${BROKER_POLICY_ID}_ppcie`]: EAR_DEFAULT_POLICY_PPCIE,
  trustee_default_cpu: EAR_DEFAULT_POLICY_CPU,
  trustee_default_gpu: EAR_DEFAULT_POLICY_GPU,
  trustee_default_switch: EAR_DEFAULT_POLICY_SWITCH,
  trustee_default_ppcie: EAR_DEFAULT_POLICY_PPCIE,
});

export function checkPolicyId(id: string): void {
  if (!POLICY_ID_RE.test(id)) {
    throw new InvalidPolicyId(
      `invalid policy id ${JSON.stringify(id.slice(0, 64))}: use 1 to 128 of A-Z a-z 0-9 _ . - (not starting with .)`,
    );
  }
}

/**
 * What the check evaluates a new policy on: annotated evidence as the sample verifier gives it (with the
 * init data and runtime data claims every verifier adds); every reference value reads as null.
 */
export const REPRESENTATIVE_EVIDENCE: Readonly<Record<string, unknown>> = Object.freeze({
  sample: { svn: '1', launch_digest: 'abcde', productId: '0', platform_version: { major: 1, minor: 4 } },
  init_data: '',
  report_data: '',
  init_data_claims: {},
  runtime_data_claims: { 'tee-pubkey': { kty: 'EC', crv: 'P-256', alg: 'ES256' } },
});

/**
 * The checks an attestation policy passes before it is stored (admin API, gRPC and REST of the attestation
 * service, hot reload) and that the console's check runs: it compiles (ParsePolicyError), defines
 * `trust_claims` in package `policy` (trustee's attestation service reads the EAR trust vector from
 * `data.policy.trust_claims` and fails every appraisal without it; `extensions` is optional), and its
 * evaluation on REPRESENTATIVE_EVIDENCE stays within the limits (PolicyCheckError). Synchronous: call it
 * through `policyChecks`.
 */
export function checkAttestationPolicy(id: string, text: string): CompiledPolicy {
  if (text.length > MAX_POLICY_LENGTH) {
    throw new ParsePolicyError(id, `policy ${id} is larger than ${MAX_POLICY_LENGTH} characters`);
  }
  let compiled: CompiledPolicy;
  try {
    compiled = compilePolicy(id + SUFFIX, text);
  } catch (e) {
    throw new ParsePolicyError(id, `policy ${id} does not compile: ${(e as Error).message}`, { cause: e });
  }
  if (!compiled.rules.includes(TRUST_CLAIMS_RULE)) {
    throw new PolicyCheckError(
      'missing_rule',
      `policy ${id} defines no \`trust_claims\` rule in package \`policy\` (${TRUST_CLAIMS_RULE}): the EAR trust vector is read from it, and without it every appraisal fails`,
    );
  }
  const known = limitFailures.get('attestation', text);
  if (known !== undefined) throw limitRefusal(`policy ${id}`, known, true);
  try {
    compiled.evaluate(REPRESENTATIVE_EVIDENCE, () => ({ found: true, value: undefined }));
  } catch (e) {
    const limit = limitErrorOf(e);
    if (limit !== undefined) {
      limitFailures.remember('attestation', text, limit);
      throw limitRefusal(`policy ${id}`, limit, false);
    }
  }
  return compiled;
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
  /** Set once an evaluation of this text exceeded a limit: later ones are refused at once. */
  limit?: RegoLimitError;
}

export interface PolicyStoreOptions {
  /**
   * How long a cached policy is used before the store is read again to notice
   * a change made by another replica, in ms. Changes through this instance
   * apply at once. Default 1000.
   */
  readonly revalidateMs?: number;
  readonly now?: () => number;
  /**
   * Hears each evaluation refused because the policy exceeded a limit: `remembered` when it was not
   * evaluated again (an earlier evaluation of this text exceeded it).
   */
  readonly onLimit?: (remembered: boolean) => void;
}

export class PolicyStore {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly revalidateMs: number;
  private readonly now: () => number;
  private readonly onLimit: ((remembered: boolean) => void) | undefined;

  constructor(
    private readonly storage: KvStorage,
    private readonly logger: Logger,
    options: PolicyStoreOptions = {},
  ) {
    this.revalidateMs = options.revalidateMs ?? 1000;
    this.now = options.now ?? Date.now;
    this.onLimit = options.onLimit;
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

  /** checkAttestationPolicy, then stores (overwriting). A policy that fails the checks is not stored. */
  async set(id: string, text: string): Promise<void> {
    checkPolicyId(id);
    const compiled = await policyChecks.run(() => checkAttestationPolicy(id, text), false);
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
    if (entry.limit !== undefined) {
      this.onLimit?.(true);
      throw new AttestationFailed(
        'POLICY',
        `attestation policy ${id} failed: ${entry.limit.message} (an earlier evaluation of this policy exceeded the limit; it is not evaluated again until it changes)`,
        { cause: entry.limit },
      );
    }
    await fetch(entry.rvIds);
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const misses = new Set<string>();
      let result: PolicyResult;
      try {
        result = entry.compiled.evaluate(input, (name) => {
          if (snapshot.has(name)) return { found: true, value: snapshot.get(name) };
          if (snapshot.size + misses.size >= MAX_REFERENCE_VALUE_IDS) {
            throw new AttestationFailed(
              'POLICY',
              `more than ${MAX_REFERENCE_VALUE_IDS} reference values queried`,
            );
          }
          misses.add(name);
          return { found: false };
        });
      } catch (e) {
        const limit = limitErrorOf(e);
        if (limit !== undefined) {
          entry.limit = limit;
          this.onLimit?.(false);
        }
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
