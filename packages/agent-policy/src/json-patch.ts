/**
 * RFC 6902 JSON Patch over plain JSON values, with the all-or-nothing behaviour of the `json-patch` crate
 * the kata agent uses to apply a policy's state `ops` to its data document.
 */

import { AgentPolicyError, type AgentPolicyErrorCode } from './errors.js';

export type Json = null | boolean | number | bigint | string | Json[] | { [key: string]: Json };

export type PatchOperation =
  | { readonly op: 'add' | 'replace' | 'test'; readonly path: string; readonly value: Json }
  | { readonly op: 'remove'; readonly path: string }
  | { readonly op: 'move' | 'copy'; readonly from: string; readonly path: string };

/** The ops are not a JSON Patch document (not an array, unknown `op`, missing member). */
export class InvalidPatchError extends AgentPolicyError {
  override readonly code: AgentPolicyErrorCode = 'PATCH_INVALID';
  override readonly name: string = 'InvalidPatchError';
}

/** One operation could not be applied; the document is left as it was. Worded as the crate's `PatchError`. */
export class PatchApplyError extends AgentPolicyError {
  override readonly code: AgentPolicyErrorCode = 'PATCH_APPLY_FAILED';
  override readonly name: string = 'PatchApplyError';
  readonly operation: number;
  readonly path: string;
  constructor(operation: number, path: string, kind: string) {
    super(`operation '/${operation}' failed at path '${path}': ${kind}`);
    this.operation = operation;
    this.path = path;
  }
}

const KINDS = {
  pointer: 'path is invalid',
  from: '"from" path is invalid',
  test: 'value did not match',
  inside: 'cannot move the value inside itself',
} as const;

function isObject(v: unknown): v is { [key: string]: Json } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads a JSON Patch document (as the crate's serde impl accepts it). */
export function parsePatch(ops: unknown): PatchOperation[] {
  if (!Array.isArray(ops)) throw new InvalidPatchError('ops must be an array of JSON Patch operations');
  return ops.map((o, i) => {
    if (!isObject(o)) throw new InvalidPatchError(`ops[${i}] is not an object`);
    const str = (key: string): string => {
      const v = Object.hasOwn(o, key) ? o[key] : undefined;
      if (typeof v !== 'string') throw new InvalidPatchError(`ops[${i}]: missing or non-string \`${key}\``);
      return v;
    };
    const op = str('op');
    switch (op) {
      case 'add':
      case 'replace':
      case 'test':
        if (!Object.hasOwn(o, 'value')) throw new InvalidPatchError(`ops[${i}]: missing \`value\``);
        return { op, path: str('path'), value: o.value as Json };
      case 'remove':
        return { op, path: str('path') };
      case 'move':
      case 'copy':
        return { op, from: str('from'), path: str('path') };
      default:
        throw new InvalidPatchError(`ops[${i}]: unknown op ${JSON.stringify(op.slice(0, 40))}`);
    }
  });
}

/** Splits a JSON pointer into unescaped tokens; undefined when it is not a pointer. */
function tokens(pointer: string): string[] | undefined {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) return undefined;
  const out: string[] = [];
  for (const raw of pointer.slice(1).split('/')) {
    if (/~(?![01])/.test(raw)) return undefined;
    out.push(raw.replace(/~1/g, '/').replace(/~0/g, '~'));
  }
  return out;
}

/** An array index token: digits without a leading zero. */
function arrayIndex(token: string): number | undefined {
  if (!/^(0|[1-9][0-9]{0,15})$/.test(token)) return undefined;
  return Number(token);
}

function child(container: Json, token: string): Json | undefined {
  if (Array.isArray(container)) {
    const i = arrayIndex(token);
    return i === undefined ? undefined : container[i];
  }
  if (isObject(container)) return Object.hasOwn(container, token) ? container[token] : undefined;
  return undefined;
}

function get(doc: Json, pointer: string): Json | undefined {
  const path = tokens(pointer);
  if (path === undefined) return undefined;
  let cur: Json | undefined = doc;
  for (const t of path) {
    if (cur === undefined) return undefined;
    cur = child(cur, t);
  }
  return cur;
}

function setOwn(obj: { [key: string]: Json }, key: string, value: Json): void {
  // A plain assignment of "__proto__" would replace the prototype instead of adding a member.
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Returns the new document, or undefined when the parent does not exist or the index is out of range. */
function add(doc: Json, pointer: string, value: Json): Json | undefined {
  const path = tokens(pointer);
  if (path === undefined) return undefined;
  if (path.length === 0) return value;
  const last = path[path.length - 1]!;
  const parentOf = parentValue(doc, path);
  if (Array.isArray(parentOf)) {
    const i = last === '-' ? parentOf.length : arrayIndex(last);
    if (i === undefined || i > parentOf.length) return undefined;
    parentOf.splice(i, 0, value);
    return doc;
  }
  if (isObject(parentOf)) {
    setOwn(parentOf, last, value);
    return doc;
  }
  return undefined;
}

/** Removes and returns the value at the pointer, or undefined when there is none. */
function remove(doc: Json, pointer: string): Json | undefined {
  const path = tokens(pointer);
  if (path === undefined || path.length === 0) return undefined;
  const last = path[path.length - 1]!;
  const parent = parentValue(doc, path);
  if (Array.isArray(parent)) {
    const i = arrayIndex(last);
    if (i === undefined || i >= parent.length) return undefined;
    return parent.splice(i, 1)[0];
  }
  if (isObject(parent) && Object.hasOwn(parent, last)) {
    const v = parent[last]!;
    delete parent[last];
    return v;
  }
  return undefined;
}

function parentValue(doc: Json, path: readonly string[]): Json | undefined {
  let cur: Json | undefined = doc;
  for (const t of path.slice(0, -1)) {
    if (cur === undefined) return undefined;
    cur = child(cur, t);
  }
  return cur;
}

/** Deep copy of a JSON value (objects keep own members only). */
export function cloneJson(v: Json): Json {
  if (Array.isArray(v)) return v.map(cloneJson);
  if (isObject(v)) {
    const out: { [key: string]: Json } = {};
    for (const k of Object.keys(v)) setOwn(out, k, cloneJson(v[k]!));
    return out;
  }
  return v;
}

function jsonEquals(a: Json, b: Json): boolean {
  if ((typeof a === 'number' || typeof a === 'bigint') && (typeof b === 'number' || typeof b === 'bigint')) {
    // biome-ignore lint/suspicious/noDoubleEquals: numeric comparison across number and bigint is intended
    return a == b;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEquals(x, b[i]!))
    );
  }
  if (isObject(a) || isObject(b)) {
    if (!isObject(a) || !isObject(b)) return false;
    const ka = Object.keys(a);
    return (
      ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && jsonEquals(a[k]!, b[k]!))
    );
  }
  return a === b;
}

/**
 * Applies the operations to a copy of `doc` and returns it. On the first failing operation it throws
 * `PatchApplyError` and `doc` is untouched.
 */
export function applyPatch(doc: Json, ops: readonly PatchOperation[]): Json {
  let cur = cloneJson(doc);
  ops.forEach((op, i) => {
    switch (op.op) {
      case 'add': {
        const next = add(cur, op.path, cloneJson(op.value));
        if (next === undefined) throw new PatchApplyError(i, op.path, KINDS.pointer);
        cur = next;
        break;
      }
      case 'remove':
        if (remove(cur, op.path) === undefined) throw new PatchApplyError(i, op.path, KINDS.pointer);
        break;
      case 'replace': {
        if (get(cur, op.path) === undefined) throw new PatchApplyError(i, op.path, KINDS.pointer);
        if (op.path === '') {
          cur = cloneJson(op.value);
        } else {
          remove(cur, op.path);
          cur = add(cur, op.path, cloneJson(op.value))!;
        }
        break;
      }
      case 'test': {
        const v = get(cur, op.path);
        if (v === undefined) throw new PatchApplyError(i, op.path, KINDS.pointer);
        if (!jsonEquals(v, op.value)) throw new PatchApplyError(i, op.path, KINDS.test);
        break;
      }
      case 'move':
      case 'copy': {
        if (op.op === 'move' && op.path.startsWith(`${op.from}/`)) {
          throw new PatchApplyError(i, op.path, KINDS.inside);
        }
        const v = get(cur, op.from);
        if (v === undefined) throw new PatchApplyError(i, op.path, KINDS.from);
        if (op.op === 'move') {
          if (op.from === op.path) break;
          if (op.from === '') throw new PatchApplyError(i, op.path, KINDS.inside);
          remove(cur, op.from);
        }
        const next = add(cur, op.path, op.op === 'copy' ? cloneJson(v) : v);
        if (next === undefined) throw new PatchApplyError(i, op.path, KINDS.pointer);
        cur = next;
        break;
      }
    }
  });
  return cur;
}
