// Prepares parsed modules for evaluation: rule and function tables, statement schedules, hoisted loops and
// binding plans, and load-time checks (unknown functions, invalid defaults, unsafe variables).
//
// Statement scheduling follows regorus' analyzer: statements run in written order unless a statement uses a
// variable that a later statement defines. The interpreter's evaluation order (and so `print` output) depends
// on it, which is why the algorithm is reproduced closely rather than replaced by a plain topological sort.
import {
  type CallExpr,
  type Expr,
  isScalar,
  type Loc,
  type Module,
  type Query,
  type Rule,
  type RuleHead,
  refComponents,
  rootVar,
  type Stmt,
  scalarValue,
  traverse,
  type VarExpr,
} from './ast.js';
import type { BuiltinDef } from './builtins/api.js';
import { type RegoLoadErrorCode, RegoParseError } from './errors.js';
import {
  type AssignmentPlan,
  type BindingPlan,
  containsWildcards,
  type DestructuringPlan,
  destructVars,
  type HoistedLoop,
  introducesBinding,
  planBoundVars,
} from './plans.js';
import { getOrCreate } from './util.js';
import { keyOf, type Value } from './value.js';

export interface FunctionEntry {
  readonly rules: Rule[];
  readonly arity: number;
  readonly module: Module;
}

/** What a call resolves to when no `with` replaces functions; cached per call expression. */
export type CallTarget =
  | { readonly t: 'user'; readonly fn: FunctionEntry | undefined; readonly selected: string }
  | {
      readonly t: 'host';
      readonly host: { readonly arity: number; readonly fn: (args: readonly Value[]) => Value | undefined };
      readonly name: string;
    }
  | { readonly t: 'print' }
  | { readonly t: 'walk' }
  | { readonly t: 'builtin'; readonly def: BuiltinDef; readonly name: string }
  | { readonly t: 'unknown'; readonly name: string };

export interface DefaultEntry {
  readonly rule: Rule & { k: 'default' };
  readonly index: string | undefined;
}

/** Static facts about the builtins visible to policies: name → arity (-1 for variadic). */
export type BuiltinArities = ReadonlyMap<string, number>;

export interface CompiledPolicy {
  readonly modules: readonly Module[];
  /** Every prefix path of every rule ref (`data.pkg.a`, `data.pkg.a.b`, ...) → rules under it. */
  readonly rules: Map<string, Rule[]>;
  readonly defaultRules: Map<string, DefaultEntry[]>;
  /** Exact rule paths, for evalRule. */
  readonly rulePaths: Set<string>;
  readonly functions: Map<string, FunctionEntry>;
  /** `data.pkg.alias` → the import's ref. */
  readonly imports: Map<string, Expr>;
  readonly ruleModule: Map<Rule, Module>;
  readonly modulePath: Map<Module, string>;
  readonly packages: ReadonlySet<string>;
  readonly schedules: Map<Query, readonly Stmt[]>;
  readonly stmtLoops: Map<Stmt, readonly HoistedLoop[]>;
  readonly exprLoops: Map<Expr, readonly HoistedLoop[]>;
  readonly plans: Map<Expr, BindingPlan>;
  /** Calls whose last argument receives the result (`f(x, out)`), keyed by call, per module path. */
  readonly extraArgs: Map<CallExpr, Expr | undefined>;
  readonly callTargets: Map<CallExpr, CallTarget>;
}

function fail(loc: Loc, msg: string): RegoParseError {
  return new RegoParseError(loc.file.name, loc.line, loc.col, msg, loadErrorCode(msg));
}

/** OPA's code for a compile error, by its message. */
function loadErrorCode(msg: string): RegoLoadErrorCode {
  if (/unsafe|undefined variable/.test(msg)) return 'rego_unsafe_var_error';
  if (/recursion/.test(msg)) return 'rego_recursion_error';
  if (
    /could not find function|expects \d+ argument|number of arguments|not supported by this engine/.test(msg)
  ) {
    return 'rego_type_error';
  }
  return 'rego_compile_error';
}

export function pathString(e: Expr, prefix?: string): string | undefined {
  const comps: string[] = [];
  let cur: Expr = e;
  for (;;) {
    if (cur.k === 'dot') {
      comps.push(cur.field);
      cur = cur.refr;
    } else if (cur.k === 'brack') {
      if (cur.index.k === 'str') comps.push(cur.index.v);
      cur = cur.refr;
    } else if (cur.k === 'var') {
      comps.push(cur.name);
      break;
    } else {
      return undefined;
    }
  }
  if (prefix !== undefined) comps.push(prefix);
  return comps.reverse().join('.');
}

/** Components of a rule ref as recorded in the rule table; brackets with a var contribute the var name. */
function ruleRefComponents(e: Expr): string[] {
  const out: string[] = [];
  const walk = (x: Expr): void => {
    switch (x.k) {
      case 'dot':
        walk(x.refr);
        out.push(x.field);
        return;
      case 'brack':
        walk(x.refr);
        walk(x.index);
        return;
      case 'var':
        out.push(x.name);
        return;
      case 'str':
        out.push(x.v);
        return;
      case 'bool':
        out.push(String(x.v));
        return;
      case 'null':
        out.push('null');
        return;
      case 'num':
        out.push(String(x.v));
        return;
      default:
        throw fail(x.loc, 'not a valid ref');
    }
  };
  walk(e);
  return out;
}

export function ruleRefr(r: Rule): Expr {
  return r.k === 'default' ? r.refr : r.head.refr;
}

// ---------------------------------------------------------------------------------------------------------
// Tables

function buildTables(modules: readonly Module[], builtins: BuiltinArities) {
  const rules = new Map<string, Rule[]>();
  const defaultRules = new Map<string, DefaultEntry[]>();
  const rulePaths = new Set<string>();
  const functions = new Map<string, FunctionEntry>();
  const imports = new Map<string, Expr>();
  const ruleModule = new Map<Rule, Module>();
  const modulePath = new Map<Module, string>();
  const packages = new Set<string>();

  for (const m of modules) {
    const mpath = `data.${m.pkg.join('.')}`;
    modulePath.set(m, mpath);
    packages.add(mpath);
    for (const imp of m.imports) {
      const head = imp.path[0];
      if (head === 'future' || head === 'rego') continue;
      if (head === 'input' && imp.path.length === 1 && imp.alias === undefined) continue;
      const target = imp.alias ?? imp.path[imp.path.length - 1] ?? '';
      if (target === '') throw fail(imp.loc, 'invalid ref in import');
      imports.set(`${mpath}.${target}`, imp.refr);
    }
    for (const r of m.rules) {
      ruleModule.set(r, m);
      if (r.k === 'spec') {
        let refr = r.head.refr;
        if (refr.k === 'brack' && refr.index.k !== 'str') refr = refr.refr;
        const comps = ruleRefComponents(refr);
        for (let i = 0; i < comps.length; i++) {
          const p = `${mpath}.${comps.slice(0, i + 1).join('.')}`;
          if (i === comps.length - 1) rulePaths.add(p);
          const list = getOrCreate(rules, p, () => []);
          list.push(r);
        }
        if (r.head.k === 'func') {
          const full = pathString(r.head.refr, mpath);
          if (full === undefined) throw fail(r.head.refr.loc, 'invalid function name');
          const e = functions.get(full);
          if (e) {
            if (e.arity !== r.head.args.length) {
              throw fail(r.loc, `${full} was previously defined with ${e.arity} arguments.`);
            }
            e.rules.push(r);
          } else {
            functions.set(full, { rules: [r], arity: r.head.args.length, module: m });
          }
        }
      } else {
        let refr = r.refr;
        let index: string | undefined;
        if (refr.k === 'brack') {
          const v = scalarValue(refr.index);
          if (v === undefined || refr.index.k === 'null')
            throw fail(refr.index.loc, 'index is not a scalar value');
          index = keyOf(v);
          refr = refr.refr;
        }
        const comps = ruleRefComponents(refr);
        for (let i = 0; i < comps.length; i++) {
          const p = `${mpath}.${comps.slice(0, i + 1).join('.')}`;
          const list = getOrCreate(defaultRules, p, () => []);
          if (i === comps.length - 1) {
            rulePaths.add(p);
            for (const prev of list) {
              if (prev.index !== undefined && index !== undefined) {
                if (prev.index === index) {
                  throw fail(r.refr.loc, 'multiple default rules for the variable with the same index');
                }
              } else if (prev.index !== undefined || index !== undefined) {
                throw fail(r.refr.loc, 'conflict type with the default rules');
              } else {
                throw fail(r.refr.loc, `multiple default rules ${p} found`);
              }
            }
          }
          list.push({ rule: r, index });
        }
        checkDefaultValue(r.value);
      }
    }
  }
  void builtins;
  return { rules, defaultRules, rulePaths, functions, imports, ruleModule, modulePath, packages };
}

/** Default values must not be able to be undefined: only literals, collections of them and comprehensions. */
export function checkDefaultValue(e: Expr): void {
  switch (e.k) {
    case 'str':
    case 'num':
    case 'bool':
    case 'null':
    case 'arrcompr':
    case 'setcompr':
    case 'objcompr':
      return;
    case 'neg':
      if (e.expr.k === 'num') return;
      throw fail(e.loc, 'invalid `unaryexpr` in default value');
    case 'array':
    case 'set':
      for (const i of e.items) checkDefaultValue(i);
      return;
    case 'object':
      for (const [k, v] of e.fields) {
        checkDefaultValue(k);
        checkDefaultValue(v);
      }
      return;
  }
  const kind: Record<string, string> = {
    var: 'var',
    call: 'call',
    dot: 'ref',
    brack: 'ref',
    setop: 'binexpr',
    cmp: 'boolexpr',
    arith: 'arithexpr',
    assign: 'assignexpr',
    member: 'membership',
  };
  throw fail(e.loc, `invalid \`${kind[e.k] ?? e.k}\` in default value`);
}

// ---------------------------------------------------------------------------------------------------------
// Scheduler analysis

class Scope {
  locals = new Map<string, Loc>();
  unscoped = new Set<string>();
  inputs = new Set<string>();
  usesInput = false;

  clone(): Scope {
    const s = new Scope();
    s.locals = new Map(this.locals);
    s.unscoped = new Set(this.unscoped);
    s.inputs = new Set(this.inputs);
    s.usesInput = this.usesInput;
    return s;
  }
}

interface Definition {
  readonly v: string;
  readonly used: readonly string[];
}

function varExists(v: VarExpr, parents: readonly Scope[]): boolean {
  for (let i = parents.length - 1; i >= 0; i--) {
    const s = parents[i]!;
    if (s.unscoped.has(v.name)) return true;
    const l = s.locals.get(v.name);
    if (l !== undefined && l.line <= v.loc.line) return true;
  }
  return false;
}

function gatherAssignedVars(e: Expr, canShadow: boolean, parents: readonly Scope[], scope: Scope): void {
  traverse(e, (n) => {
    if (n.k === 'var') {
      if (n.name === '_' || n.name === 'input' || n.name === 'data') {
        if (n.name === 'input') scope.usesInput = true;
      } else if (canShadow) {
        scope.locals.set(n.name, n.loc);
      } else if (varExists(n, parents)) {
        scope.inputs.add(n.name);
      } else {
        scope.unscoped.add(n.name);
      }
      return false;
    }
    return n.k === 'array' || n.k === 'object';
  });
}

function gatherInputVars(e: Expr, parents: readonly Scope[], scope: Scope): void {
  traverse(e, (n) => {
    if (n.k === 'var') {
      if (n.name === 'input') scope.usesInput = true;
      else if (!scope.unscoped.has(n.name) && varExists(n, parents)) scope.inputs.add(n.name);
      return false;
    }
    return true;
  });
}

function gatherLoopVars(e: Expr, parents: readonly Scope[], scope: Scope): void {
  traverse(e, (n) => {
    if (n.k === 'var' && n.name === 'input') {
      scope.usesInput = true;
      return false;
    }
    if (n.k === 'brack') gatherAssignedVars(n.index, false, parents, scope);
    return true;
  });
}

function gatherVars(e: Expr, canShadow: boolean, parents: readonly Scope[], scope: Scope): void {
  if (e.k === 'assign') {
    gatherAssignedVars(e.lhs, e.op === ':=', parents, scope);
    gatherAssignedVars(e.rhs, false, parents, scope);
  } else {
    gatherAssignedVars(e, canShadow, parents, scope);
  }
  gatherInputVars(e, parents, scope);
  gatherLoopVars(e, parents, scope);
}

type ComprExpr = Expr & { k: 'arrcompr' | 'setcompr' | 'objcompr' };

class Analyzer {
  private readonly scopes: Scope[] = [];
  readonly schedules = new Map<Query, { order: number[]; scope: Scope }>();
  private modulePath = '';

  constructor(
    private readonly extraArg: (call: Expr, modulePath: string) => Expr | undefined,
    private readonly packageScopes: Map<string, Scope>,
  ) {}

  analyzeModule(m: Module, mpath: string): void {
    this.modulePath = mpath;
    this.scopes.push(this.packageScopes.get(mpath)!);
    for (const r of m.rules) this.analyzeRule(r);
    this.scopes.pop();
  }

  analyzeSnippet(q: Query): void {
    this.modulePath = 'data.__internal_query_module';
    this.analyzeQuery(undefined, undefined, q, new Scope());
  }

  private analyzeRule(r: Rule): void {
    if (r.k === 'default') {
      this.analyzeValueExpr(r.value);
      return;
    }
    const head = r.head;
    const scope = new Scope();
    let key: Expr | undefined;
    let value: Expr | undefined;
    if (head.k === 'compr') value = head.assign?.value;
    else if (head.k === 'set') key = head.key;
    else {
      for (const a of head.args) {
        traverse(a, (n) => {
          if (n.k === 'var') scope.unscoped.add(n.name);
          return true;
        });
      }
      value = head.assign?.value;
    }
    this.scopes.push(scope);
    for (const b of r.bodies) this.analyzeQuery(key, value, b.query, new Scope());
    if (r.bodies.length === 0 && value !== undefined) this.analyzeValueExpr(value);
    this.scopes.pop();
  }

  private analyzeValueExpr(e: Expr): void {
    const comprs: ComprExpr[] = [];
    traverse(e, (n) => {
      if (n.k === 'arrcompr' || n.k === 'setcompr' || n.k === 'objcompr') {
        comprs.push(n);
        return false;
      }
      return true;
    });
    for (const c of comprs) {
      if (c.k === 'objcompr') this.analyzeQuery(c.key, c.value, c.query, new Scope());
      else this.analyzeQuery(undefined, c.term, c.query, new Scope());
    }
  }

  private gatherLocalVars(key: Expr | undefined, value: Expr | undefined, q: Query, scope: Scope): void {
    const parents = this.scopes;
    for (const stmt of q.stmts) {
      for (const w of stmt.withs) {
        gatherInputVars(w.as, parents, scope);
        gatherLoopVars(w.as, parents, scope);
      }
      const lit = stmt.lit;
      switch (lit.k) {
        case 'somevars':
          for (const v of lit.vars) scope.locals.set(v.name, v.loc);
          break;
        case 'somein':
          if (lit.key) gatherVars(lit.key, true, parents, scope);
          gatherVars(lit.value, true, parents, scope);
          gatherInputVars(lit.collection, parents, scope);
          gatherLoopVars(lit.collection, parents, scope);
          break;
        case 'expr':
        case 'not':
          if (lit.expr.k === 'assign') {
            gatherVars(lit.expr, false, parents, scope);
          } else {
            gatherInputVars(lit.expr, parents, scope);
            gatherLoopVars(lit.expr, parents, scope);
            const ea = this.extraArg(lit.expr, this.modulePath);
            if (ea) gatherVars(ea, false, parents, scope);
          }
          break;
        case 'every':
          gatherInputVars(lit.domain, parents, scope);
          gatherLoopVars(lit.domain, parents, scope);
          break;
      }
    }
    if (key) gatherVars(key, false, parents, scope);
    if (value) gatherVars(value, false, parents, scope);
    for (const v of scope.locals.keys()) {
      scope.inputs.delete(v);
      scope.unscoped.delete(v);
    }
  }

  private gatherUsed(
    e: Expr,
    scope: Scope,
    firstUse: Map<string, Loc>,
    defs: Definition[],
    assigned: ReadonlySet<string> | undefined,
  ): { used: string[]; comprs: ComprExpr[] } {
    const used: string[] = [];
    const comprs: ComprExpr[] = [];
    traverse(e, (n) => {
      switch (n.k) {
        case 'var': {
          const name = n.name;
          if (name === '_' || name === 'data') return false;
          if (name === 'input') {
            scope.usesInput = true;
            return false;
          }
          if (scope.locals.has(name) || scope.unscoped.has(name)) {
            if (!assigned?.has(name)) {
              used.push(name);
              if (!firstUse.has(name)) firstUse.set(name, n.loc);
            }
          } else if (!scope.inputs.has(name)) {
            throw fail(n.loc, `use of undefined variable \`${name}\` is unsafe`);
          }
          return false;
        }
        case 'brack': {
          const refr = n.refr;
          traverse(n.index, (x) => {
            if (x.k === 'var') {
              if (scope.locals.has(x.name) || scope.unscoped.has(x.name)) {
                const inner = this.gatherUsed(refr, scope, firstUse, defs, assigned);
                defs.push({ v: x.name, used: [...inner.used] });
                used.push(...inner.used, x.name);
                comprs.push(...inner.comprs);
              }
              return false;
            }
            return x.k === 'array' || x.k === 'object';
          });
          return true;
        }
        case 'arrcompr':
        case 'setcompr':
        case 'objcompr':
          comprs.push(n);
          return false;
        default:
          return true;
      }
    });
    return { used, comprs };
  }

  private processComprs(
    comprs: readonly ComprExpr[],
    scope: Scope,
    firstUse: Map<string, Loc>,
    used: string[],
  ): void {
    if (comprs.length === 0) return;
    this.scopes.push(scope.clone());
    for (const c of comprs) {
      if (c.k === 'objcompr') this.analyzeQuery(c.key, c.value, c.query, new Scope());
      else this.analyzeQuery(undefined, c.term, c.query, new Scope());
      const cs = this.schedules.get(c.query)?.scope;
      if (!cs) continue;
      if (cs.usesInput) scope.usesInput = true;
      for (const iv of cs.inputs) {
        if (scope.locals.has(iv) || scope.unscoped.has(iv)) {
          if (!firstUse.has(iv)) firstUse.set(iv, c.loc);
          used.push(iv);
        } else {
          scope.inputs.add(iv);
        }
      }
    }
    this.scopes.pop();
  }

  private assignedVarsOf(
    e: Expr,
    scope: Scope,
    checkFirstUse: boolean,
    firstUse: Map<string, Loc>,
  ): string[] {
    const vars: string[] = [];
    traverse(e, (n) => {
      if (n.k === 'var') {
        if (scope.locals.has(n.name)) {
          if (checkFirstUse) checkFirst(n, firstUse);
          vars.push(n.name);
        } else if (scope.unscoped.has(n.name)) {
          vars.push(n.name);
        }
        return false;
      }
      return n.k === 'array' || n.k === 'object';
    });
    return vars;
  }

  private processAssign(
    op: string,
    lhs: Expr,
    rhs: Expr,
    scope: Scope,
    firstUse: Map<string, Loc>,
    defs: Definition[],
    withUsed: readonly string[],
    withComprs: readonly ComprExpr[],
  ): void {
    if (lhs.k === 'array' && rhs.k === 'array') {
      if (lhs.items.length !== rhs.items.length) throw fail(rhs.loc, 'mismatch in number of array elements');
      for (let i = 0; i < lhs.items.length; i++) {
        this.processAssign(op, lhs.items[i]!, rhs.items[i]!, scope, firstUse, defs, withUsed, withComprs);
      }
      return;
    }
    const side = (from: Expr, to: Expr, checkFirstUse: boolean): void => {
      const g = this.gatherUsed(from, scope, firstUse, defs, undefined);
      const used = [...g.used, ...withUsed];
      this.processComprs([...g.comprs, ...withComprs], scope, firstUse, used);
      const assigned = this.assignedVarsOf(to, scope, checkFirstUse, firstUse);
      for (const v of assigned) defs.push({ v, used: used.filter((u) => u !== v) });
      if (assigned.length === 0) defs.push({ v: '', used });
    };
    side(rhs, lhs, op === ':=');
    side(lhs, rhs, false);
  }

  private processExpr(
    e: Expr,
    scope: Scope,
    firstUse: Map<string, Loc>,
    defs: Definition[],
    withUsed: readonly string[],
    withComprs: readonly ComprExpr[],
  ): void {
    if (e.k === 'assign') {
      this.processAssign(e.op, e.lhs, e.rhs, scope, firstUse, defs, withUsed, withComprs);
      return;
    }
    const g = this.gatherUsed(e, scope, firstUse, defs, undefined);
    const used = [...g.used, ...withUsed];
    this.processComprs([...g.comprs, ...withComprs], scope, firstUse, used);
    defs.push({ v: '', used });
  }

  analyzeQuery(key: Expr | undefined, value: Expr | undefined, q: Query, scope: Scope): void {
    this.gatherLocalVars(key, value, q, scope);
    const infos: Definition[][] = [];
    const firstUse = new Map<string, Loc>();
    for (const stmt of q.stmts) {
      const defs: Definition[] = [];
      const withUsed: string[] = [];
      const withComprs: ComprExpr[] = [];
      for (const w of stmt.withs) {
        // `with f as g` may name a function or builtin rather than a value.
        if (isUnknownPath(w.as, scope)) continue;
        const g = this.gatherUsed(w.as, scope, firstUse, defs, undefined);
        withUsed.push(...g.used);
        withComprs.push(...g.comprs);
      }
      const lit = stmt.lit;
      switch (lit.k) {
        case 'somevars':
          for (const v of lit.vars) checkFirst(v, firstUse);
          break;
        case 'somein': {
          const someVars: VarExpr[] = [];
          const nonVars: Expr[] = [];
          const gatherSome = (e: Expr): void =>
            traverse(e, (n) => {
              if (n.k === 'var' && n.name === 'input') return false;
              if (n.k === 'var' && scope.locals.has(n.name)) {
                someVars.push(n);
                return false;
              }
              if (n.k === 'array' || n.k === 'object') return true;
              nonVars.push(n);
              return false;
            });
          if (lit.key) gatherSome(lit.key);
          gatherSome(lit.value);
          const colDefs: Definition[] = [];
          const g = this.gatherUsed(lit.collection, scope, firstUse, colDefs, undefined);
          const colUsed = [...g.used, ...withUsed];
          defs.push(...colDefs);
          this.processComprs([...g.comprs, ...withComprs], scope, firstUse, colUsed);
          for (const v of someVars) defs.push({ v: v.name, used: [...colUsed] });
          for (const v of someVars) if (!firstUse.has(v.name)) firstUse.set(v.name, v.loc);
          const used: string[] = [];
          for (const e of nonVars) {
            const d: Definition[] = [];
            const g2 = this.gatherUsed(e, scope, firstUse, d, undefined);
            used.push(...g2.used, ...withUsed);
            this.processComprs([...g2.comprs, ...withComprs], scope, firstUse, used);
          }
          defs.push({ v: '', used });
          break;
        }
        case 'expr': {
          const ea = this.extraArg(lit.expr, this.modulePath);
          if (ea) {
            const extras = new Scope();
            gatherAssignedVars(ea, false, this.scopes, extras);
            for (const v of extras.unscoped) scope.unscoped.add(v);
            const g = this.gatherUsed(lit.expr, scope, firstUse, defs, extras.unscoped);
            const used = [...g.used, ...withUsed];
            this.processComprs([...g.comprs, ...withComprs], scope, firstUse, used);
            if (extras.unscoped.size > 0) {
              for (const v of extras.unscoped) defs.push({ v, used: [...used] });
            } else {
              defs.push({ v: '', used });
            }
          } else {
            this.processExpr(lit.expr, scope, firstUse, defs, withUsed, withComprs);
          }
          break;
        }
        case 'not':
          this.processExpr(lit.expr, scope, firstUse, defs, withUsed, withComprs);
          break;
        case 'every': {
          const g = this.gatherUsed(lit.domain, scope, firstUse, defs, undefined);
          const used = [...g.used, ...withUsed];
          this.processComprs([...g.comprs, ...withComprs], scope, firstUse, used);
          defs.push({ v: '', used });
          this.scopes.push(scope.clone());
          const es = new Scope();
          if (lit.key) es.locals.set(lit.key.name, lit.key.loc);
          es.locals.set(lit.value.name, lit.value.loc);
          this.scopes.push(es);
          this.analyzeQuery(undefined, undefined, lit.query, new Scope());
          this.scopes.pop();
          this.scopes.pop();
          break;
        }
      }
      if (defs.length === 0) defs.push({ v: '', used: [] });
      infos.push(defs);
    }
    const order = schedule(infos);
    this.schedules.set(q, { order, scope: scope.clone() });
    if (scope.usesInput && this.scopes.length > 0) this.scopes[this.scopes.length - 1]!.usesInput = true;
  }
}

/** A var or dotted path whose root is neither a local, an input nor a package name. */
function isUnknownPath(e: Expr, scope: Scope): boolean {
  const root = rootVar(e);
  if (root === undefined || refComponents(e) === undefined) return false;
  const n = root.name;
  return !(
    scope.locals.has(n) ||
    scope.unscoped.has(n) ||
    scope.inputs.has(n) ||
    n === 'input' ||
    n === 'data'
  );
}

function checkFirst(v: VarExpr, firstUse: Map<string, Loc>): void {
  const u = firstUse.get(v.name);
  if (u !== undefined && (u.line < v.loc.line || (u.line === v.loc.line && u.col < v.loc.col))) {
    throw fail(u, `var \`${v.name}\` used before definition below`);
  }
}

/**
 * Orders statements so that every variable is defined before it is used. Statements are first taken in
 * written order while their inputs are available; the rest are placed by variable, as regorus does.
 */
export function schedule(infos: readonly (readonly Definition[])[]): number[] {
  const n = infos.length;
  const defining = new Map<string, number[]>();
  for (let i = 0; i < n; i++) {
    for (const d of infos[i]!) {
      const l = getOrCreate(defining, d.v, () => []);
      l.push(i);
    }
  }
  const order: number[] = [];
  const defined = new Set<string>();
  const scheduled = new Array<boolean>(n).fill(false);

  const scheduleStmt = (i: number): boolean | undefined => {
    if (scheduled[i]) return undefined;
    const defs = infos[i]!;
    let ok: boolean;
    if (defs.length === 1) {
      ok = defs[0]!.used.every((u) => defined.has(u));
    } else {
      const inStmt = new Set<string>();
      let queue = [...defs];
      for (;;) {
        const next: Definition[] = [];
        for (const d of queue) {
          if (d.used.every((u) => defined.has(u) || inStmt.has(u))) inStmt.add(d.v);
          else next.push(d);
        }
        if (next.length === queue.length) {
          queue = next;
          break;
        }
        queue = next;
        if (queue.length === 0) break;
      }
      ok = queue.length === 0;
    }
    if (!ok) return false;
    order.push(i);
    scheduled[i] = true;
    for (const d of defs) defined.add(d.v);
    return true;
  };

  const processVar = (v: string): [boolean, boolean] => {
    let stmtScheduled = false;
    let reprocess = false;
    for (const i of defining.get(v) ?? []) {
      const r = scheduleStmt(i);
      if (r === true) stmtScheduled = true;
      else if (r === false) reprocess = true;
    }
    return [stmtScheduled, reprocess];
  };

  processVar('');
  // Variables are visited in code-point order of their names, as regorus' ordered maps do.
  let toProcess = [...defining.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  let done = false;
  let guard = 0;
  while (!done && guard++ < n + 2) {
    done = true;
    const current = toProcess;
    toProcess = [];
    for (const v of current) {
      const [s, r] = processVar(v);
      if (s) {
        done = false;
        processVar('');
      }
      if (r) toProcess.push(v);
    }
  }
  if (order.length !== n) return Array.from({ length: n }, (_, i) => i);
  return order;
}

// ---------------------------------------------------------------------------------------------------------
// Loop hoisting and binding plans

class ScopeContext {
  bound = new Set<string>();
  currentScopeBound = new Set<string>();
  unbound = new Set<string>();

  constructor(readonly globals: ReadonlySet<string>) {}

  child(): ScopeContext {
    const c = new ScopeContext(this.globals);
    c.bound = new Set(this.bound);
    c.unbound = new Set(this.unbound);
    return c;
  }

  clone(): ScopeContext {
    const c = this.child();
    c.currentScopeBound = new Set(this.currentScopeBound);
    return c;
  }

  bind(v: string): void {
    if (v === '_') return;
    this.bound.add(v);
    this.currentScopeBound.add(v);
    this.unbound.delete(v);
  }

  markUnbound(v: string): void {
    if (v === '_') return;
    this.bound.delete(v);
    this.currentScopeBound.delete(v);
    this.unbound.add(v);
  }

  /** Whether `v` may be bound by a pattern; `respectParent` false allows shadowing. */
  isUnbound(v: string, respectParent: boolean, extra?: ReadonlySet<string>): boolean {
    if (v === '_') return false;
    if (extra?.has(v)) return false;
    if (this.unbound.has(v)) return true;
    if (!respectParent) return true;
    if (this.globals.has(v)) return false;
    return !this.bound.has(v);
  }

  shouldHoist(v: string): boolean {
    if (v === '_') return true;
    if (this.globals.has(v)) return false;
    if (this.unbound.has(v)) return true;
    return !this.bound.has(v);
  }
}

function literalKey(e: Expr): Value | undefined {
  return isScalar(e) ? scalarValue(e) : undefined;
}

function destructure(
  e: Expr,
  ctx: ScopeContext,
  respectParent: boolean,
  newlyBound: Set<string>,
): DestructuringPlan | undefined {
  switch (e.k) {
    case 'var': {
      const { name } = e;
      if (name === '_') return { t: 'ignore' };
      if (ctx.isUnbound(name, respectParent, newlyBound)) {
        newlyBound.add(name);
        return { t: 'var', name };
      }
      return { t: 'eqExpr', expr: e };
    }
    case 'str':
    case 'num':
    case 'bool':
    case 'null':
      return { t: 'eqValue', value: scalarValue(e)! };
    case 'array': {
      const elems: DestructuringPlan[] = [];
      for (const i of e.items) {
        const p = destructure(i, ctx, respectParent, newlyBound);
        if (!p) return undefined;
        elems.push(p);
      }
      return { t: 'array', elems };
    }
    case 'object': {
      const fields: [Value, DestructuringPlan][] = [];
      const dynamic: [Expr, DestructuringPlan][] = [];
      for (const [k, v] of e.fields) {
        const p = destructure(v, ctx, respectParent, newlyBound);
        if (!p) return undefined;
        const lk = literalKey(k);
        if (lk !== undefined) {
          const key = keyOf(lk);
          const i = fields.findIndex(([fk]) => keyOf(fk) === key);
          if (i >= 0) fields[i] = [lk, p];
          else fields.push([lk, p]);
        } else dynamic.push([k, p]);
      }
      return { t: 'object', fields, dynamic };
    }
    default:
      return { t: 'eqExpr', expr: e };
  }
}

function onlyIfBinds(p: DestructuringPlan | undefined): DestructuringPlan | undefined {
  return p && (introducesBinding(p) || containsWildcards(p)) ? p : undefined;
}

function patternVars(e: Expr, out: VarExpr[]): void {
  switch (e.k) {
    case 'var':
      if (e.name !== '_' && e.name !== 'input' && e.name !== 'data') out.push(e);
      return;
    case 'array':
    case 'set':
      for (const i of e.items) patternVars(i, out);
      return;
    case 'object':
      for (const [, v] of e.fields) patternVars(v, out);
      return;
    default:
      return;
  }
}

function validatePatternBindings(e: Expr, newlyBound: ReadonlySet<string>, ctx: ScopeContext): void {
  const vars: VarExpr[] = [];
  patternVars(e, vars);
  for (const v of vars) {
    if (newlyBound.has(v.name)) continue;
    if (!ctx.isUnbound(v.name, true)) throw fail(v.loc, `var \`${v.name}\` used before definition below`);
  }
}

function formatKey(v: Value): string {
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}

type Structure = 'match' | 'unknown' | RegoParseError;

function checkLiteralStructure(plan: DestructuringPlan, e: Expr): Structure {
  if (plan.t === 'array' && e.k === 'array') {
    if (e.items.length !== plan.elems.length) return fail(e.loc, 'mismatch in number of array elements');
    for (let i = 0; i < plan.elems.length; i++) {
      const r = checkLiteralStructure(plan.elems[i]!, e.items[i]!);
      if (r !== 'match') return r;
    }
    return 'match';
  }
  if (plan.t === 'object' && e.k === 'object') {
    if (plan.fields.length === 0 && plan.dynamic.length === 0) return 'match';
    if (plan.fields.length > 0) {
      const expected = plan.fields.map(([k]) => formatKey(k));
      const literal: [Value, Expr][] = [];
      const actual: string[] = [];
      for (const [k, v] of e.fields) {
        const lk = literalKey(k);
        if (lk !== undefined) {
          actual.push(formatKey(lk));
          literal.push([lk, v]);
        }
      }
      const es = [...expected].sort();
      const as = [...actual].sort();
      if (es.join('\u0000') !== as.join('\u0000')) {
        return fail(
          e.loc,
          `object literal keys mismatch. Expected keys [${expected.join(', ')}] got [${actual.join(', ')}].`,
        );
      }
      for (const [k, v] of literal) {
        const fp = plan.fields.find(([fk]) => keyOf(fk) === keyOf(k));
        if (fp) {
          const r = checkLiteralStructure(fp[1], v);
          if (r !== 'match') return r;
        }
      }
      if (plan.dynamic.length === 0) return 'match';
    }
    return 'unknown';
  }
  return 'unknown';
}

function ensureLiteralMatch(plan: DestructuringPlan, e: Expr): void {
  const r = checkLiteralStructure(plan, e);
  if (r instanceof RegoParseError) throw r;
}

function ensureStructuralCompat(lhs: Expr, rhs: Expr): void {
  if ((lhs.k === 'array' && rhs.k === 'object') || (lhs.k === 'object' && rhs.k === 'array')) {
    throw fail(
      lhs.loc,
      'incompatible destructuring patterns: both sides must be arrays or objects with matching structure',
    );
  }
}

function exprDependencies(e: Expr): Set<string> | undefined {
  const deps = new Set<string>();
  let valid = true;
  traverse(e, (n) => {
    if (n.k === 'var') {
      if (n.name !== '_') deps.add(n.name);
      return false;
    }
    if (n.k === 'arrcompr' || n.k === 'setcompr' || n.k === 'objcompr') {
      valid = false;
      return false;
    }
    return true;
  });
  return valid ? deps : undefined;
}

function assignmentPlan(op: string, lhs: Expr, rhs: Expr, ctx: ScopeContext, loc: Loc): AssignmentPlan {
  if (op === ':=') {
    const lhsPlan = onlyIfBinds(destructure(lhs, ctx, false, new Set()));
    if (!lhsPlan)
      throw fail(lhs.loc, 'assignment operator := requires left-hand side to have bindable variables');
    const seen = new Set<string>();
    const vars: string[] = [];
    destructVars(lhsPlan, vars);
    for (const v of vars) {
      if (seen.has(v) || ctx.currentScopeBound.has(v)) {
        const ve = findVar(lhs, v) ?? lhs;
        throw fail(ve.loc, `var \`${v}\` used before definition below`);
      }
      seen.add(v);
    }
    ensureStructuralCompat(lhs, rhs);
    ensureLiteralMatch(lhsPlan, rhs);
    return { t: 'colonEq', rhs, lhsPlan };
  }
  const lhsStruct = destructure(lhs, ctx, true, new Set());
  const rhsStruct = destructure(rhs, ctx, true, new Set());
  const lhsPlan = onlyIfBinds(lhsStruct);
  const rhsPlan = onlyIfBinds(rhsStruct);
  const lw = lhs.k === 'var' && lhs.name === '_';
  const rw = rhs.k === 'var' && rhs.name === '_';
  if (lw || rw) return { t: 'wildcard', lhs, rhs, side: lw && rw ? 'both' : lw ? 'lhs' : 'rhs' };
  if (lhsPlan && rhsPlan) {
    const pairs: [Expr, DestructuringPlan][] = [];
    flattenPairs(lhs, rhs, ctx, new Set(), pairs);
    orderPairs(pairs, ctx);
    return { t: 'both', pairs };
  }
  if (!lhsPlan && !rhsPlan) return { t: 'eqCheck', lhs, rhs };
  if (lhsPlan) {
    ensureStructuralCompat(lhs, rhs);
    ensureLiteralMatch(lhsPlan, rhs);
    return { t: 'bindLeft', rhs, lhsPlan };
  }
  ensureStructuralCompat(rhs, lhs);
  ensureLiteralMatch(rhsPlan!, lhs);
  void loc;
  return { t: 'bindRight', lhs, rhsPlan: rhsPlan! };
}

function findVar(e: Expr, name: string): Expr | undefined {
  let found: Expr | undefined;
  traverse(e, (n) => {
    if (found) return false;
    if (n.k === 'var' && n.name === name) {
      found = n;
      return false;
    }
    return true;
  });
  return found;
}

function flattenPairs(
  lhs: Expr,
  rhs: Expr,
  ctx: ScopeContext,
  newlyBound: Set<string>,
  pairs: [Expr, DestructuringPlan][],
): void {
  const preview = (e: Expr): [DestructuringPlan | undefined, Set<string>] => {
    const scratch = new Set(newlyBound);
    const p = onlyIfBinds(destructure(e, ctx, true, scratch));
    const delta = new Set<string>();
    if (p) for (const v of scratch) if (!newlyBound.has(v)) delta.add(v);
    return [p, delta];
  };
  const [lp, ld] = preview(lhs);
  const [rp, rd] = preview(rhs);
  if (!lp && !rp) {
    pairs.push([rhs, { t: 'eqExpr', expr: lhs }]);
    return;
  }
  if ((lhs.k === 'array' && rhs.k === 'object') || (lhs.k === 'object' && rhs.k === 'array')) {
    throw fail(
      lhs.loc,
      'incompatible destructuring patterns: both sides must be arrays or objects with matching structure',
    );
  }
  if (lhs.k === 'array' && rhs.k === 'array') {
    if (lhs.items.length !== rhs.items.length) throw fail(lhs.loc, 'mismatch in number of array elements');
    for (let i = 0; i < lhs.items.length; i++)
      flattenPairs(lhs.items[i]!, rhs.items[i]!, ctx, newlyBound, pairs);
    return;
  }
  if (lhs.k === 'object' && rhs.k === 'object') {
    const lmap = new Map<string, Expr>();
    let allLiteral = true;
    for (const [k, v] of lhs.fields) {
      const lk = literalKey(k);
      if (lk === undefined) {
        allLiteral = false;
        break;
      }
      lmap.set(keyOf(lk), v);
    }
    if (allLiteral) {
      const objPairs: [Expr, Expr][] = [];
      let count = 0;
      let missing: [string, Loc] | undefined;
      for (const [k, v] of rhs.fields) {
        const lk = literalKey(k);
        if (lk === undefined) {
          allLiteral = false;
          break;
        }
        count++;
        const l = lmap.get(keyOf(lk));
        if (l) objPairs.push([l, v]);
        else missing ??= [formatKey(lk).replace(/^"|"$/g, ''), k.loc];
      }
      if (allLiteral) {
        if (count !== lmap.size) {
          throw fail(
            lhs.loc,
            `object field count mismatch in assignment: left has ${lmap.size} fields, right has ${count} fields`,
          );
        }
        if (missing)
          throw fail(
            missing[1],
            `key "${missing[0]}" not found in left-hand side object during destructuring`,
          );
        for (const [l, r] of objPairs) flattenPairs(l, r, ctx, newlyBound, pairs);
        return;
      }
    }
  }
  if (lp && !rp) {
    for (const v of ld) newlyBound.add(v);
    pairs.push([rhs, lp]);
  } else if (rp && !lp) {
    for (const v of rd) newlyBound.add(v);
    pairs.push([lhs, rp]);
  } else {
    throw fail(
      lhs.loc,
      'incompatible destructuring patterns: both sides must be arrays or objects with matching structure',
    );
  }
}

function orderPairs(pairs: [Expr, DestructuringPlan][], ctx: ScopeContext): void {
  if (pairs.length <= 1) return;
  const items = pairs.map(([e, p]) => {
    const binds: string[] = [];
    destructVars(p, binds);
    return { e, p, deps: exprDependencies(e), binds };
  });
  if (items.some((i) => i.deps === undefined)) return;
  const scheduled = new Set<string>();
  const out: [Expr, DestructuringPlan][] = [];
  let remaining = items;
  while (remaining.length > 0) {
    const idx = remaining.findIndex((i) =>
      [...i.deps!].every((v) => scheduled.has(v) || !ctx.isUnbound(v, true)),
    );
    if (idx < 0) {
      for (const i of remaining) out.push([i.e, i.p]);
      break;
    }
    const it = remaining[idx]!;
    remaining = remaining.filter((_, j) => j !== idx);
    for (const b of it.binds) scheduled.add(b);
    out.push([it.e, it.p]);
  }
  pairs.splice(0, pairs.length, ...out);
}

class Hoister {
  constructor(
    private readonly c: {
      schedules: Map<Query, readonly Stmt[]>;
      stmtLoops: Map<Stmt, readonly HoistedLoop[]>;
      exprLoops: Map<Expr, readonly HoistedLoop[]>;
      plans: Map<Expr, BindingPlan>;
    },
  ) {}

  private bindPlan(p: BindingPlan, ctx: ScopeContext): void {
    for (const v of planBoundVars(p)) ctx.bind(v);
  }

  populateRule(r: Rule, globals: ReadonlySet<string>): void {
    if (r.k === 'default') {
      this.outputExpr(r.value, new ScopeContext(globals));
      return;
    }
    const ctx = new ScopeContext(globals);
    const head = r.head;
    if (head.k === 'func') {
      for (const a of head.args) {
        const nb = new Set<string>();
        const plan = destructure(a, ctx, false, nb);
        if (!plan) throw fail(a.loc, 'failed to create parameter destructuring plan');
        validatePatternBindings(a, nb, ctx);
        const bp: BindingPlan = { t: 'param', plan };
        this.bindPlan(bp, ctx);
        this.c.plans.set(a, bp);
        if (a.k === 'var') ctx.bind(a.name);
      }
    }
    const [keyExpr, valueExpr] = headOutputs(head);
    for (const b of r.bodies) {
      const bodyCtx = ctx.child();
      bodyCtx.currentScopeBound = new Set(ctx.currentScopeBound);
      const populated = this.populateQuery(b.query, bodyCtx);
      if (keyExpr) this.outputExpr(keyExpr, populated);
      if (valueExpr) this.outputExpr(valueExpr, populated);
      if (b.assign) this.outputExpr(b.assign.value, populated);
    }
    if (r.bodies.length === 0) {
      if (keyExpr) this.outputExpr(keyExpr, ctx);
      if (valueExpr) this.outputExpr(valueExpr, ctx);
    }
  }

  populateQuery(q: Query, parent: ScopeContext): ScopeContext {
    const ctx = parent.clone();
    const stmts = this.c.schedules.get(q) ?? q.stmts;
    for (const s of stmts) {
      if (s.lit.k === 'somevars') for (const v of s.lit.vars) ctx.markUnbound(v.name);
      const loops: HoistedLoop[] = [];
      this.literal(s, ctx, loops);
      for (const w of s.withs) {
        this.expr(w.refr, ctx, loops);
        this.expr(w.as, ctx, loops);
      }
      this.c.stmtLoops.set(s, loops);
    }
    return ctx;
  }

  private literal(s: Stmt, ctx: ScopeContext, loops: HoistedLoop[]): void {
    const lit = s.lit;
    switch (lit.k) {
      case 'somein': {
        let keyPlan: DestructuringPlan | undefined;
        if (lit.key) {
          const nb = new Set<string>();
          keyPlan = destructure(lit.key, ctx, true, nb);
          if (keyPlan) validatePatternBindings(lit.key, nb, ctx);
        }
        const nbv = new Set<string>();
        const valuePlan = destructure(lit.value, ctx, true, nbv);
        if (!valuePlan) throw fail(lit.value.loc, 'failed to create some-in value destructuring plan');
        validatePatternBindings(lit.value, nbv, ctx);
        if (lit.collection.k === 'array') {
          let found = false;
          let unknown = false;
          let err: RegoParseError | undefined;
          for (const item of lit.collection.items) {
            const r = checkLiteralStructure(valuePlan, item);
            if (r === 'match') found = true;
            else if (r === 'unknown') unknown = true;
            else err ??= r;
          }
          if (!found && !unknown && err) throw err;
        }
        const bp: BindingPlan = { t: 'somein', keyPlan, valuePlan };
        this.bindPlan(bp, ctx);
        this.c.plans.set(lit.collection, bp);
        if (lit.key) this.expr(lit.key, ctx, loops);
        this.expr(lit.value, ctx, loops);
        this.expr(lit.collection, ctx, loops);
        return;
      }
      case 'expr':
      case 'not':
        this.expr(lit.expr, ctx, loops);
        return;
      case 'every': {
        this.expr(lit.domain, ctx, loops);
        this.populateQuery(lit.query, ctx.child());
        return;
      }
      default:
        return;
    }
  }

  private expr(e: Expr, ctx: ScopeContext, loops: HoistedLoop[]): void {
    switch (e.k) {
      case 'array':
      case 'set':
        for (const i of e.items) this.expr(i, ctx, loops);
        return;
      case 'object':
        for (const [k, v] of e.fields) {
          this.expr(k, ctx, loops);
          this.expr(v, ctx, loops);
        }
        return;
      case 'arrcompr':
      case 'setcompr': {
        const populated = this.populateQuery(e.query, ctx.child());
        this.outputExpr(e.term, populated);
        return;
      }
      case 'objcompr': {
        const populated = this.populateQuery(e.query, ctx.child());
        this.outputExpr(e.key, populated);
        this.outputExpr(e.value, populated);
        return;
      }
      case 'call': {
        this.expr(e.fcn, ctx, loops);
        for (const p of e.params) this.expr(p, ctx, loops);
        if (e.fcn.k === 'var' && e.fcn.name === 'walk') {
          loops.push({ loopExpr: e, key: undefined, collection: e, walk: true });
        }
        const last = e.params[e.params.length - 1];
        if (last) {
          const plan = destructure(last, ctx, true, new Set());
          if (!plan) throw fail(last.loc, 'failed to create parameter destructuring plan');
          const bp: BindingPlan = { t: 'param', plan };
          this.bindPlan(bp, ctx);
          this.c.plans.set(last, bp);
        }
        return;
      }
      case 'neg':
        this.expr(e.expr, ctx, loops);
        return;
      case 'dot':
        this.expr(e.refr, ctx, loops);
        return;
      case 'brack':
        this.expr(e.refr, ctx, loops);
        this.expr(e.index, ctx, loops);
        if (containsUnbound(e.index, ctx)) {
          const plan = destructure(e.index, ctx, true, new Set());
          if (!plan) throw fail(e.index.loc, 'failed to create loop index destructuring plan');
          const bp: BindingPlan = { t: 'loopIndex', plan };
          this.bindPlan(bp, ctx);
          this.c.plans.set(e.index, bp);
          loops.push({ loopExpr: e, key: e.index, collection: e.refr, walk: false });
        }
        return;
      case 'setop':
      case 'cmp':
      case 'arith':
        this.expr(e.lhs, ctx, loops);
        this.expr(e.rhs, ctx, loops);
        return;
      case 'assign': {
        const plan = assignmentPlan(e.op, e.lhs, e.rhs, ctx, e.loc);
        const bp: BindingPlan = { t: 'assign', plan };
        this.bindPlan(bp, ctx);
        this.c.plans.set(e, bp);
        this.expr(e.lhs, ctx, loops);
        this.expr(e.rhs, ctx, loops);
        return;
      }
      case 'member':
        if (e.key) this.expr(e.key, ctx, loops);
        this.expr(e.value, ctx, loops);
        this.expr(e.collection, ctx, loops);
        return;
      default:
        return;
    }
  }

  outputExpr(e: Expr, ctx: ScopeContext): void {
    const loops: HoistedLoop[] = [];
    this.expr(e, ctx.clone(), loops);
    this.c.exprLoops.set(e, loops);
  }
}

function containsUnbound(e: Expr, ctx: ScopeContext): boolean {
  switch (e.k) {
    case 'var':
      return ctx.shouldHoist(e.name);
    case 'array':
    case 'set':
      return e.items.some((i) => containsUnbound(i, ctx));
    case 'object':
      return e.fields.some(([, v]) => containsUnbound(v, ctx));
    default:
      return false;
  }
}

/** Key and value expressions evaluated after a rule body succeeds. */
export function headOutputs(head: RuleHead): [Expr | undefined, Expr | undefined] {
  switch (head.k) {
    case 'compr':
      return [head.refr.k === 'brack' ? head.refr.index : undefined, head.assign?.value];
    case 'set':
      return [undefined, head.key];
    case 'func':
      return [undefined, head.assign?.value];
  }
}

// ---------------------------------------------------------------------------------------------------------
// Entry points

export interface CompileOptions {
  readonly builtins: BuiltinArities;
  /** Names callable besides BUILTINS and user functions (host builtins, evaluator-provided ones). */
  readonly extraCallables: ReadonlySet<string>;
  /** Builtins removed in Rego v1: calling one from a v1 module is an error. */
  readonly deprecated: ReadonlySet<string>;
  /** OPA builtins this engine does not implement: calling one is an error naming it. */
  readonly unsupported: ReadonlySet<string>;
  /** Unsupported builtins that `with` modifiers of the loaded modules replace. */
  readonly mocked?: ReadonlySet<string>;
  /** Whether user queries are Rego v1. */
  readonly queryV1: boolean;
}

/** Resolves the function or builtin a call refers to, as `data.pkg.f`, a builtin name, or undefined. */
export function makeExtraArg(
  functions: Map<string, FunctionEntry>,
  builtins: BuiltinArities,
): (call: Expr, modulePath: string) => Expr | undefined {
  return (call, modulePath) => {
    if (call.k !== 'call') return undefined;
    let n: number | undefined;
    const full = pathString(call.fcn, modulePath);
    if (full !== undefined) n = functions.get(full)?.arity;
    if (n === undefined) {
      const p = pathString(call.fcn);
      if (p !== undefined) n = functions.get(p)?.arity ?? builtins.get(p);
    }
    if (n === undefined || n < 0) return undefined;
    return n + 1 === call.params.length ? call.params[call.params.length - 1] : undefined;
  };
}

function moduleGlobals(
  modules: readonly Module[],
  modulePath: Map<Module, string>,
): Map<Module, Set<string>> {
  const byPkg = new Map<string, Set<string>>();
  for (const m of modules) {
    const p = modulePath.get(m)!;
    const s = getOrCreate(byPkg, p, () => new Set());
    for (const r of m.rules) {
      const rv = rootVar(ruleRefr(r));
      if (rv) s.add(rv.name);
    }
  }
  const out = new Map<Module, Set<string>>();
  for (const m of modules) {
    const g = new Set(byPkg.get(modulePath.get(m)!));
    for (const imp of m.imports) {
      const alias = importAlias(imp.refr, imp.alias);
      if (alias) g.add(alias);
    }
    g.add('input');
    g.add('data');
    out.set(m, g);
  }
  return out;
}

function importAlias(refr: Expr, alias: string | undefined): string | undefined {
  if (alias) return alias;
  if (refr.k === 'dot') return refr.field;
  if (refr.k === 'brack' && refr.index.k === 'str') return refr.index.v;
  if (refr.k === 'var') return refr.name;
  return undefined;
}

export function compile(modules: readonly Module[], opts: CompileOptions): CompiledPolicy {
  const t = buildTables(modules, opts.builtins);
  const extraArg = makeExtraArg(t.functions, opts.builtins);
  const packageScopes = new Map<string, Scope>();
  for (const m of modules) {
    const p = t.modulePath.get(m)!;
    const s = getOrCreate(packageScopes, p, () => new Scope());
    for (const r of m.rules) {
      const rv = rootVar(ruleRefr(r));
      if (rv) s.unscoped.add(rv.name);
    }
    for (const imp of m.imports) {
      const alias = importAlias(imp.refr, imp.alias);
      if (alias) s.unscoped.add(alias);
    }
  }
  const analyzer = new Analyzer(extraArg, packageScopes);
  for (const m of modules) analyzer.analyzeModule(m, t.modulePath.get(m)!);
  const schedules = new Map<Query, readonly Stmt[]>();
  for (const [q, s] of analyzer.schedules)
    schedules.set(
      q,
      s.order.map((i) => q.stmts[i]!),
    );

  const compiled: CompiledPolicy = {
    modules,
    ...t,
    schedules,
    stmtLoops: new Map(),
    exprLoops: new Map(),
    plans: new Map(),
    extraArgs: new Map(),
    callTargets: new Map(),
  };
  const hoister = new Hoister(compiled);
  const globals = moduleGlobals(modules, t.modulePath);
  for (const m of modules) for (const r of m.rules) hoister.populateRule(r, globals.get(m)!);
  for (const m of modules) checkCalls(m, compiled, opts, extraArg);
  return compiled;
}

/** A map that reads through to a base map; writes stay in the overlay. */
class OverlayMap<K, V> extends Map<K, V> {
  constructor(private readonly base: Map<K, V>) {
    super();
  }
  override get(k: K): V | undefined {
    const v = super.get(k);
    return v !== undefined ? v : this.base.get(k);
  }
  override has(k: K): boolean {
    return super.has(k) || this.base.has(k);
  }
}

/**
 * Prepares a user query against compiled modules; the query is treated as a module of its own. Returns a
 * view of the compiled policy with the query's plans, leaving the shared policy untouched.
 */
export function compileQuery(q: Query, base: CompiledPolicy, opts: CompileOptions): CompiledPolicy {
  const compiled: CompiledPolicy = {
    ...base,
    schedules: new OverlayMap(base.schedules),
    stmtLoops: new OverlayMap(base.stmtLoops),
    exprLoops: new OverlayMap(base.exprLoops),
    plans: new OverlayMap(base.plans),
    extraArgs: new OverlayMap(base.extraArgs),
    callTargets: new OverlayMap(base.callTargets),
  };
  const extraArg = makeExtraArg(compiled.functions, opts.builtins);
  const analyzer = new Analyzer(extraArg, new Map());
  analyzer.analyzeSnippet(q);
  for (const [qq, s] of analyzer.schedules)
    compiled.schedules.set(
      qq,
      s.order.map((i) => qq.stmts[i]!),
    );
  const hoister = new Hoister(compiled);
  hoister.populateQuery(q, new ScopeContext(new Set(['input', 'data'])));
  checkQueryCalls(q, compiled, opts, extraArg, 'data.__internal_query_module', undefined);
  return compiled;
}

// ---------------------------------------------------------------------------------------------------------
// Call resolution checks: an unknown function is a load-time error, never a silent undefined.

const EVALUATOR_CALLABLES = new Set(['print', 'walk', 'trace']);

function checkCalls(
  m: Module,
  c: CompiledPolicy,
  opts: CompileOptions,
  extraArg: (call: Expr, modulePath: string) => Expr | undefined,
): void {
  const mpath = c.modulePath.get(m)!;
  for (const r of m.rules) {
    const visit = (e: Expr): void => checkExprCalls(e, c, opts, extraArg, mpath, m);
    if (r.k === 'default') {
      visit(r.value);
      continue;
    }
    const h = r.head;
    if (h.k === 'compr') {
      visit(h.refr);
      if (h.assign) visit(h.assign.value);
    } else if (h.k === 'set') {
      if (h.key) visit(h.key);
    } else if (h.assign) visit(h.assign.value);
    for (const b of r.bodies) {
      if (b.assign) visit(b.assign.value);
      checkQueryCalls(b.query, c, opts, extraArg, mpath, m);
    }
  }
}

function checkQueryCalls(
  q: Query,
  c: CompiledPolicy,
  opts: CompileOptions,
  extraArg: (call: Expr, modulePath: string) => Expr | undefined,
  mpath: string,
  m: Module | undefined,
): void {
  for (const s of q.stmts) {
    const visit = (e: Expr): void => checkExprCalls(e, c, opts, extraArg, mpath, m);
    const lit = s.lit;
    switch (lit.k) {
      case 'somein':
        if (lit.key) visit(lit.key);
        visit(lit.value);
        visit(lit.collection);
        break;
      case 'expr':
      case 'not':
        checkExprCalls(lit.expr, c, opts, extraArg, mpath, m, lit.expr.k === 'call' ? lit.expr : undefined);
        break;
      case 'every':
        visit(lit.domain);
        checkQueryCalls(lit.query, c, opts, extraArg, mpath, m);
        break;
      default:
        break;
    }
    for (const w of s.withs) visit(w.as);
  }
}

function checkExprCalls(
  e: Expr,
  c: CompiledPolicy,
  opts: CompileOptions,
  extraArg: (call: Expr, modulePath: string) => Expr | undefined,
  mpath: string,
  m: Module | undefined,
  stmtCall?: CallExpr,
): void {
  const visit = (x: Expr): boolean => {
    switch (x.k) {
      case 'arrcompr':
      case 'setcompr':
        visit(x.term);
        checkQueryCalls(x.query, c, opts, extraArg, mpath, m);
        return false;
      case 'objcompr':
        visit(x.key);
        visit(x.value);
        checkQueryCalls(x.query, c, opts, extraArg, mpath, m);
        return false;
      case 'call': {
        c.extraArgs.set(x, extraArg(x, mpath));
        resolveCall(x, c, opts, mpath, m, x === stmtCall);
        for (const p of x.params) traverseCalls(p, visit);
        return false;
      }
      default:
        return true;
    }
  };
  traverseCalls(e, visit);
}

function traverseCalls(e: Expr, f: (e: Expr) => boolean): void {
  traverse(e, f);
}

function resolveCall(
  x: CallExpr,
  c: CompiledPolicy,
  opts: CompileOptions,
  mpath: string,
  m: Module | undefined,
  allowOutputArg: boolean,
): void {
  const p = pathString(x.fcn);
  if (p === undefined) throw fail(x.loc, 'invalid function expression');
  const checkArity = (name: string, arity: number): void => {
    if (arity < 0) return;
    const n = x.params.length;
    if (n === arity || (allowOutputArg && n === arity + 1)) return;
    throw fail(x.loc, `\`${name}\` expects ${arity} argument${arity === 1 ? '' : 's'}`);
  };
  const full = pathString(x.fcn, mpath)!;
  const fn = c.functions.get(full) ?? c.functions.get(p);
  if (fn) {
    checkArity(p, fn.arity);
    return;
  }
  if (c.defaultRules.has(full) || c.defaultRules.has(p)) return;
  // Import aliases: `alias.f(x)` → `data.a.b.f`.
  if (m !== undefined && !p.startsWith('data.')) {
    const dot = p.indexOf('.');
    const alias = dot < 0 ? p : p.slice(0, dot);
    const target = c.imports.get(`${mpath}.${alias}`);
    if (target) {
      const tp = pathString(target);
      const resolved = dot < 0 ? tp : `${tp}.${p.slice(dot + 1)}`;
      if (resolved !== undefined && (c.functions.has(resolved) || c.defaultRules.has(resolved))) return;
    }
  }
  const arity = opts.builtins.get(p);
  const v1 = m ? m.regoV1 : opts.queryV1;
  if (arity !== undefined && !(v1 && opts.deprecated.has(p))) {
    checkArity(p, arity);
    return;
  }
  if (EVALUATOR_CALLABLES.has(p) || opts.extraCallables.has(p)) return;
  if (opts.unsupported.has(p)) {
    // Allowed when a `with` modifier replaces it; unreplaced calls then fail when evaluated.
    if (opts.mocked?.has(p)) return;
    throw fail(x.loc, `builtin ${p} is not supported by this engine`);
  }
  throw fail(x.loc, `could not find function ${p}`);
}

/**
 * Calls in a module whose name is in `names` and that no function of the module's package defines.
 * `withTargets`, when given, receives the targets of the module's `with` modifiers.
 */
export function callsNamed(m: Module, names: ReadonlySet<string>, withTargets?: Set<string>): CallExpr[] {
  const defined = new Set<string>();
  for (const r of m.rules)
    if (r.k === 'spec' && r.head.k === 'func') defined.add(pathString(r.head.refr) ?? '');
  const out: CallExpr[] = [];
  const visitQuery = (q: Query): void => {
    for (const st of q.stmts) {
      const lit = st.lit;
      if (lit.k === 'somein') {
        if (lit.key) visit(lit.key);
        visit(lit.value);
        visit(lit.collection);
      } else if (lit.k === 'expr' || lit.k === 'not') visit(lit.expr);
      else if (lit.k === 'every') {
        visit(lit.domain);
        visitQuery(lit.query);
      }
      for (const w of st.withs) {
        visit(w.as);
        const target = pathString(w.refr);
        if (target !== undefined) withTargets?.add(target);
      }
    }
  };
  const visit = (e: Expr): void =>
    traverse(e, (x) => {
      if (x.k === 'call') {
        const p = pathString(x.fcn);
        if (p !== undefined && names.has(p) && !defined.has(p)) out.push(x);
      } else if (x.k === 'arrcompr' || x.k === 'setcompr') {
        visit(x.term);
        visitQuery(x.query);
        return false;
      } else if (x.k === 'objcompr') {
        visit(x.key);
        visit(x.value);
        visitQuery(x.query);
        return false;
      }
      return true;
    });
  for (const r of m.rules) {
    if (r.k === 'default') {
      visit(r.value);
      continue;
    }
    const h = r.head;
    visit(h.refr);
    if (h.k === 'set' && h.key) visit(h.key);
    if (h.k !== 'set' && h.assign) visit(h.assign.value);
    for (const b of r.bodies) {
      if (b.assign) visit(b.assign.value);
      visitQuery(b.query);
    }
  }
  return out;
}
