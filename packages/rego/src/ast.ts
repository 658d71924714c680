// Abstract syntax of Rego modules and queries, as produced by the parser.
import type { Value } from './value.js';

/** A source file (policy or query). */
export interface SourceFile {
  readonly name: string;
  readonly text: string;
}

export interface Loc {
  readonly file: SourceFile;
  readonly line: number;
  readonly col: number;
  readonly start: number;
  end: number;
}

export function locText(loc: Loc): string {
  return loc.file.text.slice(loc.start, loc.end);
}

export type ArithOp = '+' | '-' | '*' | '/' | '%';
export type CmpOp = '<' | '<=' | '==' | '>=' | '>' | '!=';
export type SetOp = '&' | '|';
export type AssignOp = '=' | ':=';

export type Expr =
  | StrExpr
  | NumExpr
  | BoolExpr
  | NullExpr
  | VarExpr
  | ArrayExpr
  | SetExpr
  | ObjectExpr
  | ArrayComprExpr
  | SetComprExpr
  | ObjectComprExpr
  | CallExpr
  | NegExpr
  | DotExpr
  | BrackExpr
  | SetOpExpr
  | CmpExpr
  | ArithExpr
  | AssignExpr
  | MemberExpr;

export interface StrExpr {
  readonly k: 'str';
  readonly v: string;
  readonly raw: boolean;
  readonly loc: Loc;
}
export interface NumExpr {
  readonly k: 'num';
  readonly v: number | bigint;
  readonly loc: Loc;
}
export interface BoolExpr {
  readonly k: 'bool';
  readonly v: boolean;
  readonly loc: Loc;
}
export interface NullExpr {
  readonly k: 'null';
  readonly loc: Loc;
}
export interface VarExpr {
  readonly k: 'var';
  readonly name: string;
  readonly loc: Loc;
}
export interface ArrayExpr {
  readonly k: 'array';
  readonly items: readonly Expr[];
  readonly loc: Loc;
}
export interface SetExpr {
  readonly k: 'set';
  readonly items: readonly Expr[];
  readonly loc: Loc;
}
export interface ObjectExpr {
  readonly k: 'object';
  readonly fields: readonly (readonly [Expr, Expr])[];
  readonly loc: Loc;
}
export interface ArrayComprExpr {
  readonly k: 'arrcompr';
  readonly term: Expr;
  readonly query: Query;
  readonly loc: Loc;
}
export interface SetComprExpr {
  readonly k: 'setcompr';
  readonly term: Expr;
  readonly query: Query;
  readonly loc: Loc;
}
export interface ObjectComprExpr {
  readonly k: 'objcompr';
  readonly key: Expr;
  readonly value: Expr;
  readonly query: Query;
  readonly loc: Loc;
}
export interface CallExpr {
  readonly k: 'call';
  readonly fcn: Expr;
  readonly params: readonly Expr[];
  readonly loc: Loc;
}
export interface NegExpr {
  readonly k: 'neg';
  readonly expr: Expr;
  readonly loc: Loc;
}
export interface DotExpr {
  readonly k: 'dot';
  readonly refr: Expr;
  readonly field: string;
  readonly loc: Loc;
}
export interface BrackExpr {
  readonly k: 'brack';
  readonly refr: Expr;
  readonly index: Expr;
  readonly loc: Loc;
}
export interface SetOpExpr {
  readonly k: 'setop';
  readonly op: SetOp;
  readonly lhs: Expr;
  readonly rhs: Expr;
  readonly loc: Loc;
}
export interface CmpExpr {
  readonly k: 'cmp';
  readonly op: CmpOp;
  readonly lhs: Expr;
  readonly rhs: Expr;
  readonly loc: Loc;
}
export interface ArithExpr {
  readonly k: 'arith';
  readonly op: ArithOp;
  readonly lhs: Expr;
  readonly rhs: Expr;
  readonly loc: Loc;
}
export interface AssignExpr {
  readonly k: 'assign';
  readonly op: AssignOp;
  readonly lhs: Expr;
  readonly rhs: Expr;
  readonly loc: Loc;
}
export interface MemberExpr {
  readonly k: 'member';
  readonly key: Expr | undefined;
  readonly value: Expr;
  readonly collection: Expr;
  readonly loc: Loc;
}

export type Literal =
  | { readonly k: 'somevars'; readonly vars: readonly VarExpr[]; readonly loc: Loc }
  | {
      readonly k: 'somein';
      readonly key: Expr | undefined;
      readonly value: Expr;
      readonly collection: Expr;
      readonly loc: Loc;
    }
  | { readonly k: 'expr'; readonly expr: Expr; readonly loc: Loc }
  | { readonly k: 'not'; readonly expr: Expr; readonly loc: Loc }
  | {
      readonly k: 'every';
      readonly key: VarExpr | undefined;
      readonly value: VarExpr;
      readonly domain: Expr;
      readonly query: Query;
      readonly loc: Loc;
    };

export interface WithModifier {
  readonly refr: Expr;
  readonly as: Expr;
  readonly loc: Loc;
}

export interface Stmt {
  readonly lit: Literal;
  readonly withs: readonly WithModifier[];
  readonly loc: Loc;
}

export interface Query {
  readonly stmts: readonly Stmt[];
  readonly loc: Loc;
}

export interface RuleAssign {
  readonly op: AssignOp;
  readonly value: Expr;
  readonly loc: Loc;
}

export type RuleHead =
  /** Complete rules and object rules (`p`, `p := v`, `p[k] := v`, `a.b.c := v`). */
  | { readonly k: 'compr'; readonly refr: Expr; readonly assign: RuleAssign | undefined; readonly loc: Loc }
  /** Multi-value rules (`p contains x`, v0 `p[x]`, v0 `p.q` meaning `p` contains "q" when `key` is absent). */
  | { readonly k: 'set'; readonly refr: Expr; readonly key: Expr | undefined; readonly loc: Loc }
  | {
      readonly k: 'func';
      readonly refr: Expr;
      readonly args: readonly Expr[];
      readonly assign: RuleAssign | undefined;
      readonly loc: Loc;
    };

export interface RuleBody {
  readonly assign: RuleAssign | undefined;
  readonly isElse: boolean;
  readonly query: Query;
  readonly loc: Loc;
}

export type Rule =
  | { readonly k: 'spec'; readonly head: RuleHead; readonly bodies: readonly RuleBody[]; readonly loc: Loc }
  | {
      readonly k: 'default';
      readonly refr: Expr;
      readonly args: readonly VarExpr[];
      readonly value: Expr;
      readonly loc: Loc;
    };

export interface Import {
  readonly refr: Expr;
  readonly path: readonly string[];
  readonly alias: string | undefined;
  readonly loc: Loc;
}

export interface Module {
  readonly file: SourceFile;
  readonly pkg: readonly string[];
  readonly pkgRefr: Expr;
  readonly imports: readonly Import[];
  readonly rules: readonly Rule[];
  readonly regoV1: boolean;
}

/** The literal value of a scalar expression, or undefined for other expressions. */
export function scalarValue(e: Expr): Value | undefined {
  switch (e.k) {
    case 'str':
    case 'num':
    case 'bool':
      return e.v;
    case 'null':
      return null;
    default:
      return undefined;
  }
}

export function isScalar(e: Expr): boolean {
  return e.k === 'str' || e.k === 'num' || e.k === 'bool' || e.k === 'null';
}

/** Components of a ref made of vars, dot fields and brackets (string literals or any index kept as text). */
export function refComponents(e: Expr): string[] | undefined {
  const out: string[] = [];
  let cur: Expr = e;
  for (;;) {
    switch (cur.k) {
      case 'var':
        out.push(cur.name);
        return out.reverse();
      case 'dot':
        out.push(cur.field);
        cur = cur.refr;
        break;
      case 'brack':
        if (cur.index.k !== 'str') return undefined;
        out.push(cur.index.v);
        cur = cur.refr;
        break;
      default:
        return undefined;
    }
  }
}

/** The root variable of a ref, if any. */
export function rootVar(e: Expr): VarExpr | undefined {
  let cur: Expr = e;
  for (;;) {
    if (cur.k === 'var') return cur;
    if (cur.k === 'dot' || cur.k === 'brack') cur = cur.refr;
    else return undefined;
  }
}

/** Visits an expression tree without descending into comprehension bodies; `f` returns false to stop descent. */
export function traverse(e: Expr, f: (e: Expr) => boolean): void {
  if (!f(e)) return;
  switch (e.k) {
    case 'array':
    case 'set':
      for (const i of e.items) traverse(i, f);
      return;
    case 'object':
      for (const [k, v] of e.fields) {
        traverse(k, f);
        traverse(v, f);
      }
      return;
    case 'call':
      for (const p of e.params) traverse(p, f);
      return;
    case 'neg':
      traverse(e.expr, f);
      return;
    case 'dot':
      traverse(e.refr, f);
      return;
    case 'brack':
      traverse(e.refr, f);
      traverse(e.index, f);
      return;
    case 'setop':
    case 'cmp':
    case 'arith':
    case 'assign':
      traverse(e.lhs, f);
      traverse(e.rhs, f);
      return;
    case 'member':
      if (e.key) traverse(e.key, f);
      traverse(e.value, f);
      traverse(e.collection, f);
      return;
    default:
      return;
  }
}
