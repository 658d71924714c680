// The evaluator. It follows regorus' execution model so that results, errors and the order of `print`
// output match it: statements run in scheduled order with loops hoisted out of them, rules are evaluated
// whole (all bodies, all solutions, stopping early only for constant outputs) and memoized in a per-query
// data tree, and functions run every definition on each call.
import {
  type CallExpr,
  type Expr,
  type Literal,
  type Loc,
  locText,
  type Module,
  type Query,
  type Rule,
  type RuleBody,
  type RuleHead,
  type Stmt,
} from './ast.js';
import type { BuiltinContext, BuiltinDef } from './builtins/api.js';
import { BuiltinError } from './builtins/api.js';
import {
  type CallTarget,
  type CompiledPolicy,
  type DefaultEntry,
  type FunctionEntry,
  pathString,
  ruleRefr,
} from './compiler.js';
import { type ErrorStyle, RegoEvalError, RegoLimitError } from './errors.js';
import { jsonText, printable } from './format.js';
import type { AssignmentPlan, DestructuringPlan, HoistedLoop } from './plans.js';
import { getOrCreate } from './util.js';
import {
  type AllocationMeter,
  equals,
  keyOf,
  ObjectValue,
  prefixKeys,
  SetValue,
  type Value,
} from './value.js';

export type HostFunction = (args: readonly Value[]) => Value | undefined;

export interface HostBuiltin {
  readonly arity: number;
  readonly fn: HostFunction;
}

export interface EvalLimits {
  /** Evaluation steps per query (expressions and statements evaluated). */
  readonly maxSteps: number;
  /** Nesting of rule, function and comprehension evaluation. */
  readonly maxCallDepth: number;
  /** Elements of any array, set or object built during evaluation. */
  readonly maxCollectionSize: number;
  /** Bytes of strings, arrays, sets and objects built during one evaluation (an estimate, see charge). */
  readonly maxMemoryBytes: number;
  readonly maxRegexLength: number;
}

export interface EvalOptions {
  readonly strictBuiltinErrors: boolean;
  readonly gatherPrints: boolean;
  readonly limits: EvalLimits;
  readonly builtins: ReadonlyMap<string, BuiltinDef>;
  readonly hostBuiltins: ReadonlyMap<string, HostBuiltin>;
  readonly nowNs: bigint;
  /** Wording of conflict errors: regorus' (default) or OPA's. */
  readonly errorStyle?: ErrorStyle;
  /** Builtins the engine does not implement; they can be called only when a `with` modifier replaces them. */
  readonly unsupported?: ReadonlySet<string>;
  /** Told of every read of `input`: the path read and the value found there (undefined when absent). */
  readonly onInputRead?: InputReadListener;
}

/** See EvalOptions.onInputRead. `path` is only valid during the call. */
export type InputReadListener = (path: readonly string[], value: Value | undefined) => void;

export interface Expression {
  readonly value: Value;
  readonly text: string;
  readonly location: { readonly row: number; readonly col: number };
}

export interface QueryResult {
  readonly expressions: Expression[];
  readonly bindings: ObjectValue;
}

interface PartialResult {
  expressions: Expression[];
}

type Scope = Map<string, Value | undefined>;

interface Ctx {
  keyExpr: Expr | undefined;
  outputExpr: Expr | undefined;
  /** Accumulator: JS array for array comprehensions, SetValue, ObjectValue. */
  value: Value[] | SetValue | ObjectValue | undefined;
  result: PartialResult | undefined;
  results: QueryResult[];
  isCompr: boolean;
  ruleRef: Expr | undefined;
  /** Rule outputs keyed by their path (an array value). Undefined after an undefined output. */
  ruleValue: ObjectValue | undefined;
  isSet: boolean;
  isOldStyleSet: boolean;
  constDetermined: boolean;
  earlyReturn: boolean;
  isRule: boolean;
}

function newCtx(init: Partial<Ctx>): Ctx {
  return {
    keyExpr: init.keyExpr,
    outputExpr: init.outputExpr,
    value: init.value,
    result: init.result,
    results: [],
    isCompr: init.isCompr ?? false,
    ruleRef: init.ruleRef,
    ruleValue: new ObjectValue(),
    isSet: init.isSet ?? false,
    isOldStyleSet: init.isOldStyleSet ?? false,
    constDetermined: false,
    earlyReturn: false,
    isRule: init.isRule ?? false,
  };
}

type FunctionModifier = { readonly fn: string } | { readonly value: Value };

/** Marks prefixes of `data` whose rules have all been evaluated. */
class ProcessedTree {
  done = false;
  readonly children = new Map<string, ProcessedTree>();

  isProcessed(path: readonly string[]): boolean {
    let n: ProcessedTree | undefined = this;
    for (const p of path) {
      if (n.done) return true;
      n = n.children.get(p);
      if (!n) return false;
    }
    return n.done;
  }

  mark(path: readonly string[]): void {
    let n: ProcessedTree = this;
    for (const p of path) {
      const c = getOrCreate(n.children, p, () => new ProcessedTree());
      n = c;
    }
    n.done = true;
  }
}

const OPERATOR_BUILTIN: Record<string, string> = {
  '+': 'plus',
  '-': 'minus',
  '*': 'mul',
  '/': 'div',
  '%': 'rem',
  '==': 'equal',
  '!=': 'neq',
  '<': 'lt',
  '<=': 'lte',
  '>': 'gt',
  '>=': 'gte',
  '&': 'and',
  '|': 'or',
};

/** Index into a collection; undefined when the key is absent or the value is not a collection. */
export function indexValue(obj: Value | undefined, key: Value): Value | undefined {
  if (obj === undefined || obj === null || typeof obj !== 'object') return undefined;
  if (Array.isArray(obj)) {
    if (typeof key === 'number') {
      return Number.isInteger(key) && key >= 0 ? obj[key] : undefined;
    }
    return undefined;
  }
  if (obj instanceof ObjectValue) return obj.get(key);
  if (obj instanceof SetValue) return obj.has(key) ? key : undefined;
  return undefined;
}

/** The value at `path` under `v` as a policy's `v.a.b` reads it (what InputReadListener reports). */
export function valueAtPath(v: Value | undefined, path: readonly string[]): Value | undefined {
  return chained(v, path);
}

function chained(v: Value | undefined, path: readonly string[]): Value | undefined {
  let cur = v;
  for (let i = 0; i < path.length && cur !== undefined; i++) {
    const k = path[i]!;
    cur = cur instanceof ObjectValue ? cur.getStr(k) : cur instanceof SetValue && cur.has(k) ? k : undefined;
  }
  return cur;
}

function _isCollection(v: Value | undefined): v is readonly Value[] | SetValue | ObjectValue {
  return v !== null && typeof v === 'object';
}

function valueToString(v: Value): string {
  return typeof v === 'string' ? v : jsonText(v);
}

/** `data.a.b` → `['a', 'b']`, kept per path: rule paths are few and looked up on every rule access. */
const dataPathCache = new Map<string, readonly string[]>();
const DATA_PATH_CACHE_MAX = 4096;
function dataPathParts(path: string): readonly string[] {
  let parts = dataPathCache.get(path);
  if (parts === undefined) {
    parts = path.split('.').slice(1);
    if (dataPathCache.size >= DATA_PATH_CACHE_MAX) dataPathCache.clear();
    dataPathCache.set(path, parts);
  }
  return parts;
}

export class Interpreter implements AllocationMeter {
  prints: string[] = [];
  private data: ObjectValue;
  private input: Value | undefined;
  private readonly initData: ObjectValue;
  /** Containers created during this evaluation, safe to mutate in place. */
  private owned = new WeakSet<object>();
  private processed = new Set<Rule>();
  private processedPaths = new ProcessedTree();
  private ruleValues = new Map<string, { value: Value; loc: Loc }>();
  private readonly activeRules: Rule[] = [];
  private readonly activeFunctions: string[] = [];
  private scopes: Scope[] = [];
  private readonly contexts: Ctx[] = [];
  private readonly loopVars = new Map<Expr, Value>();
  private withFunctions = new Map<string, FunctionModifier>();
  private withDocument: { data: ObjectValue; input: Value | undefined } | undefined;
  private module: Module | undefined;
  private modulePath = '';
  private steps = 0;
  private depth = 0;
  /** Bytes charged so far against limits.maxMemoryBytes. */
  private allocated = 0;
  /** Arrays, sets and objects a builtin returned that were charged already. */
  private readonly measured = new WeakSet<object>();
  private readonly builtinCtx: BuiltinContext;
  private readonly builtinCache = new Map<string, Value | undefined>();

  constructor(
    private readonly c: CompiledPolicy,
    initData: ObjectValue,
    input: Value | undefined,
    private readonly opts: EvalOptions,
  ) {
    this.initData = initData;
    this.data = initData.clone();
    this.owned.add(this.data);
    this.input = input;
    this.builtinCtx = { nowNs: opts.nowNs, maxRegexLength: opts.limits.maxRegexLength, cache: new Map() };
  }

  // ---- errors and limits ----

  private tick(): void {
    if (++this.steps > this.opts.limits.maxSteps) {
      throw new RegoLimitError(
        'steps',
        `evaluation exceeded the limit of ${this.opts.limits.maxSteps} steps`,
      );
    }
  }

  private enterCall(loc: Loc): void {
    if (++this.depth > this.opts.limits.maxCallDepth) {
      this.depth--;
      throw new RegoLimitError(
        'call_depth',
        `${loc.file.name}:${loc.line}:${loc.col}: evaluation nesting exceeds the limit of ${this.opts.limits.maxCallDepth}`,
      );
    }
  }

  private leaveCall(): void {
    this.depth--;
  }

  /**
   * Charges `bytes` against the memory budget. Sets and objects charge their entries as they are built
   * (see withMeter in value.ts); arrays are charged here as they are built, and what a builtin returns is
   * charged by chargeResult. The sum counts what was built, garbage included, so it bounds the peak.
   */
  charge(bytes: number): void {
    this.allocated += bytes;
    if (this.allocated > this.opts.limits.maxMemoryBytes) {
      throw new RegoLimitError(
        'memory',
        `evaluation exceeded the memory limit of ${this.opts.limits.maxMemoryBytes} bytes`,
      );
    }
  }

  /** Bytes charged so far in this evaluation. */
  get allocatedBytes(): number {
    return this.allocated;
  }

  /**
   * Charges a builtin's result: new strings by their characters, arrays by their slots, and what sets and
   * objects hold; an argument returned unchanged (or a part already charged) costs nothing.
   */
  private chargeResult(v: Value | undefined, args: readonly (Value | undefined)[]): void {
    if (v === undefined || v === null || (typeof v !== 'string' && typeof v !== 'object')) return;
    for (const a of args) if (a === v) return;
    this.charge(this.sizeOf(v));
  }

  /** Bytes of `v` not charged yet; iterative, so that no nesting depth hides a part. */
  private sizeOf(root: Value): number {
    let n = 0;
    const stack: Value[] = [root];
    while (stack.length > 0) {
      const v = stack.pop() as Value;
      if (typeof v === 'string') {
        n += STRING_BYTES + 2 * v.length;
        continue;
      }
      if (v === null || typeof v !== 'object' || this.measured.has(v)) continue;
      this.measured.add(v);
      if (Array.isArray(v)) {
        n += ARRAY_BYTES + SLOT_BYTES * v.length;
        for (const x of v) stack.push(x);
      } else if (v instanceof SetValue) {
        for (const x of v.values()) stack.push(x);
      } else {
        for (const [k, x] of (v as ObjectValue).entries.values()) stack.push(k, x);
      }
    }
    return n;
  }

  private checkSize(n: number): void {
    if (n > this.opts.limits.maxCollectionSize) {
      throw new RegoLimitError(
        'collection_size',
        `collection exceeds the limit of ${this.opts.limits.maxCollectionSize} elements`,
      );
    }
  }

  /**
   * A conflict error: `regorus` is regorus' message; in OPA's style the message names the rule or function
   * (`rule data.x.p produced conflicting values`), or is `object keys must be unique`.
   */
  private conflict(
    loc: Loc | undefined,
    kind: 'rule' | 'function' | 'key',
    path: string | undefined,
    regorus: string,
  ): RegoEvalError {
    if (this.opts.errorStyle !== 'opa') return this.err('eval_conflict_error', loc, regorus);
    const name = path ?? this.rulePath ?? 'data';
    const msg =
      kind === 'key'
        ? 'object keys must be unique'
        : kind === 'function'
          ? `function ${name} produced conflicting values for the same inputs`
          : `rule ${name} produced conflicting values`;
    return this.err('eval_conflict_error', loc, msg);
  }

  /** The rule being evaluated, as `data.pkg.rule`, for OPA's conflict messages. */
  private rulePath: string | undefined;

  private err(code: RegoEvalError['code'], loc: Loc | undefined, msg: string): RegoEvalError {
    return loc
      ? new RegoEvalError(code, msg, loc.file.name, loc.line, loc.col)
      : new RegoEvalError(code, msg);
  }

  // ---- scopes ----

  private currentScope(): Scope {
    return this.scopes[this.scopes.length - 1]!;
  }

  private addVar(name: string, v: Value | undefined): void {
    if (name !== '_') this.currentScope().set(name, v);
  }

  /** The value of a local variable (possibly undefined), or NOT_FOUND when no scope declares it. */
  private lookupLocal(name: string): Value | undefined | typeof NOT_FOUND {
    const scopes = this.scopes;
    for (let i = scopes.length - 1; i >= 0; i--) {
      const s = scopes[i]!;
      const v = s.get(name);
      if (v !== undefined || s.has(name)) return v;
    }
    return NOT_FOUND;
  }

  private ctx(): Ctx {
    const c = this.contexts[this.contexts.length - 1];
    if (!c) throw this.err('eval_internal_error', undefined, 'no active context');
    return c;
  }

  // ---- data tree (copy on write) ----

  /** The container at `path` under the data root, made mutable; missing steps become objects. */
  private mutableObjectAt(path: readonly Value[], loc: Loc | undefined): ObjectValue {
    let cur = this.data;
    for (const p of path) {
      const next = cur.get(p);
      let obj: ObjectValue;
      if (next === undefined) {
        obj = new ObjectValue();
        this.owned.add(obj);
        cur.set(p, obj);
      } else if (next instanceof ObjectValue) {
        if (this.owned.has(next)) obj = next;
        else {
          obj = next.clone();
          this.owned.add(obj);
          cur.set(p, obj);
        }
      } else {
        throw this.err('eval_conflict_error', loc, 'previous value is not an object');
      }
      cur = obj;
    }
    return cur;
  }

  private initDataAt(path: readonly Value[]): Value | undefined {
    let cur: Value | undefined = this.initData;
    for (const p of path) {
      cur = cur instanceof ObjectValue ? cur.get(p) : undefined;
      if (cur === undefined) return undefined;
    }
    return cur;
  }

  /** Merges a rule value into data. Data from the base document takes precedence over rules. */
  private updateRuleValue(
    loc: Loc,
    path: readonly (Value | undefined)[],
    value: Value | undefined,
    isSet: boolean,
  ) {
    const defined: Value[] = [];
    for (const p of path) {
      if (p === undefined) break;
      defined.push(p);
    }
    if (defined.length === 0) return;
    if (defined.length === path.length && this.initDataAt(defined) !== undefined) return;
    if (defined.length < path.length) {
      // Stop at the first undefined component, creating the defined prefix.
      this.mutableObjectAt(defined.slice(0, -1), loc);
      const parent = this.mutableObjectAt(defined.slice(0, -1), loc);
      const last = defined[defined.length - 1]!;
      if (!parent.has(last)) {
        const o = new ObjectValue();
        this.owned.add(o);
        parent.set(last, o);
      }
      return;
    }
    const parent = this.mutableObjectAt(defined.slice(0, -1), loc);
    const last = defined[defined.length - 1]!;
    if (isSet) {
      let s = parent.get(last);
      if (s === undefined) {
        s = new SetValue();
        this.owned.add(s);
        parent.set(last, s);
      } else if (!(s instanceof SetValue)) {
        throw this.err('eval_conflict_error', loc, 'previous value is not a set');
      } else if (!this.owned.has(s)) {
        s = s.clone();
        this.owned.add(s);
        parent.set(last, s);
      }
      if (value instanceof SetValue) for (const x of value.values()) (s as SetValue).add(x);
      this.checkSize((s as SetValue).size);
      return;
    }
    if (value === undefined) {
      if (!parent.has(last)) {
        const o = new ObjectValue();
        this.owned.add(o);
        parent.set(last, o);
      }
      return;
    }
    const existing = parent.get(last);
    if (existing === undefined) parent.set(last, value);
    else if (!equals(existing, value)) {
      throw this.conflict(
        loc,
        'rule',
        refText(defined),
        'complete rules should not produce multiple outputs',
      );
    }
  }

  /** Shallow merge of a new rule value into the value at `path` (regorus' rule-value merge). */
  private mergeAt(loc: Loc, path: readonly string[], value: Value, strict: boolean): void {
    const parent = this.mutableObjectAt(path.slice(0, -1), loc);
    const last = path[path.length - 1];
    if (last === undefined) {
      if (!(value instanceof ObjectValue))
        throw this.err('eval_conflict_error', loc, 'could not merge value');
      for (const [k, v] of value.entries.values()) this.data.set(k, v);
      return;
    }
    const existing = parent.get(last);
    if (existing === undefined) {
      parent.set(last, value);
      return;
    }
    if (equals(existing, value)) return;
    if (strict) throw this.conflict(loc, 'rule', refText(path), 'rules should not produce multiple outputs.');
    parent.set(last, this.mergeValues(loc, existing, value, path));
  }

  private mergeValues(loc: Loc, existing: Value, value: Value, path: readonly string[]): Value {
    if (existing instanceof SetValue && value instanceof SetValue) {
      const s = existing.clone();
      this.owned.add(s);
      for (const x of value.values()) s.add(x);
      return s;
    }
    if (existing instanceof ObjectValue && value instanceof ObjectValue) {
      const o = this.owned.has(existing) ? existing : existing.clone();
      this.owned.add(o);
      for (const [k, v] of value.entries.values()) {
        const pv = o.get(k);
        if (pv !== undefined && !equals(pv, v)) {
          throw this.conflict(
            loc,
            'key',
            undefined,
            `rules should not produce multiple outputs. value for key \`${jsonText(k)}\` generated multiple times: \`${jsonText(pv)}\` and \`${jsonText(v)}\``,
          );
        }
        o.set(k, v);
      }
      return o;
    }
    throw this.conflict(loc, 'rule', refText(path), 'rules should not produce multiple outputs.');
  }

  private ensurePackageObject(path: readonly string[]): void {
    const parent = this.mutableObjectAt(path.slice(0, -1), undefined);
    const last = path[path.length - 1];
    if (last !== undefined && parent.get(last) === undefined) {
      const o = new ObjectValue();
      this.owned.add(o);
      parent.set(last, o);
    }
  }

  // ---- module context ----

  private setModule(m: Module | undefined): Module | undefined {
    const prev = this.module;
    if (m) this.modulePath = this.c.modulePath.get(m) ?? `data.${m.pkg.join('.')}`;
    this.module = m;
    return prev;
  }

  // ---- public entry points ----

  evalRuleInPath(path: string): Value | undefined {
    if (!this.c.rulePaths.has(path)) {
      throw this.err('eval_internal_error', undefined, `not a valid rule path: ${path}`);
    }
    this.scopes = [new Map()];
    this.ensureRuleEvaluated(path);
    const parts = path.split('.').slice(1);
    return chained(this.data, parts);
  }

  /**
   * Evaluates several rules in one evaluation, so rules they depend on in common are evaluated once.
   * Each rule gets the step budget a separate evaluation would have had.
   */
  evalRulesInPaths(paths: readonly string[]): (Value | undefined)[] {
    return paths.map((p) => {
      this.steps = 0;
      return this.evalRuleInPath(p);
    });
  }

  /** Evaluates every rule of every module (used for `data` queries). */
  evalModules(): ObjectValue {
    for (const m of this.c.modules) if (m.rules.length === 0) this.ensurePackageObject(m.pkg);
    for (const m of this.c.modules) for (const r of m.rules) this.evalRule(m, r);
    for (const m of this.c.modules) {
      const prev = this.setModule(m);
      for (const r of m.rules) this.evalDefaultRule(r);
      this.setModule(prev);
    }
    for (const m of this.c.modules) this.ensurePackageObject(m.pkg);
    this.createRulePrefixes();
    return this.data;
  }

  /** Objects for the prefixes of ref-head rules, so that `data.pkg.a` exists for a rule `a.b.c`. */
  createRulePrefixes(): void {
    for (const m of this.c.modules) {
      for (const r of m.rules) {
        const refr = ruleRefr(r);
        let comps = simpleComponents(refr);
        const isOldSet = r.k === 'spec' && r.head.k === 'set' && r.head.key === undefined;
        if (comps.length >= 2 && isOldSet) comps = comps.slice(0, -1);
        if (comps.length <= 1) continue;
        const prefix = [...m.pkg, ...comps.slice(0, -1)];
        if (chained(this.data, prefix) === undefined && this.initDataAt(prefix) === undefined) {
          this.mergeAt(refr.loc, prefix, new ObjectValue(), false);
        }
      }
    }
  }

  evalUserQuery(query: Query, queryModule: Module): QueryResult[] {
    this.contexts.push(newCtx({ value: new SetValue(), result: { expressions: [] } }));
    const prev = this.setModule(queryModule);
    this.scopes = [new Map()];
    try {
      this.evalQuery(query);
    } finally {
      this.setModule(prev);
    }
    const ctx = this.contexts.pop()!;
    let results = ctx.results;
    const last = results[results.length - 1];
    if (
      last &&
      last.bindings.size === 0 &&
      last.expressions.length > 1 &&
      last.expressions.some((e) => e.value === false)
    ) {
      results = [];
    }
    return results;
  }

  // ---- queries and statements ----

  private evalQuery(q: Query): boolean {
    this.tick();
    this.scopes.push(new Map());
    try {
      const stmts = this.c.schedules.get(q) ?? q.stmts;
      return this.evalStmts(stmts, 0);
    } finally {
      this.scopes.pop();
    }
  }

  private evalStmts(stmts: readonly Stmt[], from: number): boolean {
    let ok = true;
    for (let i = from; i < stmts.length; i++) {
      const stmt = stmts[i]!;
      const loops = this.c.stmtLoops.get(stmt);
      if (loops !== undefined && loops.length > 0) {
        if (stmt.lit.k !== 'not') return this.evalStmtsInLoop(stmts, i, loops, 0);
        ok = this.evalNotWithLoops(stmt, loops);
        if (!ok) break;
        continue;
      }
      ok = this.evalStmt(stmt, stmts, i + 1);
      if (stmt.lit.k === 'somein') return ok;
      if (!ok) break;
    }
    if (ok) return this.evalOutputExpr();
    const ctx = this.ctx();
    if (ctx.result) this.gatherResult(ctx, ctx.result);
    return false;
  }

  private gatherResult(ctx: Ctx, partial: PartialResult): void {
    const exprs = partial.expressions;
    if (
      exprs.length === 1 ||
      (exprs.length > 0 && exprs.every((e) => e.value !== undefined && e.value !== false))
    ) {
      ctx.results.push({ expressions: [...exprs], bindings: this.bindings() });
    }
  }

  /** Variables visible to the user query (its own scopes). */
  private bindings(): ObjectValue {
    const out = new ObjectValue();
    for (let i = 1; i < this.scopes.length; i++) {
      for (const [k, v] of this.scopes[i]!) {
        if (v !== undefined) out.set(k, v);
        else out.delete(k);
      }
    }
    return out;
  }

  private evalStmtsInLoop(
    stmts: readonly Stmt[],
    i: number,
    loops: readonly HoistedLoop[],
    li: number,
  ): boolean {
    this.tick();
    const stmt = stmts[i]!;
    if (li === loops.length) {
      if (this.evalStmt(stmt, stmts, i + 1)) {
        return stmt.lit.k === 'somein' ? true : this.evalStmts(stmts, i + 1);
      }
      return false;
    }
    const ctx = this.ctx();
    return this.iterateLoop(
      stmt,
      loops[li]!,
      () => this.evalStmtsInLoop(stmts, i, loops, li + 1),
      () => ctx.earlyReturn,
    );
  }

  /**
   * Runs `body` once per binding of a hoisted loop: each element of the collection, with the index bound
   * by the loop's plan (or once, when the index variable is already bound). Returns whether any run
   * succeeded; `stop` ends the iteration early.
   */
  private iterateLoop(
    stmt: Stmt,
    loop: HoistedLoop,
    body: () => boolean,
    stop: (ok: boolean) => boolean,
  ): boolean {
    const saved = this.applyWith(stmt);
    let coll: Value | undefined;
    try {
      if (loop.walk) {
        const call = loop.collection as CallExpr;
        const extra = this.c.extraArgs.get(call);
        coll = this.evalCallImpl(call, extra ? call.params.slice(0, -1) : call.params);
      } else {
        coll = this.evalExpr(loop.collection);
      }
    } finally {
      this.restoreWith(saved);
    }

    let plan: DestructuringPlan = IGNORE;
    if (loop.walk) {
      const call = loop.collection as CallExpr;
      const last = call.params[call.params.length - 1];
      const bp = last ? this.c.plans.get(last) : undefined;
      if (bp && bp.t === 'param') plan = bp.plan;
      if (coll !== undefined && !Array.isArray(coll)) {
        throw this.err(
          'eval_type_error',
          loop.loopExpr.loc,
          `walk expected array result, got \`${jsonText(coll)}\``,
        );
      }
    } else {
      const key = loop.key;
      if (key !== undefined && key.k === 'var') {
        const idx = this.lookupLocal(key.name);
        if (idx !== NOT_FOUND && idx !== undefined) {
          // The index is bound already: look the element up instead of iterating.
          return indexValue(coll, idx) !== undefined ? body() : false;
        }
      }
      const bp = key ? this.c.plans.get(key) : undefined;
      if (bp && bp.t === 'loopIndex') plan = bp.plan;
    }

    this.scopes.push(new Map());
    let result = false;
    const partial = this.ctx().result;
    const snapshot = partial ? partial.expressions.length : 0;
    const target = loop.loopExpr;
    const each = (index: Value, v: Value): boolean => {
      this.loopVars.set(target, v);
      // A walk loop binds the [path, value] pair; index loops bind the key.
      if (this.destructure(plan, loop.walk ? v : index) === true) {
        const ok = body();
        result = ok || result;
      }
      clearScope(this.currentScope());
      if (partial) partial.expressions.length = snapshot;
      return stop(result);
    };
    try {
      if (Array.isArray(coll)) {
        for (let idx = 0; idx < coll.length; idx++) if (each(idx, coll[idx]!)) break;
      } else if (coll instanceof SetValue) {
        for (const v of coll.sorted()) if (each(v, v)) break;
      } else if (coll instanceof ObjectValue) {
        for (const [k, v] of coll.sortedEntries()) if (each(k, v)) break;
      }
    } finally {
      this.loopVars.delete(target);
      this.scopes.pop();
    }
    return result;
  }

  /**
   * `not expr` whose expression iterates (`not a[_] == 1`): as in OPA, the negation holds when no
   * iteration satisfies the expression, and the iteration's variables stay local to it.
   */
  private evalNotWithLoops(stmt: Stmt, loops: readonly HoistedLoop[]): boolean {
    const lit = stmt.lit as Literal & { k: 'not' };
    const holds = (li: number): boolean => {
      if (li < loops.length)
        return this.iterateLoop(
          stmt,
          loops[li]!,
          () => holds(li + 1),
          (ok) => ok,
        );
      const saved = this.applyWith(stmt);
      try {
        if (saved.skip) return false;
        const e = lit.expr;
        const v = e.k === 'call' ? this.evalCall(e, this.c.extraArgs.get(e), false) : this.evalExpr(e);
        return v !== undefined && v !== false;
      } finally {
        this.restoreWith(saved);
      }
    };
    this.scopes.push(new Map());
    let found: boolean;
    try {
      found = holds(0);
    } finally {
      this.scopes.pop();
    }
    this.pushExpression(lit.loc, true);
    return !found;
  }

  private evalStmt(stmt: Stmt, stmts: readonly Stmt[], next: number): boolean {
    if (stmt.withs.length === 0) return this.evalLiteral(stmt.lit, stmts, next);
    const saved = this.applyWith(stmt);
    try {
      return saved.skip ? false : this.evalLiteral(stmt.lit, stmts, next);
    } finally {
      this.restoreWith(saved);
    }
  }

  private pushExpression(loc: Loc, v: Value): void {
    const r = this.contexts[this.contexts.length - 1]?.result;
    if (r) r.expressions.push({ value: v, text: locText(loc), location: { row: loc.line, col: loc.col } });
  }

  private evalLiteral(lit: Literal, stmts: readonly Stmt[], next: number): boolean {
    this.tick();
    switch (lit.k) {
      case 'expr': {
        const e = lit.expr;
        const v = e.k === 'call' ? this.evalCall(e, this.c.extraArgs.get(e), true) : this.evalExpr(e);
        const r = this.contexts[this.contexts.length - 1]?.result;
        if (r) {
          if (v !== undefined) {
            r.expressions.push({
              value: v,
              text: locText(lit.loc),
              location: { row: lit.loc.line, col: lit.loc.col },
            });
          } else {
            r.expressions.length = 0;
          }
        }
        return typeof v === 'boolean' ? v : v !== undefined;
      }
      case 'not': {
        const e = lit.expr;
        const v = e.k === 'call' ? this.evalCall(e, this.c.extraArgs.get(e), false) : this.evalExpr(e);
        this.pushExpression(lit.loc, true);
        return v === false || v === undefined;
      }
      case 'somevars': {
        for (const v of lit.vars) {
          if (this.currentScope().has(v.name)) {
            throw this.err('rego_compile_error', v.loc, `duplicated definition of local variable ${v.name}`);
          }
          if (this.lookupLocal(v.name) === NOT_FOUND) this.addVar(v.name, undefined);
        }
        this.pushExpression(lit.loc, true);
        return true;
      }
      case 'somein':
        this.pushExpression(lit.loc, true);
        return this.evalSomeIn(lit, stmts, next);
      case 'every':
        this.pushExpression(lit.loc, true);
        return this.evalEvery(lit);
    }
  }

  private evalSomeIn(lit: Literal & { k: 'somein' }, stmts: readonly Stmt[], next: number): boolean {
    const scope = this.currentScope();
    const saved = new Map(scope);
    const restore = (): void => {
      scope.clear();
      for (const [k, v] of saved) scope.set(k, v);
    };
    const bp = this.c.plans.get(lit.collection);
    if (bp?.t !== 'somein')
      throw this.err('eval_internal_error', lit.loc, 'missing binding plan for some..in');
    const coll = this.evalExpr(lit.collection);
    let count = 0;
    // Query results record the expressions of each solution separately.
    const partial = this.ctx().result;
    const snapshot = partial ? partial.expressions.length : 0;
    const iterate = (k: Value, v: Value): boolean => {
      restore();
      if (partial) partial.expressions.length = snapshot;
      let ok = bp.keyPlan ? this.destructure(bp.keyPlan, k) === true : true;
      ok = ok && this.destructure(bp.valuePlan, v) === true;
      if (!ok) {
        restore();
        return false;
      }
      let brk = false;
      if (this.evalStmts(stmts, next)) {
        count++;
        if (this.ctx().earlyReturn) brk = true;
      }
      restore();
      return brk;
    };
    if (Array.isArray(coll)) {
      for (let i = 0; i < coll.length; i++) if (iterate(i, coll[i]!)) break;
    } else if (coll instanceof SetValue) {
      for (const v of coll.sorted()) if (iterate(v, v)) break;
    } else if (coll instanceof ObjectValue) {
      for (const [k, v] of coll.sortedEntries()) if (iterate(k, v)) break;
    } else if (coll !== undefined) {
      throw this.err(
        'eval_type_error',
        lit.collection.loc,
        `\`some .. in collection\` expects array/set/object. Got \`${jsonText(coll)}\``,
      );
    }
    return count > 0;
  }

  private evalEvery(lit: Literal & { k: 'every' }): boolean {
    const domain = this.evalExpr(lit.domain);
    this.scopes.push(new Map());
    this.contexts.push(newCtx({ value: new SetValue() }));
    let r = true;
    try {
      const each = (k: Value, v: Value): boolean => {
        this.addVar(lit.value.name, v);
        if (lit.key) this.addVar(lit.key.name, k);
        return this.evalQuery(lit.query);
      };
      if (Array.isArray(domain)) {
        for (let i = 0; i < domain.length; i++) {
          if (!each(i, domain[i]!)) {
            r = false;
            break;
          }
        }
      } else if (domain instanceof SetValue) {
        for (const v of domain.sorted()) {
          if (!each(v, v)) {
            r = false;
            break;
          }
        }
      } else if (domain instanceof ObjectValue) {
        for (const [k, v] of domain.sortedEntries()) {
          if (!each(k, v)) {
            r = false;
            break;
          }
        }
      } else {
        r = false;
      }
    } finally {
      this.contexts.pop();
      this.scopes.pop();
    }
    return r;
  }

  // ---- with modifiers ----

  private applyWith(stmt: Stmt): WithSaved {
    if (stmt.withs.length === 0) return NO_WITH;
    const saved: WithSaved = {
      active: true,
      skip: false,
      withDocument: this.withDocument,
      input: this.input,
      data: this.data,
      owned: this.owned,
      processed: this.processed,
      processedPaths: this.processedPaths,
      withFunctions: this.withFunctions,
      ruleValues: this.ruleValues,
    };
    this.processed = new Set();
    this.processedPaths = new ProcessedTree();
    this.ruleValues = new Map();
    let doc = this.withDocument ?? { data: this.initData, input: this.input };
    let skip = false;
    const newFunctions = new Map(this.withFunctions);
    for (const w of stmt.withs) {
      let path = simpleComponents(w.refr);
      const head = path[0];
      if (head !== undefined && head !== 'data') {
        const imp = this.c.imports.get(`${this.modulePath}.${head}`);
        if (imp) path = [...simpleComponents(imp), ...path.slice(1)];
      }
      let target = path.join('.');
      let isFn = this.lookupFunction(target) !== undefined || this.isBuiltin(target);
      if (!isFn && !target.startsWith('data.') && !target.startsWith('input.') && target !== 'input') {
        target = `${this.modulePath}.${target}`;
        if (this.lookupFunction(target) === undefined) {
          throw this.err('rego_type_error', w.refr.loc, 'undefined rule');
        }
        isFn = true;
      }
      if (isFn) {
        let v: Value | undefined;
        try {
          v = this.evalExpr(w.as);
        } catch {
          v = undefined;
        }
        target = this.qualifiedFunctionPath(target);
        if (v !== undefined) {
          newFunctions.set(target, { value: v });
        } else {
          let fp = pathString(w.as, this.modulePath);
          if (fp === undefined || this.lookupFunction(fp) === undefined) {
            fp = pathString(w.as);
            if (fp === undefined || this.lookupFunction(fp) === undefined) {
              const resolved = fp !== undefined ? this.resolveImportPath(fp) : undefined;
              if (resolved !== undefined && this.c.functions.has(resolved)) fp = resolved;
              else if (fp === undefined || !this.isBuiltin(fp)) skip = true;
            }
          }
          newFunctions.set(target, { fn: fp ?? '' });
        }
      } else {
        const value = this.evalExpr(w.as);
        if (value === undefined) skip = true;
        const root = path[0];
        if (root !== 'input' && root !== 'data') {
          throw this.err('rego_type_error', w.refr.loc, 'not a valid target for with modifier');
        }
        doc = withPathSet(doc, path, value ?? null);
        for (const r of this.c.rules.get(target) ?? []) this.processed.add(r);
      }
    }
    this.withFunctions = newFunctions;
    this.withDocument = doc;
    this.owned = new WeakSet();
    this.data = doc.data.clone();
    this.owned.add(this.data);
    this.input = doc.input;
    saved.skip = skip;
    return saved;
  }

  private restoreWith(s: WithSaved): void {
    if (!s.active) return;
    this.withDocument = s.withDocument;
    this.input = s.input;
    this.data = s.data!;
    this.owned = s.owned!;
    this.processed = s.processed!;
    this.processedPaths = s.processedPaths!;
    this.withFunctions = s.withFunctions!;
    this.ruleValues = s.ruleValues!;
  }

  // ---- outputs ----

  private evalOutputExpr(): boolean {
    this.tick();
    const ctx = this.ctx();
    let loops: readonly HoistedLoop[] = EMPTY_LOOPS;
    const kl = ctx.keyExpr ? this.c.exprLoops.get(ctx.keyExpr) : undefined;
    const ol = ctx.outputExpr ? this.c.exprLoops.get(ctx.outputExpr) : undefined;
    if (kl && kl.length > 0) loops = ol && ol.length > 0 ? [...kl, ...ol] : kl;
    else if (ol && ol.length > 0) loops = ol;
    const r = this.evalOutputInLoop(loops, 0);
    return ctx.outputExpr ? ctx.ruleValue !== undefined : r;
  }

  private evalOutputInLoop(loops: readonly HoistedLoop[], li: number): boolean {
    if (li < loops.length) {
      const loop = loops[li]!;
      const coll = this.evalExpr(loop.collection);
      let result = false;
      const target = loop.loopExpr;
      try {
        if (Array.isArray(coll)) {
          for (const v of coll) {
            this.loopVars.set(target, v);
            result = this.evalOutputInLoop(loops, li + 1) || result;
          }
        } else if (coll instanceof SetValue) {
          for (const v of coll.sorted()) {
            this.loopVars.set(target, v);
            result = this.evalOutputInLoop(loops, li + 1) || result;
          }
        } else if (coll instanceof ObjectValue) {
          for (const [, v] of coll.sortedEntries()) {
            this.loopVars.set(target, v);
            result = this.evalOutputInLoop(loops, li + 1) || result;
          }
        } else {
          throw this.err('eval_type_error', target.loc, 'item cannot be indexed');
        }
      } finally {
        this.loopVars.delete(target);
      }
      return result;
    }

    const ctx = this.ctx();
    const keyExpr = ctx.keyExpr;
    const outputExpr = ctx.outputExpr;
    if (ctx.ruleRef !== undefined) {
      const isRule = ctx.isRule;
      let isConst = isRule && !ctx.constDetermined ? isConstantRef(ctx.ruleRef) : false;
      const comps = this.evalRuleRef(ctx.ruleRef);
      if (keyExpr) {
        isConst = isConst && isSimpleLiteral(keyExpr);
        comps.push(this.evalExpr(keyExpr));
      }
      let output: Value | undefined;
      if (outputExpr) {
        isConst = isConst && (keyExpr ? isSimpleLiteral(keyExpr) : true) && isSimpleLiteral(outputExpr);
        output = this.evalExpr(outputExpr);
      } else if (ctx.isOldStyleSet && comps.length > 0) {
        output = comps.pop();
      } else {
        output = true;
      }
      if (isConst) ctx.earlyReturn = true;
      if (isRule) ctx.constDetermined = true;
      if (output === undefined || comps.some((c) => c === undefined)) {
        ctx.ruleValue = undefined;
        return false;
      }
      ctx.ruleValue ??= new ObjectValue();
      const key = comps as Value[];
      if (ctx.isSet) {
        let s = ctx.ruleValue.get(key);
        if (s === undefined) {
          s = new SetValue();
          ctx.ruleValue.set(key, s);
        }
        (s as SetValue).add(output);
        this.checkSize((s as SetValue).size);
        return true;
      }
      const existing = ctx.ruleValue.get(key);
      if (existing === undefined) ctx.ruleValue.set(key, output);
      else if (!equals(existing, output)) {
        // A rule with a variable key (`q[k] := v`) builds an object: OPA reports its key conflict.
        throw this.conflict(
          ctx.ruleRef.loc,
          isConstantRef(ctx.ruleRef) && (keyExpr === undefined || isSimpleLiteral(keyExpr)) ? 'rule' : 'key',
          refText([...(this.module?.pkg ?? []), ...key]),
          'rules must not produce multiple outputs',
        );
      }
      return true;
    }

    if (keyExpr && outputExpr) {
      const k = this.evalExpr(keyExpr);
      const v = this.evalExpr(outputExpr);
      if (k !== undefined && v !== undefined) {
        const map = ctx.value as ObjectValue;
        const pv = map.get(k);
        if (pv !== undefined && !equals(pv, v)) {
          throw this.conflict(
            keyExpr.loc,
            'key',
            undefined,
            `value for key \`${jsonText(k)}\` generated multiple times: \`${jsonText(pv)}\` and \`${jsonText(v)}\``,
          );
        }
        map.set(k, v);
        this.checkSize(map.size);
      } else if (!(ctx.value instanceof ObjectValue)) {
        ctx.value = undefined;
      }
    } else if (outputExpr) {
      const out = this.evalExpr(outputExpr);
      if (out !== undefined) {
        if (Array.isArray(ctx.value)) {
          ctx.value.push(out);
          this.checkSize(ctx.value.length);
          this.charge(SLOT_BYTES);
        } else if (ctx.value instanceof SetValue) {
          ctx.value.add(out);
          this.checkSize(ctx.value.size);
        } else {
          throw this.err('eval_internal_error', outputExpr.loc, 'invalid context value');
        }
      } else if (!ctx.isCompr && !(ctx.value instanceof SetValue)) {
        ctx.value = undefined;
      }
    }
    if (ctx.result) this.gatherResult(ctx, ctx.result);
    return true;
  }

  private evalRuleRef(refr: Expr): (Value | undefined)[] {
    const comps: (Value | undefined)[] = [];
    let e = refr;
    for (;;) {
      if (e.k === 'var') {
        comps.push(e.name);
        break;
      }
      if (e.k === 'brack') {
        comps.push(this.evalExpr(e.index));
        e = e.refr;
      } else if (e.k === 'dot') {
        comps.push(e.field);
        e = e.refr;
      } else {
        throw this.err('rego_type_error', e.loc, 'not a valid rule ref');
      }
    }
    return comps.reverse();
  }

  // ---- rules ----

  private makeRuleContext(head: RuleHead): Ctx {
    if (head.k === 'compr') {
      const refr = head.refr;
      if (refr.k === 'brack') {
        return newCtx({
          keyExpr: refr.index,
          outputExpr: head.assign?.value,
          value: new ObjectValue(),
          ruleRef: refr.refr,
          isRule: true,
        });
      }
      return newCtx({ outputExpr: head.assign?.value, value: [], ruleRef: refr, isRule: true });
    }
    if (head.k === 'set') {
      return newCtx({
        outputExpr: head.key,
        value: new SetValue(),
        ruleRef: head.refr,
        isSet: true,
        isOldStyleSet: head.key === undefined,
        isRule: true,
      });
    }
    throw this.err('eval_internal_error', head.loc, 'unhandled rule head');
  }

  private evalRuleBodies(ctx: Ctx, loc: Loc, bodies: readonly RuleBody[]): Value | undefined {
    this.tick();
    const isPartial = ctx.isSet || ctx.keyExpr !== undefined;
    let result = true;
    if (bodies.length === 0) {
      this.contexts.push(ctx);
      try {
        result = this.evalOutputExpr();
      } finally {
        this.contexts.pop();
      }
    } else {
      let anySuccess = false;
      let cur = ctx;
      this.contexts.push(cur);
      try {
        for (let idx = 0; idx < bodies.length; idx++) {
          const body = bodies[idx]!;
          if (idx > 0) {
            const popped = this.contexts.pop()!;
            const outputExpr = body.assign?.value ?? (isPartial ? ctx.outputExpr : undefined);
            cur = { ...ctx, outputExpr, results: [], result: ctx.result ? { expressions: [] } : undefined };
            if (isPartial) {
              cur.ruleValue = popped.ruleValue;
              cur.value = popped.value;
            } else {
              cur.ruleValue = new ObjectValue();
              cur.value = cloneAccumulator(ctx.value);
              cur.earlyReturn = false;
              cur.constDetermined = false;
            }
            this.contexts.push(cur);
          }
          result = this.evalQuery(body.query);
          if (result) {
            anySuccess = true;
            const nextIsElse = bodies[idx + 1]?.isElse === true;
            if (!isPartial || nextIsElse) break;
          }
        }
      } finally {
        cur = this.contexts.pop()!;
      }
      if (isPartial) result = anySuccess;
      return this.ruleBodiesValue(cur, loc, result);
    }
    return this.ruleBodiesValue(ctx, loc, result);
  }

  private ruleBodiesValue(ctx: Ctx, loc: Loc, result: boolean): Value | undefined {
    if (ctx.ruleRef !== undefined) return result ? ctx.ruleValue : undefined;
    if (!result) return undefined;
    const v = ctx.value;
    if (v instanceof ObjectValue || v instanceof SetValue) return v;
    if (Array.isArray(v)) {
      if (v.length === 1) return v[0];
      if (v.length === 0) return true;
      throw this.conflict(loc, 'rule', undefined, 'complete rules should not produce multiple outputs');
    }
    throw this.err('eval_internal_error', loc, 'unexpected rule evaluation state');
  }

  private checkRulePath(loc: Loc, path: readonly Value[], value: Value, isSet: boolean): void {
    const keys = prefixKeys(path);
    for (let i = 1; i <= path.length; i++) {
      const k = keys[i - 1]!;
      const prev = this.ruleValues.get(k);
      if (prev === undefined) continue;
      if (i === path.length && (isSet || equals(prev.value, value))) continue;
      throw this.conflict(
        loc,
        'rule',
        refText(path.slice(0, i)),
        `rule conflicts with the following rule: defined at ${prev.loc.file.name}:${prev.loc.line}:${prev.loc.col}`,
      );
    }
    this.ruleValues.set(path.length === 0 ? keyOf([]) : keys[path.length - 1]!, { value, loc });
  }

  private evalRule(m: Module, r: Rule): void {
    this.tick();
    if (this.processed.has(r) || r.k === 'default') return;
    if (this.activeRules.includes(r)) {
      const refr = ruleRefr(r);
      throw this.err(
        'rego_recursion_error',
        refr.loc,
        `recursion detected when evaluating rule ${locText(refr.loc)}`,
      );
    }
    this.activeRules.push(r);
    this.enterCall(r.loc);
    const scopes = this.scopes;
    this.scopes = [new Map()];
    const prev = this.setModule(m);
    const prevPath = this.rulePath;
    try {
      if (this.opts.errorStyle === 'opa') {
        this.rulePath = refText([...m.pkg, ...simpleComponents(ruleRefr(r))]);
      }
      this.evalRuleImpl(m, r);
    } finally {
      this.rulePath = prevPath;
      this.setModule(prev);
      this.scopes = scopes;
      this.leaveCall();
      this.activeRules.pop();
    }
  }

  private evalRuleImpl(m: Module, r: Rule & { k: 'spec' }): void {
    const head = r.head;
    if (head.k === 'compr' || head.k === 'set') {
      const ctx = this.makeRuleContext(head);
      const isSet = ctx.isSet;
      const isObject = ctx.keyExpr !== undefined && !isSet;
      const value = this.evalRuleBodies(ctx, r.loc, r.bodies);
      const pkg: Value[] = [...m.pkg];
      if (value !== undefined) {
        for (const [path, v] of (value as ObjectValue).sortedEntries()) {
          const full = [...pkg, ...(path as Value[])];
          this.checkRulePath(head.refr.loc, full, v, isSet);
          this.updateRuleValue(r.loc, full, v, isSet);
        }
      } else if (isSet) {
        const comps = this.tryRuleRef(head.refr);
        if (comps) this.updateRuleValue(r.loc, [...pkg, ...comps], new SetValue(), true);
      } else if (isObject && head.refr.k === 'brack') {
        const comps = this.tryRuleRef(head.refr.refr);
        if (comps) this.updateRuleValue(r.loc, [...pkg, ...comps], undefined, false);
      }
      this.processed.add(r);
      return;
    }
    // Functions: create the objects for nested names; zero-argument functions are evaluated as values.
    const path = [...m.pkg, ...simpleComponents(head.refr)];
    if (path.length - m.pkg.length > 1) {
      const prefix = path.slice(0, -1);
      if (this.initDataAt(prefix) === undefined) this.mergeAt(r.loc, prefix, new ObjectValue(), false);
    }
    if (head.args.length === 0) {
      const ctx = newCtx({ outputExpr: head.assign?.value, value: [] });
      const value = this.evalRuleBodies(ctx, r.loc, r.bodies);
      if (value !== undefined && this.initDataAt(path) === undefined)
        this.mergeAt(head.refr.loc, path, value, true);
    }
  }

  private tryRuleRef(refr: Expr): (Value | undefined)[] | undefined {
    try {
      return this.evalRuleRef(refr);
    } catch (e) {
      if (e instanceof RegoLimitError) throw e;
      return undefined;
    }
  }

  private evalDefaultRule(r: Rule): void {
    if (this.processed.has(r) || r.k !== 'default' || r.args.length > 0) return;
    const scopes = this.scopes;
    this.scopes = [new Map()];
    try {
      const m = this.module!;
      let refr = r.refr;
      let index: Expr | undefined;
      if (refr.k === 'brack') {
        index = refr.index;
        refr = refr.refr;
      }
      const path = [...m.pkg, ...simpleComponents(refr)];
      const value = this.evalExpr(r.value);
      if (value === undefined) return;
      if (index) {
        const iv = this.evalExpr(index);
        if (iv === undefined) return;
        const existing = chained(this.data, path);
        if (existing === undefined || (existing instanceof ObjectValue && !existing.has(iv))) {
          const obj = new ObjectValue();
          obj.set(iv, value);
          this.mergeAt(r.loc, path, obj, false);
        }
      } else if (chained(this.data, path) === undefined) {
        this.mergeAt(r.loc, path, value, false);
      }
      this.processed.add(r);
    } finally {
      this.scopes = scopes;
    }
  }

  private ensureModuleEvaluated(path: string): void {
    for (const m of this.c.modules) {
      if (m === this.module) continue;
      const mp = this.c.modulePath.get(m)!;
      if (mp.startsWith(path) && (mp.length === path.length || mp[path.length] === '.')) {
        this.ensurePackageObject(m.pkg);
        for (const r of m.rules) if (!this.processed.has(r)) this.evalRule(m, r);
        const prev = this.setModule(m);
        try {
          for (const r of m.rules) if (!this.processed.has(r)) this.evalDefaultRule(r);
        } finally {
          this.setModule(prev);
        }
        this.processedPaths.mark(m.pkg);
      }
    }
  }

  private ensureRuleEvaluated(path: string): void {
    this.tick();
    let matched = false;
    const rules = this.c.rules.get(path);
    if (rules) {
      matched = true;
      for (const r of rules) {
        if (!this.processed.has(r)) this.evalRule(this.c.ruleModule.get(r)!, r);
      }
    }
    const defaults = this.c.defaultRules.get(path);
    if (defaults) {
      matched = true;
      for (const d of defaults) this.evalDefaultEntry(d);
    }
    if (matched) this.processedPaths.mark(dataPathParts(path));
  }

  private evalDefaultEntry(d: DefaultEntry): void {
    if (this.processed.has(d.rule)) return;
    const prev = this.setModule(this.c.ruleModule.get(d.rule));
    try {
      this.evalDefaultRule(d.rule);
    } finally {
      this.setModule(prev);
    }
  }

  private lookupVar(e: Expr & { k: 'var' }, fields: readonly string[]): Value | undefined {
    const name = e.name;
    const local = this.lookupLocal(name);
    if (local !== NOT_FOUND) return chained(local, fields);
    if (name === 'input') {
      const v = chained(this.input, fields);
      this.opts.onInputRead?.(fields, v);
      return v;
    }
    if (name === 'data') {
      if (this.processedPaths.isProcessed(fields)) return chained(this.data, fields);
      if (fields.length === 0 && this.activeRules.length === 0) {
        for (const m of this.c.modules) for (const r of m.rules) this.evalRule(m, r);
      }
      const requested = `data.${fields.join('.')}`;
      this.ensureModuleEvaluated(requested);
      for (let i = fields.length; i >= 1; i--) {
        const p = `data.${fields.slice(0, i).join('.')}`;
        if (this.c.rules.has(p) || this.c.defaultRules.has(p)) {
          this.ensureRuleEvaluated(p);
          break;
        }
      }
      return chained(this.data, fields);
    }
    if (this.c.modules.length === 0 || this.module === undefined) return undefined;
    const pkg = this.module.pkg;
    const varPath = [...pkg, name];
    if (this.processedPaths.isProcessed(varPath)) return chained(chained(this.data, varPath), fields);
    const rulePath = `${this.modulePath}.${name}`;
    if (!this.c.rules.has(rulePath) && !this.c.defaultRules.has(rulePath) && !this.c.imports.has(rulePath)) {
      throw this.err('rego_unsafe_var_error', e.loc, `var ${name} is unsafe`);
    }
    let found = false;
    for (let i = fields.length; i >= 0; i--) {
      const p = i === 0 ? rulePath : `${rulePath}.${fields.slice(0, i).join('.')}`;
      if (this.c.rules.has(p) || this.c.defaultRules.has(p)) {
        this.ensureRuleEvaluated(p);
        found = true;
        break;
      }
    }
    if (!found) {
      const imp = this.c.imports.get(rulePath);
      if (imp) return chained(this.evalExpr(imp), fields);
    }
    return chained(chained(this.data, varPath), fields);
  }

  // ---- expressions ----

  evalExpr(e: Expr): Value | undefined {
    this.tick();
    switch (e.k) {
      case 'str':
      case 'num':
      case 'bool':
        return e.v;
      case 'null':
        return null;
      case 'var':
      case 'dot':
      case 'brack':
        return this.evalRef(e);
      case 'arith':
        return this.evalOperator(e.op, e.lhs, e.rhs, e.loc);
      case 'cmp':
        return this.evalOperator(e.op, e.lhs, e.rhs, e.loc);
      case 'setop':
        return this.evalOperator(e.op, e.lhs, e.rhs, e.loc);
      case 'assign': {
        const bp = this.c.plans.get(e);
        if (bp?.t !== 'assign') throw this.err('eval_internal_error', e.loc, 'missing assignment plan');
        return this.execAssignment(bp.plan);
      }
      case 'member':
        return this.evalMembership(e);
      case 'array': {
        const out: Value[] = [];
        for (const it of e.items) {
          const v = this.evalExpr(it);
          if (v === undefined) return undefined;
          out.push(v);
        }
        this.checkSize(out.length);
        this.charge(ARRAY_BYTES + SLOT_BYTES * out.length);
        return out;
      }
      case 'set': {
        const out = new SetValue();
        for (const it of e.items) {
          const v = this.evalExpr(it);
          if (v === undefined) return undefined;
          out.add(v);
        }
        this.checkSize(out.size);
        return out;
      }
      case 'object': {
        const out = new ObjectValue();
        for (const [ke, ve] of e.fields) {
          const k = this.evalExpr(ke);
          if (k === undefined) return undefined;
          const v = this.evalExpr(ve);
          if (v === undefined) return undefined;
          out.set(k, v);
        }
        this.checkSize(out.size);
        return out;
      }
      case 'arrcompr':
        return this.evalCompr(e.query, newCtx({ outputExpr: e.term, value: [], isCompr: true }), e.loc);
      case 'setcompr':
        return this.evalCompr(
          e.query,
          newCtx({ outputExpr: e.term, value: new SetValue(), isCompr: true }),
          e.loc,
        );
      case 'objcompr':
        return this.evalCompr(
          e.query,
          newCtx({ keyExpr: e.key, outputExpr: e.value, value: new ObjectValue(), isCompr: true }),
          e.loc,
        );
      case 'neg': {
        if (e.expr.k === 'num' && !locText(e.expr.loc).startsWith('-')) {
          return this.callOperator('minus', [0, e.expr.v], e.loc);
        }
        throw this.err('rego_type_error', e.loc, 'unary - can only be used with numeric literals');
      }
      case 'call':
        return this.evalCall(e, undefined, false);
    }
  }

  private evalCompr(q: Query, ctx: Ctx, loc: Loc): Value | undefined {
    this.enterCall(loc);
    this.contexts.push(ctx);
    try {
      this.evalQuery(q);
    } finally {
      this.contexts.pop();
      this.leaveCall();
    }
    const v = ctx.value;
    return Array.isArray(v) ? (v as Value[]) : v;
  }

  private evalRef(expr: Expr): Value | undefined {
    const path: string[] = [];
    let e = expr;
    for (;;) {
      const lv = this.loopVars.get(e);
      if (lv !== undefined) return path.length === 0 ? lv : chained(lv, path.reverse());
      if (e.k === 'var') {
        path.reverse();
        return this.lookupVar(e, path);
      }
      if (e.k === 'dot') {
        path.push(e.field);
        e = e.refr;
        continue;
      }
      if (e.k === 'brack') {
        if (e.index.k === 'str') {
          path.push(e.index.v);
          e = e.refr;
          continue;
        }
        path.reverse();
        const index = this.evalExpr(e.index);
        let refPath = DATA_REF_PATH.get(e.refr);
        if (refPath === undefined) {
          const p = pathString(e.refr);
          refPath = p !== undefined && (p === 'data' || p.startsWith('data.')) ? p : null;
          DATA_REF_PATH.set(e.refr, refPath);
        }
        const isData = refPath !== null;
        if (isData && index !== undefined) {
          const is = valueToString(index);
          const rp = path.length === 0 ? `${refPath}.${is}` : `${refPath}.${is}.${path.join('.')}`;
          this.ensureRuleEvaluated(rp);
        }
        const obj = this.evalExpr(e.refr);
        if (index === undefined) return undefined;
        let v = indexValue(obj, index);
        if (v === undefined && isData && (typeof index === 'number' || typeof index === 'bigint')) {
          v = indexValue(obj, valueToString(index));
        }
        return chained(v, path);
      }
      path.reverse();
      return chained(this.evalExpr(e), path);
    }
  }

  private evalOperator(op: string, lhs: Expr, rhs: Expr, loc: Loc): Value | undefined {
    const a = this.evalExpr(lhs);
    const b = this.evalExpr(rhs);
    if (a === undefined || b === undefined) return undefined;
    return this.callOperator(OPERATOR_BUILTIN[op]!, [a, b], loc);
  }

  private callOperator(name: string, args: Value[], loc: Loc): Value | undefined {
    const def = this.opts.builtins.get(name);
    if (!def) throw this.err('rego_type_error', loc, `operator builtin ${name} is not available`);
    return this.invokeBuiltin(name, def, args, loc);
  }

  private invokeBuiltin(name: string, def: BuiltinDef, args: readonly Value[], loc: Loc): Value | undefined {
    let v: Value | undefined;
    try {
      v = def.fn(args, this.builtinCtx);
    } catch (err) {
      if (err instanceof RegoLimitError) throw err;
      if (err instanceof BuiltinError) {
        if (!this.opts.strictBuiltinErrors) return undefined;
        throw this.err(err.code, loc, err.message);
      }
      if (err instanceof RegoEvalError) throw err;
      if (!this.opts.strictBuiltinErrors) return undefined;
      throw this.err('eval_builtin_error', loc, `${name}: ${(err as Error).message}`);
    }
    this.chargeResult(v, args);
    return v;
  }

  private evalMembership(e: Expr & { k: 'member' }): Value | undefined {
    const value = this.evalExpr(e.value);
    const coll = this.evalExpr(e.collection);
    if (Array.isArray(coll)) {
      if (e.key) {
        const k = this.evalExpr(e.key);
        const x = k === undefined ? undefined : indexValue(coll, k);
        return x !== undefined && value !== undefined && equals(x, value);
      }
      return value !== undefined && coll.some((x) => equals(x, value));
    }
    if (coll instanceof ObjectValue) {
      if (e.key) {
        const k = this.evalExpr(e.key);
        const x = k === undefined ? undefined : coll.get(k);
        return x !== undefined && value !== undefined && equals(x, value);
      }
      if (value === undefined) return false;
      for (const [, x] of coll.entries.values()) if (equals(x, value)) return true;
      return false;
    }
    if (coll instanceof SetValue) {
      if (e.key) return false;
      return value !== undefined && coll.has(value);
    }
    return false;
  }

  // ---- destructuring and assignment ----

  private destructure(plan: DestructuringPlan, value: Value | undefined): true | undefined {
    if (value === undefined) return undefined;
    switch (plan.t) {
      case 'var':
        this.addVar(plan.name, value);
        return true;
      case 'ignore':
        return true;
      case 'eqExpr': {
        const expected = this.evalExpr(plan.expr);
        return expected !== undefined && equals(value, expected) ? true : undefined;
      }
      case 'eqValue':
        return equals(value, plan.value) ? true : undefined;
      case 'array': {
        if (!Array.isArray(value) || value.length !== plan.elems.length) return undefined;
        for (let i = 0; i < plan.elems.length; i++) {
          if (this.destructure(plan.elems[i]!, value[i]) !== true) return undefined;
        }
        return true;
      }
      case 'object': {
        if (!(value instanceof ObjectValue)) return undefined;
        for (const [k, fp] of plan.fields) {
          const fv = value.get(k);
          if (fv === undefined || this.destructure(fp, fv) !== true) return undefined;
        }
        for (const [ke, fp] of plan.dynamic) {
          const k = this.evalExpr(ke);
          if (k === undefined) return undefined;
          const fv = value.get(k);
          if (fv === undefined || this.destructure(fp, fv) !== true) return undefined;
        }
        return true;
      }
    }
  }

  private execAssignment(plan: AssignmentPlan): Value | undefined {
    switch (plan.t) {
      case 'colonEq':
      case 'bindLeft':
        return this.destructure(plan.lhsPlan, this.evalExpr(plan.rhs));
      case 'bindRight':
        return this.destructure(plan.rhsPlan, this.evalExpr(plan.lhs));
      case 'both':
        for (const [ve, p] of plan.pairs) {
          if (this.destructure(p, this.evalExpr(ve)) !== true) return undefined;
        }
        return true;
      case 'wildcard':
        if (plan.side === 'both') return true;
        return this.evalExpr(plan.side === 'lhs' ? plan.rhs : plan.lhs) === undefined ? undefined : true;
      case 'eqCheck': {
        const a = this.evalExpr(plan.lhs);
        const b = this.evalExpr(plan.rhs);
        if (a === undefined || b === undefined) return undefined;
        return equals(a, b) ? true : undefined;
      }
    }
  }

  // ---- calls ----

  private lookupFunction(path: string): FunctionEntry | undefined {
    const full = path.startsWith('data.') ? path : `${this.modulePath}.${path}`;
    return this.c.functions.get(full);
  }

  private isBuiltin(path: string): boolean {
    return (
      path === 'print' ||
      path === 'walk' ||
      this.opts.builtins.has(path) ||
      this.opts.unsupported?.has(path) === true
    );
  }

  private resolveImportPath(path: string): string | undefined {
    if (path.startsWith('data.')) return undefined;
    const dot = path.indexOf('.');
    const alias = dot < 0 ? path : path.slice(0, dot);
    const imp = this.c.imports.get(`${this.modulePath}.${alias}`);
    if (!imp) return undefined;
    const target = pathString(imp);
    if (target === undefined) return undefined;
    return dot < 0 ? target : `${target}.${path.slice(dot + 1)}`;
  }

  private resolveFunctionPath(path: string): string {
    const candidate = this.resolveImportPath(path);
    if (candidate !== undefined && (this.c.functions.has(candidate) || this.isDefaultFunction(candidate))) {
      return candidate;
    }
    return path;
  }

  private isDefaultFunction(path: string): boolean {
    return (
      this.c.rulePaths.has(path) &&
      (this.c.defaultRules.get(path) ?? []).some((d) => d.rule.k === 'default' && d.rule.args.length > 0)
    );
  }

  private evalCall(e: CallExpr, extra: Expr | undefined, allowReturnArg: boolean): Value | undefined {
    if (extra === undefined) return this.evalCallImpl(e, e.params);
    const value = this.evalCallImpl(e, e.params.slice(0, -1));
    if (allowReturnArg) {
      const bp = this.c.plans.get(extra);
      if (bp?.t !== 'param') throw this.err('eval_internal_error', e.loc, 'missing output binding plan');
      return this.destructure(bp.plan, value);
    }
    const expected = this.evalExpr(extra);
    return value !== undefined && expected !== undefined && equals(value, expected);
  }

  private evalCallImpl(e: CallExpr, params: readonly Expr[]): Value | undefined {
    this.tick();
    const lv = this.loopVars.get(e);
    if (lv !== undefined) return lv;
    const args: (Value | undefined)[] = new Array(params.length);
    for (let i = 0; i < params.length; i++) args[i] = this.evalExpr(params[i]!);
    if (this.withFunctions.size === 0) {
      let target = this.c.callTargets.get(e);
      if (target === undefined) {
        target = this.resolveTarget(e, this.resolveFunctionPath(this.rawCallPath(e)));
        this.c.callTargets.set(e, target);
      }
      return this.dispatchCall(e, target, params, args);
    }
    const fcnPath = this.resolveFunctionPath(this.rawCallPath(e));
    const mod =
      this.withFunctions.get(this.qualifiedFunctionPath(fcnPath)) ?? this.withFunctions.get(fcnPath);
    if (mod === undefined) return this.dispatchCall(e, this.resolveTarget(e, fcnPath), params, args);
    if ('value' in mod) {
      if (args.some((a) => a === undefined)) return undefined;
      return mod.value;
    }
    const saved = this.withFunctions;
    this.withFunctions = new Map();
    try {
      return this.dispatchCall(e, this.resolveTarget(e, mod.fn), params, args);
    } finally {
      this.withFunctions = saved;
    }
  }

  /** `data.pkg.f` for a user function named relative to the current package; other names unchanged. */
  private qualifiedFunctionPath(path: string): string {
    if (path.startsWith('data.')) return path;
    return this.lookupFunction(path) !== undefined ? `${this.modulePath}.${path}` : path;
  }

  private rawCallPath(e: CallExpr): string {
    const raw = pathString(e.fcn);
    if (raw === undefined) throw this.err('rego_type_error', e.loc, 'invalid function expression');
    return raw;
  }

  /** What a call refers to in the current module: a user function (or default function), or a builtin. */
  private resolveTarget(e: CallExpr, selected: string): CallTarget {
    const fn = this.lookupFunction(selected);
    if (fn !== undefined) return { t: 'user', fn, selected };
    if (
      this.c.defaultRules.has(selected) ||
      this.c.defaultRules.has(pathString(e.fcn, this.modulePath) ?? '')
    ) {
      return { t: 'user', fn: undefined, selected };
    }
    const host = this.opts.hostBuiltins.get(selected);
    if (host) return { t: 'host', host, name: selected };
    if (selected === 'print') return { t: 'print' };
    if (selected === 'walk') return { t: 'walk' };
    const def = this.opts.builtins.get(selected);
    if (def) return { t: 'builtin', def, name: selected };
    return { t: 'unknown', name: selected };
  }

  private dispatchCall(
    e: CallExpr,
    target: CallTarget,
    params: readonly Expr[],
    args: readonly (Value | undefined)[],
  ): Value | undefined {
    switch (target.t) {
      case 'user':
        for (const a of args) if (a === undefined) return undefined;
        return this.callUserFunction(e, target.selected, target.fn, args as Value[]);
      case 'host': {
        for (const a of args) if (a === undefined) return undefined;
        if (args.length !== target.host.arity) {
          throw this.err('rego_type_error', e.loc, 'incorrect number of parameters supplied to extension');
        }
        try {
          const v = target.host.fn(args as Value[]);
          this.chargeResult(v, args);
          return v;
        } catch (err) {
          if (err instanceof RegoLimitError || err instanceof RegoEvalError) throw err;
          throw this.err('eval_builtin_error', e.loc, `${target.name}: ${(err as Error).message}`);
        }
      }
      case 'print':
        return this.evalPrint(e, params);
      case 'walk':
        if (args[0] === undefined) return undefined;
        {
          const pairs = walkPairs(args[0]!);
          this.chargeResult(pairs, []);
          return pairs;
        }
      case 'builtin': {
        const def = target.def;
        const name = target.name;
        if (args.length !== def.arity) {
          throw this.err(
            'rego_type_error',
            e.loc,
            `\`${name}\` expects ${def.arity} argument${def.arity === 1 ? '' : 's'}`,
          );
        }
        for (const a of args) if (a === undefined) return undefined;
        if (def.nondeterministic) {
          const key = `${name}\u0000${keyOf(args as Value[])}`;
          if (this.builtinCache.has(key)) return this.builtinCache.get(key);
          const v = this.invokeBuiltin(name, def, args as Value[], e.loc);
          this.builtinCache.set(key, v);
          return v;
        }
        return this.invokeBuiltin(name, def, args as Value[], e.loc);
      }
      case 'unknown':
        if (this.opts.unsupported?.has(target.name)) {
          throw this.err(
            'eval_builtin_error',
            e.loc,
            `${target.name}: not supported by this engine (only when replaced with \`with\`)`,
          );
        }
        throw this.err('rego_type_error', e.loc, `could not find function ${target.name}`);
    }
  }

  private callUserFunction(
    e: CallExpr,
    selected: string,
    fn: FunctionEntry | undefined,
    args: readonly Value[],
  ): Value | undefined {
    const results: Value[] = [];
    const errors: Error[] = [];
    const fnKey = fn ? `${this.c.modulePath.get(fn.module)}:${selected}` : selected;
    const fnName = selected.startsWith('data.') ? selected : `${this.modulePath}.${selected}`;
    if (fn) {
      if (this.activeFunctions.includes(fnKey)) {
        throw this.err('rego_recursion_error', e.loc, `recursion detected when calling function ${selected}`);
      }
      this.activeFunctions.push(fnKey);
      this.enterCall(e.loc);
    }
    try {
      for (const rule of fn?.rules ?? []) {
        if (rule.k !== 'spec' || rule.head.k !== 'func') continue;
        const head = rule.head;
        if (head.args.length !== args.length) {
          throw this.err(
            'rego_type_error',
            e.loc,
            `mismatch in number of arguments. supplied ${args.length}, expected ${head.args.length}`,
          );
        }
        const scopes = this.scopes;
        this.scopes = [new Map()];
        const prevModule = this.setModule(fn!.module);
        let bound = true;
        try {
          for (let i = 0; i < head.args.length; i++) {
            const bp = this.c.plans.get(head.args[i]!);
            if (bp?.t !== 'param') throw this.err('eval_internal_error', e.loc, 'missing parameter plan');
            if (this.destructure(bp.plan, args[i]) !== true) {
              bound = false;
              break;
            }
          }
          if (!bound) continue;
          const ctx = newCtx({ outputExpr: head.assign?.value, value: new SetValue() });
          let value: Value | undefined;
          try {
            value = this.evalRuleBodies(ctx, e.loc, rule.bodies);
          } catch (err) {
            if (err instanceof RegoLimitError || !(err instanceof Error)) throw err;
            errors.push(err);
            continue;
          }
          let result: Value | undefined;
          if (value instanceof SetValue) {
            if (value.size === 1) result = value.values().next().value as Value;
            else if (value.size > 1) {
              throw this.conflict(
                e.loc,
                'function',
                fnName,
                `function produced multiple outputs ${jsonText(value)}`,
              );
            } else result = head.assign === undefined ? true : undefined;
          } else {
            result = value;
          }
          if (result !== undefined) results.push(result);
        } finally {
          this.setModule(prevModule);
          this.scopes = scopes;
        }
      }
    } finally {
      if (fn) {
        this.activeFunctions.pop();
        this.leaveCall();
      }
    }
    if (this.opts.strictBuiltinErrors && errors.length > 0) throw errors[0];
    if (results.length === 0 && errors.length === 0) {
      let defaults = this.c.defaultRules.get(selected);
      if (!defaults) {
        const alt = pathString(e.fcn, this.modulePath);
        if (alt !== undefined) defaults = this.c.defaultRules.get(alt);
      }
      if (defaults) {
        const scopes = this.scopes;
        this.scopes = [new Map()];
        try {
          for (const d of defaults) {
            if (d.rule.k !== 'default') continue;
            try {
              const v = this.evalExpr(d.rule.value);
              if (v !== undefined) results.push(v);
            } catch (err) {
              if (err instanceof RegoLimitError || !(err instanceof Error)) throw err;
              errors.push(err);
            }
          }
        } finally {
          this.scopes = scopes;
        }
      }
    }
    if (results.length === 0) {
      if (errors.length === 0) return undefined;
      throw errors[0];
    }
    for (let i = 1; i < results.length; i++) {
      if (!equals(results[i]!, results[0]!)) {
        throw this.conflict(
          e.loc,
          'function',
          fnName,
          'functions must not produce multiple outputs for same inputs',
        );
      }
    }
    return results[0];
  }

  private evalPrint(e: CallExpr, params: readonly Expr[]): Value {
    if (params.length > 100) throw this.err('rego_type_error', e.loc, 'print supports upto 100 arguments');
    if (!this.opts.gatherPrints) return true;
    const parts: string[] = [];
    for (const p of params) {
      const v = this.evalExpr(p);
      if (v === undefined) parts.push('<undefined>');
      else if (typeof v === 'string') parts.push(v);
      else if (v !== null && typeof v === 'object' && !this.owned.has(v)) {
        // Values reached through input or rules are immutable; their text is reused across prints.
        let text = PRINT_CACHE.get(v);
        if (text === undefined) {
          text = printable(v);
          PRINT_CACHE.set(v, text);
        }
        parts.push(text);
      } else parts.push(printable(v));
    }
    this.prints.push(`${e.loc.file.name}:${e.loc.line}: ${parts.join(' ')}`);
    return true;
  }
}

interface WithSaved {
  active: boolean;
  skip: boolean;
  withDocument?: { data: ObjectValue; input: Value | undefined } | undefined;
  input?: Value | undefined;
  data?: ObjectValue;
  owned?: WeakSet<object>;
  processed?: Set<Rule>;
  processedPaths?: ProcessedTree;
  withFunctions?: Map<string, FunctionModifier>;
  ruleValues?: Map<string, { value: Value; loc: Loc }>;
}

const PRINT_CACHE = new WeakMap<object, string>();
const IGNORE: DestructuringPlan = { t: 'ignore' };
/** For refs indexed by a computed key: the `data.` path of the indexed ref, or null when not under data. */
const DATA_REF_PATH = new WeakMap<Expr, string | null>();
const NOT_FOUND: unique symbol = Symbol('not found');

const NO_WITH: WithSaved = { active: false, skip: false };
const EMPTY_LOOPS: readonly HoistedLoop[] = [];

function clearScope(s: Scope): void {
  for (const k of s.keys()) s.set(k, undefined);
}

function cloneAccumulator(v: Ctx['value']): Ctx['value'] {
  if (Array.isArray(v)) return [];
  if (v instanceof SetValue) return new SetValue();
  if (v instanceof ObjectValue) return new ObjectValue();
  return v;
}

/** Path components of a ref head or with target: vars, fields and string brackets. */
export function simpleComponents(e: Expr): string[] {
  const out: string[] = [];
  let cur: Expr = e;
  for (;;) {
    if (cur.k === 'var') {
      out.push(cur.name);
      break;
    }
    if (cur.k === 'dot') {
      out.push(cur.field);
      cur = cur.refr;
    } else if (cur.k === 'brack') {
      if (cur.index.k === 'str') out.push(cur.index.v);
      cur = cur.refr;
    } else {
      break;
    }
  }
  return out.reverse();
}

function isSimpleLiteral(e: Expr): boolean {
  return e.k === 'str' || e.k === 'bool' || e.k === 'null' || e.k === 'num';
}

function isConstantRef(e: Expr): boolean {
  let cur = e;
  for (;;) {
    if (cur.k === 'var') return true;
    if (cur.k === 'dot') cur = cur.refr;
    else if (cur.k === 'brack' && isSimpleLiteral(cur.index)) cur = cur.refr;
    else return false;
  }
}

function withPathSet(
  doc: { data: ObjectValue; input: Value | undefined },
  path: readonly string[],
  value: Value,
): { data: ObjectValue; input: Value | undefined } {
  const [root, ...rest] = path;
  if (root === 'input') {
    return { data: doc.data, input: setIn(doc.input, rest, value) };
  }
  const d = setIn(doc.data, rest, value);
  return { data: d instanceof ObjectValue ? d : new ObjectValue(), input: doc.input };
}

/** A copy of `base` with `value` at `path`; intermediate non-objects are replaced by objects. */
function setIn(base: Value | undefined, path: readonly string[], value: Value): Value {
  if (path.length === 0) return value;
  const obj = base instanceof ObjectValue ? base.clone() : new ObjectValue();
  const [k, ...rest] = path;
  obj.set(k!, setIn(obj.get(k!), rest, value));
  return obj;
}

/** `walk(x)`: every [path, value] pair of x in pre-order, objects by sorted key. */
/**
 * Estimated bytes of a string beyond its characters (each charged 2 bytes, as V8 keeps a string with any
 * character past U+00FF), of an array, and of one array slot.
 */
const STRING_BYTES = 24;
const ARRAY_BYTES = 32;
const SLOT_BYTES = 8;

function walkPairs(root: Value): Value[] {
  const out: Value[] = [];
  const path: Value[] = [];
  const visit = (v: Value): void => {
    out.push([[...path], v]);
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        path.push(i);
        visit(v[i]!);
        path.pop();
      }
    } else if (v instanceof SetValue) {
      for (const x of v.sorted()) {
        path.push(x);
        visit(x);
        path.pop();
      }
    } else if (v instanceof ObjectValue) {
      for (const [k, x] of v.sortedEntries()) {
        path.push(k);
        visit(x);
        path.pop();
      }
    }
  };
  visit(root);
  return out;
}

/** A path as OPA prints a reference: `data.a.b`, `data.a["x-y"]`, `data.a[1]`. */
function refText(path: readonly Value[]): string {
  let out = 'data';
  for (const p of path) {
    out += typeof p === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(p) ? `.${p}` : `[${jsonText(p)}]`;
  }
  return out;
}
