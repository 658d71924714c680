/**
 * The kata agent's policy engine semantics (`src/agent/policy/src/policy.rs`), on @broker/rego:
 * - one Rego engine in non-strict builtin mode with `print` gathered, data `{"pstate": {}}`;
 * - a request is allowed by `data.agent_policy.<Request>` evaluating to `true`, or to an object
 *   `{"allowed": true, "ops": [...]}` whose JSON-Patch ops are then applied to the data document;
 * - an undefined rule or a result of another type is an error (INTERNAL at the gate), unless the policy
 *   sets `AllowRequestsFailingPolicy`, which turns errors and denials into allows;
 * - loading a policy starts from a fresh engine (state reset); a policy that fails to load leaves an
 *   empty engine, so every later request fails.
 */

import { messageOf } from '@broker/cli';
import { Engine, ObjectValue, RegoEvalError, RegoParseError, toJSON, type Value } from '@broker/rego';
import { AgentPolicyError, type AgentPolicyErrorCode } from './errors.js';
import {
  applyPatch,
  cloneJson,
  InvalidPatchError,
  type Json,
  PatchApplyError,
  parsePatch,
} from './json-patch.js';

/** Policy source limits the agent configures on regorus (`POLICY_MAX_*` in kata's policy.rs). */
export const POLICY_MAX_FILE_BYTES = 16 * 1024 * 1024;
export const POLICY_MAX_LINES = 200_000;
export const POLICY_MAX_COL = 64 * 1024;

/** The name kata gives policies set by SetPolicy or initdata; it prefixes their `print` lines. */
export const SET_POLICY_SOURCE_NAME = 'agent_policy';

const ALLOW_FAILURES_RULE = 'AllowRequestsFailingPolicy';

/** Kata's error text for an undefined rule: regorus' `Debug` of an empty result set. */
const UNDEFINED_RESULT = 'policy check: unexpected eval_query result len QueryResults { result: [] }';

export interface PolicyDecision {
  readonly allowed: boolean;
  /** All `print` output of the evaluation, joined by a space (as kata puts it into the deny message). */
  readonly prints: string;
  /** State operations applied (only when allowed). */
  readonly ops: readonly unknown[];
}

/** The policy could not decide: evaluation error, undefined rule, or a result of the wrong shape. */
export class PolicyEvaluationError extends AgentPolicyError {
  override readonly code: AgentPolicyErrorCode = 'POLICY_EVALUATION_FAILED';
  override readonly name: string = 'PolicyEvaluationError';
  readonly request: string;
  /** The reason without the request prefix. */
  readonly reason: string;
  constructor(request: string, reason: string, options?: { cause?: unknown }) {
    super(`${request}: internal error ${reason}`, options);
    this.request = request;
    this.reason = reason;
  }
}

/** A new policy was rejected; the engine is now empty and every request fails until a policy loads. */
export class PolicyLoadError extends AgentPolicyError {
  override readonly code: AgentPolicyErrorCode = 'POLICY_LOAD_FAILED';
  override readonly name: string = 'PolicyLoadError';
}

export type RegoDialect = 'v0' | 'v1';

export interface AgentPolicyOptions {
  /**
   * Rego dialect of policies (without `import rego.v1`):
   * - `auto` (default): Rego v1, as kata-agent's current regorus parses; a policy that is not valid v1 is
   *   read as v0, as kata-agent did before, which genpolicy output up to 2025 needs;
   * - `v1` or `v0`: only that dialect.
   * In v0, a policy that uses `if`, `contains`, `every` or `in` without importing them from
   * `future.keywords` is refused: v0 (as regorus parses it) reads them as names, so
   * `X := true if { … }` would become an unconditional `X := true`.
   */
  readonly regoVersion?: RegoDialect | 'auto';
}

export interface LoadedPolicy {
  /** Source name used in `print` lines. */
  readonly name: string;
  /** The dialect the policy was parsed in. */
  readonly regoVersion: RegoDialect;
  readonly allowRequestsFailingPolicy: boolean;
}

function initialData(): Json {
  return { pstate: {} };
}

/** Checks the length limits kata sets on regorus, with regorus' wording. */
function checkSourceLimits(name: string, text: string): void {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > POLICY_MAX_FILE_BYTES) {
    throw new PolicyLoadError(
      `${name} exceeds maximum allowed policy file size ${POLICY_MAX_FILE_BYTES} bytes`,
    );
  }
  // regorus counts every newline plus one final (possibly empty) line.
  let line = 0;
  let start = 0;
  for (;;) {
    const nl = text.indexOf('\n', start);
    const end = nl < 0 ? text.length : nl;
    line++;
    if (line > POLICY_MAX_LINES) {
      throw new PolicyLoadError(`${name} exceeds maximum allowed line count ${POLICY_MAX_LINES}`);
    }
    // Columns count characters; the length test skips iterating code points for ordinary lines.
    if (end - start > POLICY_MAX_COL && [...text.slice(start, end)].length > POLICY_MAX_COL) {
      throw new PolicyLoadError(
        `${name}:${line}:${POLICY_MAX_COL + 1}: line exceeds maximum column width of ${POLICY_MAX_COL}`,
      );
    }
    if (nl < 0) return;
    start = nl + 1;
  }
}

const FUTURE_KEYWORDS = ['contains', 'every', 'if', 'in'] as const;

/**
 * The future keywords a v0 policy uses as bare words without importing them (comments and strings
 * skipped; `.name` references and calls such as the `contains(s, t)` builtin allowed). regorus' v0 parser would
 * read such a word as a rule name.
 */
export function unimportedFutureKeywords(source: string): string[] {
  // Blank out comments and string literals, keeping everything else in place.
  const code = source.replace(/#[^\n]*|"(?:[^"\\\n]|\\.)*"|`[^`]*`/g, (m) => ' '.repeat(m.length));
  const imported = new Set<string>();
  for (const m of code.matchAll(/^\s*import\s+(rego\.v1|future\.keywords(?:\.(\w+))?)\b/gm)) {
    if (m[1] === 'rego.v1' || m[2] === undefined) return [];
    imported.add(m[2]);
  }
  const body = code.replace(/^\s*import\s+[^\n]*/gm, '');
  return FUTURE_KEYWORDS.filter(
    (kw) => !imported.has(kw) && new RegExp(`(?<![\\w.])${kw}(?!\\w|\\s*\\()`).test(body),
  );
}

export class AgentPolicy {
  private readonly regoVersion: RegoDialect | 'auto';
  private engine: Engine;
  private data: Json = initialData();
  private allowFailures = false;
  private sourceName: string | undefined;

  constructor(options: AgentPolicyOptions = {}) {
    this.regoVersion = options.regoVersion ?? 'auto';
    this.engine = this.newEngine('v1');
  }

  private newEngine(regoVersion: RegoDialect): Engine {
    const engine = new Engine({
      regoVersion,
      strictBuiltinErrors: false,
      gatherPrints: true,
      limits: { maxPolicyBytes: POLICY_MAX_FILE_BYTES },
    });
    this.data = initialData();
    engine.addData(this.data);
    return engine;
  }

  /** Whether a policy is loaded (false initially and after a failed load). */
  get loaded(): boolean {
    return this.sourceName !== undefined;
  }

  /** Source name of the loaded policy, if any. */
  get name(): string | undefined {
    return this.sourceName;
  }

  get allowRequestsFailingPolicy(): boolean {
    return this.allowFailures;
  }

  /** A copy of the data document the policy sees (`{"pstate": …}` plus whatever ops added). */
  get state(): Json {
    return cloneJson(this.data);
  }

  /**
   * Replaces the policy, as kata's `set_policy`: a fresh engine (state reset), then the source is parsed
   * and compiled. On failure the engine stays empty (fail closed) and `PolicyLoadError` is thrown.
   * `AllowRequestsFailingPolicy` is then evaluated with input `{}`.
   */
  load(source: string, name: string = SET_POLICY_SOURCE_NAME): LoadedPolicy {
    this.engine = this.newEngine('v1');
    this.sourceName = undefined;
    // Unlike kata (which keeps the previous flag when the new policy fails to load), a failed load never
    // inherits an allow-everything switch.
    this.allowFailures = false;
    let dialect: RegoDialect;
    try {
      checkSourceLimits(name, source);
      dialect = this.parse(name, source);
    } catch (e) {
      this.engine = this.newEngine('v1');
      throw new PolicyLoadError(messageOf(e), { cause: e });
    }
    this.sourceName = name;
    let allow = false;
    try {
      allow = this.evaluate(ALLOW_FAILURES_RULE, {}).allowed;
    } catch {
      allow = false;
    }
    this.allowFailures = allow;
    return { name, regoVersion: dialect, allowRequestsFailingPolicy: allow };
  }

  /** Parses and compiles into a fresh engine of the right dialect; returns the dialect used. */
  private parse(name: string, source: string): RegoDialect {
    const attempt = (dialect: RegoDialect): void => {
      if (dialect === 'v0') {
        const misused = unimportedFutureKeywords(source);
        if (misused.length > 0) {
          throw new PolicyLoadError(
            `${name}: ${misused.map((k) => `\`${k}\``).join(', ')} used without \`import future.keywords\`; ` +
              'Rego v0 would read it as a name (add the import or write the policy in Rego v1)',
          );
        }
      }
      const engine = this.newEngine(dialect);
      engine.addPolicy(name, source);
      engine.prepare();
      this.engine = engine;
    };
    if (this.regoVersion !== 'auto') {
      attempt(this.regoVersion);
      return this.regoVersion;
    }
    try {
      attempt('v1');
      return 'v1';
    } catch (v1Error) {
      if (!(v1Error instanceof RegoParseError)) throw v1Error;
      try {
        attempt('v0');
        return 'v0';
      } catch (v0Error) {
        throw new PolicyLoadError(`${messageOf(v1Error)} (as Rego v0: ${messageOf(v0Error)})`, {
          cause: v1Error,
        });
      }
    }
  }

  /**
   * Evaluates `data.agent_policy.<request>` with `input`. Returns the decision (denials included);
   * throws `PolicyEvaluationError` when the policy cannot decide.
   */
  evaluate(request: string, input: unknown): PolicyDecision {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(request)) {
      throw new PolicyEvaluationError(
        request,
        `invalid request name ${JSON.stringify(request.slice(0, 80))}`,
      );
    }
    let value: Value | undefined;
    try {
      this.engine.setInput(input);
      value = this.evalRule(`data.agent_policy.${request}`);
    } catch (e) {
      this.engine.takePrints();
      throw new PolicyEvaluationError(request, messageOf(e), { cause: e });
    } finally {
      this.engine.setInput(undefined);
    }
    const prints = this.engine.takePrints().join(' ');
    if (value === undefined) {
      if (this.allowFailures) return { allowed: true, prints, ops: [] };
      throw new PolicyEvaluationError(request, UNDEFINED_RESULT);
    }
    let allowed: boolean;
    let ops: unknown[] = [];
    if (typeof value === 'boolean') {
      allowed = value;
    } else if (value instanceof ObjectValue) {
      ({ allowed, ops } = this.applyObjectResult(request, value));
    } else {
      throw new PolicyEvaluationError(
        request,
        `policy check: unexpected eval_query result type ${JSON.stringify(toJSON(value), bigintJson)}`,
      );
    }
    if (!allowed && this.allowFailures) allowed = true;
    return { allowed, prints, ops };
  }

  /**
   * The rule's value, or undefined. Kata runs the query `data.agent_policy.<request>`, where a rule the
   * policy does not define is an empty result; the engine's direct rule evaluation (faster than a query)
   * reports such a path as an error instead, which is mapped back to undefined here.
   */
  private evalRule(path: string): Value | undefined {
    try {
      return this.engine.evalRule(path);
    } catch (e) {
      if (
        e instanceof RegoEvalError &&
        e.code === 'eval_internal_error' &&
        /not a valid rule path/.test(e.message)
      ) {
        return undefined;
      }
      throw e;
    }
  }

  /** `{"allowed": bool, "ops": [...]?}`: the ops patch the data document, only when allowed. */
  private applyObjectResult(request: string, value: ObjectValue): { allowed: boolean; ops: unknown[] } {
    const obj = toJSON(value) as Record<string, unknown>;
    const fail = (reason: string, cause?: unknown): never => {
      throw new PolicyEvaluationError(request, reason, cause === undefined ? undefined : { cause });
    };
    if (!Object.hasOwn(obj, 'allowed')) fail('missing field `allowed`');
    if (typeof obj.allowed !== 'boolean') fail('invalid type for `allowed`, expected a boolean');
    const allowed = obj.allowed as boolean;
    const rawOps = Object.hasOwn(obj, 'ops') ? obj.ops : null;
    let ops: ReturnType<typeof parsePatch> = [];
    if (rawOps !== null) {
      try {
        ops = parsePatch(rawOps);
      } catch (e) {
        fail(messageOf(e), e);
      }
    }
    if (allowed && ops.length > 0) {
      let next: Json;
      try {
        next = applyPatch(this.data, ops);
      } catch (e) {
        if (e instanceof PatchApplyError || e instanceof InvalidPatchError) fail(e.message, e);
        throw e;
      }
      if (typeof next !== 'object' || next === null || Array.isArray(next)) {
        fail('state ops must leave the data document an object');
      }
      this.engine.clearData();
      try {
        this.engine.addData(next);
      } catch (e) {
        this.engine.clearData();
        this.engine.addData(this.data);
        fail(messageOf(e), e);
      }
      this.data = next;
    }
    return { allowed, ops: allowed && Array.isArray(rawOps) ? rawOps : [] };
  }
}

/** JSON.stringify replacer writing bigints as numbers' digits (quoted; only used in error text). */
function bigintJson(_key: string, v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v;
}
