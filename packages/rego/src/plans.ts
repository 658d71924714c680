// Compile-time plans consumed by the interpreter: loops hoisted out of statements and binding plans for
// assignments, `some ... in`, call outputs, loop indexes and function parameters.
import type { Expr } from './ast.js';
import type { Value } from './value.js';

export type DestructuringPlan =
  | { readonly t: 'var'; readonly name: string }
  | { readonly t: 'ignore' }
  | { readonly t: 'eqExpr'; readonly expr: Expr }
  | { readonly t: 'eqValue'; readonly value: Value }
  | { readonly t: 'array'; readonly elems: readonly DestructuringPlan[] }
  | {
      readonly t: 'object';
      readonly fields: readonly (readonly [Value, DestructuringPlan])[];
      readonly dynamic: readonly (readonly [Expr, DestructuringPlan])[];
    };

export type AssignmentPlan =
  | { readonly t: 'colonEq'; readonly rhs: Expr; readonly lhsPlan: DestructuringPlan }
  | { readonly t: 'bindLeft'; readonly rhs: Expr; readonly lhsPlan: DestructuringPlan }
  | { readonly t: 'bindRight'; readonly lhs: Expr; readonly rhsPlan: DestructuringPlan }
  | { readonly t: 'both'; readonly pairs: readonly (readonly [Expr, DestructuringPlan])[] }
  | { readonly t: 'wildcard'; readonly lhs: Expr; readonly rhs: Expr; readonly side: 'both' | 'lhs' | 'rhs' }
  | { readonly t: 'eqCheck'; readonly lhs: Expr; readonly rhs: Expr };

export type BindingPlan =
  | { readonly t: 'assign'; readonly plan: AssignmentPlan }
  | {
      readonly t: 'somein';
      readonly keyPlan: DestructuringPlan | undefined;
      readonly valuePlan: DestructuringPlan;
    }
  | { readonly t: 'param'; readonly plan: DestructuringPlan }
  | { readonly t: 'loopIndex'; readonly plan: DestructuringPlan };

export interface HoistedLoop {
  /** The expression whose value is supplied by the loop (`coll[i]` or the `walk` call). */
  readonly loopExpr: Expr;
  /** The index expression of `coll[i]`. */
  readonly key: Expr | undefined;
  readonly collection: Expr;
  readonly walk: boolean;
}

export function planBoundVars(p: BindingPlan): string[] {
  const out: string[] = [];
  switch (p.t) {
    case 'assign':
      assignVars(p.plan, out);
      break;
    case 'somein':
      if (p.keyPlan) destructVars(p.keyPlan, out);
      destructVars(p.valuePlan, out);
      break;
    case 'param':
    case 'loopIndex':
      destructVars(p.plan, out);
      break;
  }
  return out;
}

function assignVars(p: AssignmentPlan, out: string[]): void {
  switch (p.t) {
    case 'colonEq':
    case 'bindLeft':
      destructVars(p.lhsPlan, out);
      return;
    case 'bindRight':
      destructVars(p.rhsPlan, out);
      return;
    case 'both':
      for (const [, d] of p.pairs) destructVars(d, out);
      return;
    default:
      return;
  }
}

export function destructVars(p: DestructuringPlan, out: string[]): void {
  switch (p.t) {
    case 'var':
      out.push(p.name);
      return;
    case 'array':
      for (const e of p.elems) destructVars(e, out);
      return;
    case 'object':
      for (const [, f] of p.fields) destructVars(f, out);
      for (const [, f] of p.dynamic) destructVars(f, out);
      return;
    default:
      return;
  }
}

export function introducesBinding(p: DestructuringPlan): boolean {
  switch (p.t) {
    case 'var':
    case 'ignore':
      return true;
    case 'array':
      return p.elems.some(introducesBinding);
    case 'object':
      return (
        p.fields.some(([, f]) => introducesBinding(f)) || p.dynamic.some(([, f]) => introducesBinding(f))
      );
    default:
      return false;
  }
}

export function containsWildcards(p: DestructuringPlan): boolean {
  switch (p.t) {
    case 'ignore':
      return true;
    case 'array':
      return p.elems.some(containsWildcards);
    case 'object':
      return (
        p.fields.some(([, f]) => containsWildcards(f)) || p.dynamic.some(([, f]) => containsWildcards(f))
      );
    default:
      return false;
  }
}
