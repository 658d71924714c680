// The embedding API, shaped after regorus' Engine: load policies and data once, evaluate many times.
import type { CallExpr, Module, SourceFile } from './ast.js';
import type { BuiltinDef } from './builtins/api.js';
import { BUILTINS, DEPRECATED, UNSUPPORTED } from './builtins/index.js';
import {
  type BuiltinArities,
  type CompiledPolicy,
  callsNamed,
  compile,
  compileQuery,
  pathString,
} from './compiler.js';
import { type ErrorStyle, opaErrorText, RegoEvalError, RegoLimitError, RegoParseError } from './errors.js';
import { type HostBuiltin, type HostFunction, type InputReadListener, Interpreter } from './interpreter.js';
import { parseModule, parseQuery } from './parser.js';
import { equals, ObjectValue, SetValue, type Value, withMeter } from './value.js';

export interface EngineLimits {
  /** Maximum size of one policy source, in UTF-16 code units. */
  readonly maxPolicyBytes: number;
  /** Maximum nesting of terms, comprehensions and bodies in a policy or query. */
  readonly maxNesting: number;
  /** Maximum evaluation steps per query. */
  readonly maxSteps: number;
  /** Maximum nesting of rule, function and comprehension evaluation. */
  readonly maxCallDepth: number;
  /** Maximum elements of a collection built during evaluation. */
  readonly maxCollectionSize: number;
  /**
   * Maximum bytes of strings, arrays, sets and objects built during one evaluation (an estimate: string
   * characters, collection slots and the keys of sets and objects; garbage counts too). Exceeding it is a
   * RegoLimitError with limit `memory`.
   */
  readonly maxMemoryBytes: number;
  /** Maximum nesting depth of input and data documents. */
  readonly maxDocumentDepth: number;
  /** Maximum length of a regex pattern given to regex builtins. */
  readonly maxRegexLength: number;
}

export const DEFAULT_LIMITS: EngineLimits = {
  maxPolicyBytes: 4 * 1024 * 1024,
  maxNesting: 128,
  maxSteps: 50_000_000,
  maxCallDepth: 256,
  maxCollectionSize: 1_000_000,
  maxMemoryBytes: 256 * 1024 * 1024,
  maxDocumentDepth: 512,
  maxRegexLength: 16 * 1024,
};

export interface EngineOptions {
  /** Rego language version of policies without `import rego.v1`; default v1. */
  readonly regoVersion?: 'v1' | 'v0';
  /** Raise builtin errors (true, the default) or make the failing expression undefined (as kata runs it). */
  readonly strictBuiltinErrors?: boolean;
  /** Collect `print` output for takePrints() instead of discarding it. */
  readonly gatherPrints?: boolean;
  readonly limits?: Partial<EngineLimits>;
  /**
   * Error messages as regorus words them (`'regorus'`, the default: `file:row:col: message`) or as OPA
   * prints them (`'opa'`: `file:row: code: message`, OPA's wording for conflicts).
   */
  readonly errorStyle?: ErrorStyle;
}

export interface ExpressionResult {
  readonly value: Value;
  readonly text: string;
  readonly location: { readonly row: number; readonly col: number };
}

export interface QueryResult {
  readonly expressions: ExpressionResult[];
  readonly bindings: Record<string, Value>;
}

export interface QueryResults {
  readonly result: QueryResult[];
}

/** Builtins evaluated by the engine itself rather than the builtin library. */
const ENGINE_BUILTINS: ReadonlyMap<string, BuiltinDef> = new Map<string, BuiltinDef>([
  [
    'trace',
    {
      arity: 1,
      fn: ([s]) => (typeof s === 'string' ? true : undefined),
    },
  ],
  ['opa.runtime', { arity: 0, fn: () => new ObjectValue() }],
]);

const QUERY_MODULE_FILE: SourceFile = {
  name: '<query_module.rego>',
  text: 'package __internal_query_module',
};

interface SharedState {
  readonly modules: readonly Module[];
  readonly data: ObjectValue;
  readonly hostBuiltins: ReadonlyMap<string, HostBuiltin>;
}

export class Engine {
  private modules: Module[] = [];
  private data = new ObjectValue();
  private input: Value | undefined;
  private hostBuiltins = new Map<string, HostBuiltin>();
  private mocked: ReadonlySet<string> = new Set();
  private compiled: CompiledPolicy | undefined;
  private prints: string[] = [];
  private readonly regoV1: boolean;
  private readonly strict: boolean;
  private readonly gatherPrints: boolean;
  private readonly errorStyle: ErrorStyle;
  readonly limits: EngineLimits;
  private queryModule: Module | undefined;

  constructor(opts: EngineOptions = {}) {
    this.regoV1 = (opts.regoVersion ?? 'v1') === 'v1';
    this.strict = opts.strictBuiltinErrors ?? true;
    this.gatherPrints = opts.gatherPrints ?? false;
    this.errorStyle = opts.errorStyle ?? 'regorus';
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
  }

  /** Parses a policy; returns its package as `data.<package>`. */
  addPolicy(path: string, source: string): string {
    return this.styled(() => {
      if (source.length > this.limits.maxPolicyBytes) {
        throw new RegoLimitError(
          'policy_size',
          `${path} exceeds the maximum policy size of ${this.limits.maxPolicyBytes} bytes`,
        );
      }
      const m = guarded(path, () =>
        parseModule(
          { name: path, text: source },
          { regoV1: this.regoV1, maxNesting: this.limits.maxNesting },
        ),
      );
      // Unsupported builtins are refused, unless a `with` modifier of this or an earlier module replaces them.
      const mocked = new Set(this.mocked);
      const unsupported = callsNamed(m, UNSUPPORTED, mocked).find(
        (c) => !this.hostBuiltins.has(pathOf(c)) && !allBuiltins().has(pathOf(c)) && !mocked.has(pathOf(c)),
      );
      if (unsupported) {
        throw new RegoParseError(
          path,
          unsupported.loc.line,
          unsupported.loc.col,
          `builtin ${pathOf(unsupported)} is not supported by this engine`,
          'rego_type_error',
        );
      }
      this.modules = [...this.modules, m];
      this.mocked = mocked;
      this.compiled = undefined;
      return `data.${m.pkg.join('.')}`;
    });
  }

  /** Packages of the loaded policies, as `data.<package>`. */
  getPackages(): string[] {
    return [...new Set(this.modules.map((m) => `data.${m.pkg.join('.')}`))].sort();
  }

  /** Deep-merges a document into `data`. A conflicting leaf is an error and leaves `data` unchanged. */
  addData(value: unknown): void {
    const v = this.toValue(value, 'data');
    if (!(v instanceof ObjectValue)) throw new RegoEvalError('rego_type_error', 'data must be an object');
    // Compiled policies do not depend on data, so they stay valid.
    this.data = deepMerge(this.data, v, 0, this.limits.maxDocumentDepth) as ObjectValue;
  }

  /** Removes all base documents. */
  clearData(): void {
    this.data = new ObjectValue();
  }

  /** Parses JSON text (integers beyond 2^53 stay exact) and merges it into `data`. */
  addDataJson(text: string): void {
    this.addData(this.parseDocument(text, 'data'));
  }

  setInput(value: unknown): void {
    this.input = value === undefined ? undefined : this.toValue(value, 'input');
  }

  setInputJson(text: string): void {
    this.input = this.parseDocument(text, 'input');
  }

  /** Registers a host function callable from policies, e.g. `query_reference_value`. */
  registerBuiltin(name: string, arity: number, fn: HostFunction): void {
    if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(name)) {
      throw new RegoEvalError('rego_type_error', `invalid builtin name: ${name}`);
    }
    if (!Number.isInteger(arity) || arity < 0 || arity > 64) {
      throw new RegoEvalError('rego_type_error', `invalid arity for ${name}: ${arity}`);
    }
    if (this.hostBuiltins.has(name))
      throw new RegoEvalError('rego_type_error', `builtin ${name} already registered`);
    const next = new Map(this.hostBuiltins);
    next.set(name, { arity, fn });
    this.hostBuiltins = next;
    this.compiled = undefined;
  }

  /** A copy sharing parsed policies and data; later changes to either engine do not affect the other. */
  clone(): Engine {
    const e = new Engine({
      regoVersion: this.regoV1 ? 'v1' : 'v0',
      strictBuiltinErrors: this.strict,
      gatherPrints: this.gatherPrints,
      limits: this.limits,
      errorStyle: this.errorStyle,
    });
    const shared: SharedState = { modules: this.modules, data: this.data, hostBuiltins: this.hostBuiltins };
    e.modules = shared.modules as Module[];
    e.data = shared.data;
    e.hostBuiltins = shared.hostBuiltins as Map<string, HostBuiltin>;
    e.mocked = this.mocked;
    e.input = this.input;
    e.compiled = this.compiled;
    return e;
  }

  /** Compiles the loaded policies now, reporting unknown functions and other load-time errors. */
  prepare(): void {
    this.styled(() => this.prepared());
  }

  /** Evaluates a rule by its full path (`data.pkg.rule`); undefined when the rule is undefined. */
  evalRule(ref: string): Value | undefined {
    return this.styled(() => {
      const c = this.prepared();
      const interp = this.interpreter(c);
      try {
        return guarded(ref, () => withMeter(interp, () => interp.evalRuleInPath(ref)));
      } finally {
        this.collectPrints(interp);
      }
    });
  }

  /** Whether `ref` (`data.pkg.rule`) names a rule of the loaded policies, i.e. evalRule will not refuse it. */
  hasRule(ref: string): boolean {
    return this.styled(() => this.prepared().rulePaths.has(ref));
  }

  /**
   * Evaluates rules by their full paths in one evaluation (rules they share are evaluated once), with
   * `input` instead of the engine's own: a Value (from fromJSON or an earlier conversion) that is used as
   * it is, without the copy setInput makes, so the caller can convert a document once and evaluate it many
   * times. Evaluation never changes it. The engine's state (its own input included) is not changed.
   */
  evalRules(
    refs: readonly string[],
    input: Value | undefined,
    onInputRead?: InputReadListener,
  ): (Value | undefined)[] {
    return this.styled(() => {
      const c = this.prepared();
      const interp = this.interpreter(c, { value: input }, onInputRead);
      try {
        return guarded(refs.join(', '), () => withMeter(interp, () => interp.evalRulesInPaths(refs)));
      } finally {
        this.collectPrints(interp);
      }
    });
  }

  /**
   * Whether a rule's value depends on nothing but the policies, data and input: no call of a builtin that
   * reads the clock or makes random values (time.now_ns, rand.intn, uuid.rfc4122), and no host builtin
   * registered except those in `tracked` (whose answers the caller accounts for itself). Then a result
   * may be reused for the same policies, data and input.
   */
  isDeterministic(tracked: ReadonlySet<string> = new Set()): boolean {
    for (const name of this.hostBuiltins.keys()) if (!tracked.has(name)) return false;
    const names = nondeterministicBuiltins();
    return this.modules.every((m) => callsNamed(m, names).length === 0);
  }

  /**
   * Whether a policy uses `with`, which evaluates an expression against a modified input or data (reads
   * of `input` under it see the modified document).
   */
  usesWith(): boolean {
    const targets = new Set<string>();
    for (const m of this.modules) callsNamed(m, new Set(), targets);
    return targets.size > 0;
  }

  /** Converts a plain JSON document (or Value) to a Value as setInput would, with the engine's depth limit. */
  inputValue(value: unknown): Value {
    return this.styled(() => this.toValue(value, 'input'));
  }

  /** Evaluates a query; results follow OPA's/regorus' shape. */
  evalQuery(query: string): QueryResults {
    return this.styled(() => {
      const c = this.prepared();
      return guarded('query', () => {
        const q = parseQuery(
          { name: '<query.rego>', text: query },
          { regoV1: this.regoV1, maxNesting: this.limits.maxNesting },
        );
        const cq = compileQuery(q, c, this.compileOptions());
        const interp = this.interpreter(cq);
        try {
          return withMeter(interp, () => this.runQuery(interp, q, query));
        } finally {
          this.collectPrints(interp);
        }
      });
    });
  }

  private runQuery(interp: Interpreter, q: ReturnType<typeof parseQuery>, query: string): QueryResults {
    interp.createRulePrefixes();
    if (query.trim() === 'data') interp.evalModules();
    this.queryModule ??= parseModule(QUERY_MODULE_FILE, { regoV1: this.regoV1, maxNesting: 8 });
    const results = interp.evalUserQuery(q, this.queryModule);
    return {
      result: results.map((r) => {
        const bindings: Record<string, Value> = {};
        for (const [k, v] of r.bindings.sortedEntries()) bindings[k as string] = v;
        return { expressions: r.expressions, bindings };
      }),
    };
  }

  /** Runs `f`; in OPA's error style, engine errors it throws get OPA's text. */
  private styled<T>(f: () => T): T {
    if (this.errorStyle !== 'opa') return f();
    try {
      return f();
    } catch (e) {
      if ((e instanceof RegoEvalError || e instanceof RegoParseError) && !restyled.has(e)) {
        e.message = opaErrorText(e);
        restyled.add(e);
      }
      throw e;
    }
  }

  /** Returns and clears the gathered `print` lines. */
  takePrints(): string[] {
    const p = this.prints;
    this.prints = [];
    return p;
  }

  private collectPrints(interp: Interpreter): void {
    if (this.gatherPrints && interp.prints.length > 0) {
      for (const p of interp.prints) this.prints.push(p);
    }
  }

  private interpreter(
    c: CompiledPolicy,
    input: { value: Value | undefined } = { value: this.input },
    onInputRead?: InputReadListener,
  ): Interpreter {
    return new Interpreter(c, this.data, input.value, {
      ...(onInputRead !== undefined && { onInputRead }),
      strictBuiltinErrors: this.strict,
      gatherPrints: this.gatherPrints,
      limits: this.limits,
      builtins: allBuiltins(),
      hostBuiltins: this.hostBuiltins,
      nowNs: BigInt(Date.now()) * 1_000_000n,
      errorStyle: this.errorStyle,
      unsupported: UNSUPPORTED,
    });
  }

  private compileOptions() {
    const arities = new Map<string, number>(builtinArities());
    for (const [k, v] of this.hostBuiltins) arities.set(k, v.arity);
    return {
      builtins: arities as BuiltinArities,
      extraCallables: new Set(this.hostBuiltins.keys()),
      deprecated: DEPRECATED,
      unsupported: UNSUPPORTED,
      mocked: this.mocked,
      queryV1: this.regoV1,
    };
  }

  private prepared(): CompiledPolicy {
    this.compiled ??= guarded('prepare', () => compile(this.modules, this.compileOptions()));
    return this.compiled;
  }

  private parseDocument(text: string, what: string): Value {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text, (_key, value, context?: { source?: string }) => {
        if (typeof value === 'number' && !Number.isSafeInteger(value) && context?.source !== undefined) {
          if (/^-?\d+$/.test(context.source)) return BigInt(context.source);
        }
        return value;
      });
    } catch (e) {
      if (e instanceof RangeError)
        throw new RegoLimitError('nesting_depth', `${what} document is nested too deeply`);
      throw new RegoParseError(`<${what}>`, 1, 1, `invalid JSON: ${(e as Error).message}`);
    }
    return this.toValue(parsed, what);
  }

  private toValue(j: unknown, what: string): Value {
    return convert(j, 0, this.limits.maxDocumentDepth, what);
  }
}

const restyled = new WeakSet<Error>();

/** Runs `f`, turning a JavaScript stack overflow into a limit error (the last line of defence). */
function guarded<T>(what: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof RangeError && /call stack/i.test(e.message)) {
      throw new RegoLimitError('nesting_depth', `${what}: nesting exceeds the capacity of the evaluator`);
    }
    throw e;
  }
}

function pathOf(c: CallExpr): string {
  return pathString(c.fcn) ?? '';
}

let mergedBuiltins: ReadonlyMap<string, BuiltinDef> | undefined;
function allBuiltins(): ReadonlyMap<string, BuiltinDef> {
  if (!mergedBuiltins) {
    const m = new Map<string, BuiltinDef>(BUILTINS);
    for (const [k, v] of ENGINE_BUILTINS) if (!m.has(k)) m.set(k, v);
    mergedBuiltins = m;
  }
  return mergedBuiltins;
}

let nondeterministic: ReadonlySet<string> | undefined;
function nondeterministicBuiltins(): ReadonlySet<string> {
  if (!nondeterministic) {
    const names = new Set<string>();
    for (const [k, v] of allBuiltins()) if (v.nondeterministic) names.add(k);
    nondeterministic = names;
  }
  return nondeterministic;
}

let arities: Map<string, number> | undefined;
function builtinArities(): ReadonlyMap<string, number> {
  if (!arities) {
    arities = new Map();
    for (const [k, v] of allBuiltins()) arities.set(k, v.arity);
    arities.set('walk', 1);
    arities.set('print', -1);
  }
  return arities;
}

/** JSON (or Value) to Value with a depth bound; bigint stays exact, objects become ObjectValue. */
function convert(j: unknown, depth: number, max: number, what: string): Value {
  if (depth > max)
    throw new RegoLimitError('nesting_depth', `${what} document exceeds the nesting limit of ${max}`);
  if (j === null || typeof j === 'boolean' || typeof j === 'string') return j;
  if (typeof j === 'number') {
    if (!Number.isFinite(j)) throw new RegoEvalError('rego_type_error', `${what}: not a JSON number: ${j}`);
    return Object.is(j, -0) ? 0 : j;
  }
  if (typeof j === 'bigint') {
    return j >= -9007199254740991n && j <= 9007199254740991n ? Number(j) : j;
  }
  if (Array.isArray(j)) return j.map((x) => convert(x, depth + 1, max, what));
  if (j instanceof SetValue) {
    const s = new SetValue();
    for (const x of j.values()) s.add(convert(x, depth + 1, max, what));
    return s;
  }
  if (j instanceof ObjectValue) {
    const o = new ObjectValue();
    for (const [k, v] of j.entries.values()) o.set(k, convert(v, depth + 1, max, what));
    return o;
  }
  if (typeof j === 'object') {
    const o = new ObjectValue();
    for (const [k, v] of Object.entries(j as Record<string, unknown>))
      o.set(k, convert(v, depth + 1, max, what));
    return o;
  }
  throw new RegoEvalError('rego_type_error', `${what}: cannot convert ${typeof j} to a Rego value`);
}

/** Deep merge of data documents: objects recurse, sets union, equal values are kept, others conflict. */
function deepMerge(a: Value, b: Value, depth: number, max: number): Value {
  if (depth > max)
    throw new RegoLimitError('nesting_depth', `data merge exceeds the nesting limit of ${max}`);
  if (equals(a, b)) return a;
  if (a instanceof SetValue && b instanceof SetValue) {
    const s = a.clone();
    for (const x of b.values()) s.add(x);
    return s;
  }
  if (a instanceof ObjectValue && b instanceof ObjectValue) {
    const o = a.clone();
    for (const [k, v] of b.entries.values()) {
      const prev = o.get(k);
      if (prev === undefined) o.set(k, v);
      else if (
        (prev instanceof ObjectValue && v instanceof ObjectValue) ||
        (prev instanceof SetValue && v instanceof SetValue)
      ) {
        o.set(k, deepMerge(prev, v, depth + 1, max));
      } else if (!equals(prev, v)) {
        throw new RegoEvalError(
          'eval_conflict_error',
          `value for key \`${typeof k === 'string' ? JSON.stringify(k) : String(k)}\` generated multiple times`,
        );
      }
    }
    return o;
  }
  throw new RegoEvalError('eval_conflict_error', 'error: could not merge value');
}
