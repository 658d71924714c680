// The KBS resource policy (trustee api_server.rs + deps/policy-engine): stored as
// `resource-policy.rego` in the `kbs` namespace, seeded with trustee's default (never overwriting an
// existing one), evaluated with input = the token claims and data = {plugin, resource-path, query};
// access needs `data.policy.allow` to be exactly true.
import { createHash } from 'node:crypto';
import {
  limitErrorOf,
  limitFailures,
  limitRefusal,
  POLICY_EVAL_LIMITS,
  PolicyCheckError,
  policyChecks,
} from '@broker/attestation';
import type { KvStorage } from '@broker/kv-storage';
import { BoundedCache } from '@broker/kv-storage';
import { Engine, fromJSON, type RegoLimitError, toJSON, type Value } from '@broker/rego';
import { KbsServiceError } from '../errors.js';
import {
  AFFIRMING_RESOURCE_POLICY,
  ALLOW_ALL_RESOURCE_POLICY,
  DEFAULT_RESOURCE_POLICY,
  DENY_ALL_RESOURCE_POLICY,
} from './resource-policies.gen.js';

export const RESOURCE_POLICY_ID = 'resource-policy';
export const RESOURCE_POLICY_RULE = 'data.policy.allow';
const NAMESPACE = 'kbs';
const SUFFIX = '.rego';
/** Largest policy text accepted, in bytes. */
export const MAX_POLICY_BYTES = 1024 * 1024;

/** The sample policies kbs-client can set by flag. */
export const BUILTIN_RESOURCE_POLICIES = Object.freeze({
  default: DEFAULT_RESOURCE_POLICY,
  allow_all: ALLOW_ALL_RESOURCE_POLICY,
  deny_all: DENY_ALL_RESOURCE_POLICY,
  affirming: AFFIRMING_RESOURCE_POLICY,
});

/** trustee's policy_engine::PolicyError; its message is the Display text. */
export class PolicyEngineError extends KbsServiceError {
  override readonly name: string = 'PolicyEngineError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('POLICY_ENGINE_FAILED', message, options);
  }
}

export interface PolicyData {
  readonly plugin: string;
  readonly 'resource-path': readonly string[];
  readonly query: Readonly<Record<string, string>>;
}

/** A policy text and its version: the SHA-256 of its UTF-8 bytes, in hex. */
export interface PolicyVersion {
  readonly hash: string;
  readonly text: string;
}

/** The version (SHA-256 hex) of a policy text. */
export function policyHash(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

export interface PolicyDecision {
  readonly allow: boolean;
  /** The policy text that decided. */
  readonly policy?: PolicyVersion;
  /** Why a non-true result counted as a denial (rule undefined, not a boolean); for the log and metrics. */
  readonly anomaly?: string;
}

function compile(text: string): Engine {
  const engine = new Engine({
    regoVersion: 'v1',
    strictBuiltinErrors: true,
    gatherPrints: false,
    limits: POLICY_EVAL_LIMITS,
  });
  engine.addPolicy('resource-policy.rego', text);
  return engine;
}

/**
 * What the check evaluates a new policy on: the claims of an EAR token of one affirming appraisal, and a
 * `resource` plugin request. A policy that reaches a limit on it would do so on the first guest's.
 */
export const REPRESENTATIVE_CLAIMS: Readonly<Record<string, unknown>> = Object.freeze({
  eat_profile: 'tag:github.com,2023:veraison/ear',
  iat: 1_700_000_000,
  'ear.verifier-id': { developer: 'https://confidentialcontainers.org', build: 'check' },
  submods: {
    cpu0: {
      'ear.status': 'affirming',
      'ear.trustworthiness-vector': {
        configuration: 2,
        executables: 3,
        hardware: 2,
        'instance-identity': 2,
        'runtime-opaque': 2,
        'storage-opaque': 2,
        'sourced-data': 0,
        'file-system': 0,
      },
      'ear.appraisal-policy-id': 'default',
      'ear.veraison.annotated-evidence': {
        init_data: '',
        report_data: '',
        runtime_data_claims: { 'tee-pubkey': { kty: 'EC', crv: 'P-256', alg: 'ES256' } },
      },
    },
  },
  exp: 1_700_000_300,
  iss: 'CoCo-Attestation-Service',
});
export const REPRESENTATIVE_DATA: PolicyData = Object.freeze({
  plugin: 'resource',
  'resource-path': ['default', 'key', 'check'],
  query: {},
});

/**
 * The checks a resource policy passes before it is stored (admin API, hot reload) and that the console's
 * check runs: it compiles, defines `allow` in package `policy`, and its evaluation on the representative
 * request stays within the limits. Other evaluation errors there are not refused (the policy may expect
 * claims the representative token lacks). Synchronous: call it through `policyChecks`.
 */
export function checkResourcePolicy(text: string): Engine {
  if (Buffer.byteLength(text, 'utf8') > MAX_POLICY_BYTES) {
    throw new PolicyEngineError(`Failed to load policy: larger than ${MAX_POLICY_BYTES} bytes`);
  }
  let engine: Engine;
  try {
    engine = compile(text);
    engine.prepare();
  } catch (e) {
    throw new PolicyEngineError(`Failed to load policy: ${(e as Error).message}`);
  }
  if (!engine.hasRule(RESOURCE_POLICY_RULE)) {
    throw new PolicyCheckError(
      'missing_rule',
      `Failed to load policy: it defines no \`allow\` rule in package \`policy\` (${RESOURCE_POLICY_RULE}), which the KBS evaluates for every request`,
    );
  }
  const known = limitFailures.get('resource', text);
  if (known !== undefined) throw limitRefusal('the resource policy', known, true);
  const trial = engine.clone();
  try {
    trial.addData(fromJSON(REPRESENTATIVE_DATA));
    trial.evalRules([RESOURCE_POLICY_RULE], trial.inputValue(REPRESENTATIVE_CLAIMS));
  } catch (e) {
    const limit = limitErrorOf(e);
    if (limit !== undefined) {
      limitFailures.remember('resource', text, limit);
      throw limitRefusal('the resource policy', limit, false);
    }
  }
  return engine;
}

/**
 * Distinct request data documents (plugin, path, query) kept compiled with the current policy. Only
 * requests whose token verified get this far, but the path and query are still theirs to choose: the
 * cache is bounded by bytes, and a long data document is compiled for its request alone.
 */
const DATA_ENGINE_CACHE = { maxEntries: 64, maxBytes: 64 * 1024 * 1024 };
const MAX_CACHED_DATA_LENGTH = 8 * 1024;
/** Estimated memory of an engine clone beyond the policy text and the data: compiled rules, maps. */
const ENGINE_OVERHEAD = 64 * 1024;

export interface ResourcePolicyOptions {
  /**
   * Hears each request refused because the policy's evaluation exceeded a limit: `remembered` when the
   * policy was not evaluated again (an earlier request with this policy text exceeded it).
   */
  readonly onLimit?: (remembered: boolean) => void;
}

export class ResourcePolicy {
  /** The compiled form of the last policy text read from storage; recompiled when the text changes. */
  private compiled:
    | {
        text: string;
        engine: Engine;
        deterministic: boolean;
        raw?: Uint8Array;
        /** Set once an evaluation of this text exceeded a limit: later requests are refused at once. */
        limit?: RegoLimitError;
      }
    | undefined;
  /**
   * The current policy with a request's data merged in and compiled, per data document. Merging data
   * resets the engine's compiled form, so without this every request would compile the policy again.
   */
  private readonly withData = new BoundedCache<string, Engine>(DATA_ENGINE_CACHE);

  /** The text (and its hash) each engine was compiled from, base engines and their data clones alike. */
  private readonly versions = new WeakMap<Engine, PolicyVersion>();

  /** Input values per frozen claims object (see inputValue); dropped with the claims. */
  private readonly inputs = new WeakMap<object, Value>();
  /**
   * Decisions of a deterministic policy per frozen claims object and engine (one per policy text and
   * data document); dropped with either. Failures are not kept: they are evaluated (and fail) again.
   */
  private readonly decisions = new WeakMap<object, WeakMap<Engine, PolicyDecision>>();

  constructor(
    private readonly storage: KvStorage,
    private readonly options: ResourcePolicyOptions = {},
  ) {}

  /** Writes trustee's default unless a policy is already stored. */
  async seedDefault(): Promise<void> {
    await this.storage.set(
      NAMESPACE,
      RESOURCE_POLICY_ID + SUFFIX,
      Buffer.from(DEFAULT_RESOURCE_POLICY, 'utf8'),
      {
        overwrite: false,
      },
    );
  }

  /**
   * checkResourcePolicy (in its turn in the queue of checks, never refused as busy), then store
   * (overwriting). PolicyEngineError when it does not compile, PolicyCheckError when it lacks `allow` or
   * exceeds a limit on the representative request; nothing is stored then.
   */
  async set(text: string): Promise<void> {
    const engine = await policyChecks.run(() => checkResourcePolicy(text), false);
    await this.storage.set(NAMESPACE, RESOURCE_POLICY_ID + SUFFIX, Buffer.from(text, 'utf8'));
    this.use(text, engine);
  }

  private use(text: string, engine: Engine, raw?: Uint8Array): void {
    this.versions.set(engine, { hash: policyHash(text), text });
    this.compiled = {
      text,
      engine,
      deterministic: engine.isDeterministic(),
      ...(raw !== undefined && { raw }),
    };
    this.withData.clear();
  }

  /** Stored policy ids, without the `.rego` suffix. */
  async list(): Promise<string[]> {
    const ids: string[] = [];
    for (const key of await this.storage.list(NAMESPACE)) {
      if (!key.endsWith(SUFFIX)) {
        throw new PolicyEngineError(
          `Malformed policy: There is at least one policy in the storage with invalid name. The policy name should contain the policy suffix ${SUFFIX}.`,
        );
      }
      ids.push(key.slice(0, -SUFFIX.length));
    }
    return ids;
  }

  private async engine(): Promise<Engine> {
    const raw = await this.storage.get(NAMESPACE, RESOURCE_POLICY_ID + SUFFIX);
    if (raw === undefined) throw new PolicyEngineError(`Policy \`${RESOURCE_POLICY_ID}${SUFFIX}\` not found`);
    // The same bytes as last time: no need to decode and compare the text.
    const last = this.compiled;
    if (last?.raw !== undefined && Buffer.compare(last.raw, raw) === 0) return last.engine;
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
    } catch {
      throw new PolicyEngineError(`Policy \`${RESOURCE_POLICY_ID}${SUFFIX}\` is not a utf-8 string`);
    }
    if (last?.text === text) {
      last.raw = raw;
      return last.engine;
    }
    let engine: Engine;
    try {
      engine = compile(text);
    } catch (e) {
      throw new PolicyEngineError(`Failed to load policy: ${(e as Error).message}`);
    }
    this.use(text, engine, raw);
    return engine;
  }

  /** A compiled engine holding `data`, from the cache when this data was seen with this policy. */
  private async engineFor(data: PolicyData): Promise<Engine> {
    const base = await this.engine();
    const key = JSON.stringify(data);
    const hit = this.withData.get(key);
    if (hit !== undefined) return hit;
    const e = base.clone();
    const version = this.versions.get(base);
    if (version !== undefined) this.versions.set(e, version);
    try {
      e.addData(fromJSON(data));
      e.prepare();
    } catch (err) {
      throw new PolicyEngineError(`Failed to load reference data: ${(err as Error).message}`);
    }
    if (key.length <= MAX_CACHED_DATA_LENGTH) {
      const policyLength = this.compiled?.text.length ?? 0;
      this.withData.set(key, e, 4 * key.length + 2 * policyLength + ENGINE_OVERHEAD);
    }
    return e;
  }

  /**
   * The claims as the engine's input value. Verified claims are frozen and the token verifier hands out
   * the same object for every request with that token, so the conversion (a deep copy of the whole EAR
   * payload) is made once per token rather than once per request.
   */
  private inputValue(engine: Engine, claims: unknown): Value | undefined {
    if (claims === undefined) return undefined;
    if (typeof claims !== 'object' || claims === null || !Object.isFrozen(claims)) {
      return engine.inputValue(claims);
    }
    let v = this.inputs.get(claims);
    if (v === undefined) {
      v = engine.inputValue(claims);
      this.inputs.set(claims, v);
    }
    return v;
  }

  /** Evaluates `data.policy.allow`; PolicyEngineError when the policy cannot be loaded or evaluated. */
  async evaluate(claims: unknown, data: PolicyData): Promise<PolicyDecision> {
    const e = await this.engineFor(data);
    const failed = this.compiled?.limit;
    if (failed !== undefined) {
      this.options.onLimit?.(true);
      throw new PolicyEngineError(
        `Failed to eval policy: ${failed.message} (an earlier evaluation of this policy exceeded the limit; it is not evaluated again until it changes)`,
        { cause: failed },
      );
    }
    // A deterministic policy gives the same decision for the same (frozen) claims and data: a guest
    // fetching its resources with one token is judged once per resource path, not once per request.
    const memo =
      this.compiled?.deterministic === true &&
      typeof claims === 'object' &&
      claims !== null &&
      Object.isFrozen(claims)
        ? claims
        : undefined;
    if (memo !== undefined) {
      const known = this.decisions.get(memo)?.get(e);
      if (known !== undefined) return known;
    }
    const decided = this.decide(e, claims);
    const version = this.versions.get(e);
    const decision = version === undefined ? decided : { ...decided, policy: version };
    if (memo !== undefined) {
      let perEngine = this.decisions.get(memo);
      if (perEngine === undefined) {
        perEngine = new WeakMap();
        this.decisions.set(memo, perEngine);
      }
      perEngine.set(e, decision);
    }
    return decision;
  }

  private decide(e: Engine, claims: unknown): PolicyDecision {
    let result: unknown;
    try {
      const [v] = e.evalRules([RESOURCE_POLICY_RULE], this.inputValue(e, claims));
      result = v === undefined ? undefined : toJSON(v);
    } catch (err) {
      const limit = limitErrorOf(err);
      if (limit !== undefined && this.compiled !== undefined) {
        this.compiled.limit = limit;
        this.options.onLimit?.(false);
      }
      throw new PolicyEngineError(`Failed to eval policy: ${(err as Error).message}`, { cause: err });
    }
    if (result === true) return { allow: true };
    if (result === false) return { allow: false };
    return {
      allow: false,
      anomaly:
        result === undefined
          ? `The KBS Resource Policy does not define the \`${RESOURCE_POLICY_RULE}\` rule, use false as default`
          : `\`${RESOURCE_POLICY_RULE}\` rule result is not a boolean, use false as default`,
    };
  }
}
