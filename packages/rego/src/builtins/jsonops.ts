// json.filter, json.remove and json.patch: path-based edits of documents.
import { equals, ObjectValue, SetValue, type Value } from '../value.js';
import { argArray, argObject, type BuiltinTable, operandError, typeErrorOneOf } from './api.js';
import { filterValue } from './objects.js';

/** A path from a JSON pointer-like string ("/a/b", with ~1 and ~0 escapes) or an array of segments. */
function parsePath(name: string, p: Value): Value[] {
  if (typeof p === 'string') {
    if (p === '') return [];
    return p
      .replace(/^\/+/, '')
      .split('/')
      .map((seg) => seg.replaceAll('~1', '/').replaceAll('~0', '~'));
  }
  if (Array.isArray(p)) return [...p];
  throw operandError(
    name,
    2,
    `must be one of {set, array} containing string paths or array of path segments but got ${typeNameOf(p)}`,
  );
}

function typeNameOf(v: Value): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (v instanceof SetValue) return 'set';
  if (v instanceof ObjectValue) return 'object';
  return typeof v === 'bigint' ? 'number' : typeof v;
}

function paths(name: string, v: Value): Value[][] {
  if (Array.isArray(v)) return v.map((p) => parsePath(name, p));
  if (v instanceof SetValue) return v.sorted().map((p) => parsePath(name, p));
  throw typeErrorOneOf(name, 2, ['set', 'array'], v);
}

/** Builds the tree of paths: objects keyed by segment, null where a path ends. */
function pathsToTree(ps: readonly Value[][]): ObjectValue {
  const root = new ObjectValue();
  for (const path of ps) {
    if (path.length === 0) continue;
    let node = root;
    let done = false;
    for (let i = 0; i < path.length - 1 && !done; i++) {
      const child = node.get(path[i]!);
      if (child === undefined) {
        const next = new ObjectValue();
        node.set(path[i]!, next);
        node = next;
      } else if (child === null) {
        done = true;
      } else {
        node = child as ObjectValue;
      }
    }
    if (!done) node.set(path[path.length - 1]!, null);
  }
  return root;
}

function removeTree(a: Value, b: Value | undefined): Value | undefined {
  if (b === undefined) return a;
  if (b === null) return undefined;
  if (!(b instanceof ObjectValue)) return a;
  if (a instanceof ObjectValue) {
    const out = new ObjectValue();
    for (const [k, v] of a.entries.values()) {
      const r = removeTree(v, b.get(k));
      if (r !== undefined) out.set(k, r);
    }
    return out;
  }
  if (a instanceof SetValue) {
    const out = new SetValue();
    for (const v of a.values()) {
      const r = removeTree(v, b.get(v));
      if (r !== undefined) out.add(r);
    }
    return out;
  }
  if (Array.isArray(a)) {
    const out: Value[] = [];
    a.forEach((v, i) => {
      const r = removeTree(v, b.get(String(i)));
      if (r !== undefined) out.push(r);
    });
    return out;
  }
  return a;
}

class PatchError extends Error {}

function arrayIndex(seg: Value, len: number, forInsert: boolean): number {
  let i: number;
  if (typeof seg === 'number') i = seg;
  else if (typeof seg === 'string' && /^(0|[1-9][0-9]*)$/.test(seg)) i = Number(seg);
  else if (seg === '-' && forInsert) return len;
  else throw new PatchError('invalid array index');
  if (!Number.isInteger(i) || i < 0 || i > (forInsert ? len : len - 1))
    throw new PatchError('index out of range');
  return i;
}

function getAt(doc: Value, path: readonly Value[]): Value {
  let cur = doc;
  for (const seg of path) {
    if (cur instanceof ObjectValue) {
      const next = cur.get(seg);
      if (next === undefined) throw new PatchError('path not found');
      cur = next;
    } else if (Array.isArray(cur)) {
      cur = cur[arrayIndex(seg, cur.length, false)]!;
    } else if (cur instanceof SetValue) {
      if (!cur.has(seg)) throw new PatchError('path not found');
      cur = seg;
    } else {
      throw new PatchError('path not found');
    }
  }
  return cur;
}

/** Returns a copy of doc with f applied to the parent of the path's last segment. */
function editParent(doc: Value, path: readonly Value[], f: (parent: Value, last: Value) => Value): Value {
  if (path.length === 0) throw new PatchError('empty path');
  const rec = (cur: Value, i: number): Value => {
    if (i === path.length - 1) return f(cur, path[i]!);
    const seg = path[i]!;
    if (cur instanceof ObjectValue) {
      const child = cur.get(seg);
      if (child === undefined) throw new PatchError('path not found');
      const out = ObjectValue.fromEntries(cur.entries.values());
      out.set(seg, rec(child, i + 1));
      return out;
    }
    if (Array.isArray(cur)) {
      const idx = arrayIndex(seg, cur.length, false);
      const out = [...cur];
      out[idx] = rec(cur[idx]!, i + 1);
      return out;
    }
    if (cur instanceof SetValue) {
      if (!cur.has(seg)) throw new PatchError('path not found');
      const replaced = rec(seg, i + 1);
      const out = new SetValue();
      for (const v of cur.values()) if (!equals(v, seg)) out.add(v);
      out.add(replaced);
      return out;
    }
    throw new PatchError('path not found');
  };
  return rec(doc, 0);
}

function add(doc: Value, path: readonly Value[], value: Value): Value {
  if (path.length === 0) return value;
  return editParent(doc, path, (parent, last) => {
    if (parent instanceof ObjectValue) {
      const out = ObjectValue.fromEntries(parent.entries.values());
      out.set(last, value);
      return out;
    }
    if (Array.isArray(parent)) {
      const i = arrayIndex(last, parent.length, true);
      return [...parent.slice(0, i), value, ...parent.slice(i)];
    }
    if (parent instanceof SetValue) {
      // A set member is addressed by itself; adding inserts the value.
      const out = SetValue.of(parent.values());
      out.add(value);
      return out;
    }
    throw new PatchError('cannot add to a scalar');
  });
}

function remove(doc: Value, path: readonly Value[]): Value {
  return editParent(doc, path, (parent, last) => {
    if (parent instanceof ObjectValue) {
      if (!parent.has(last)) throw new PatchError('path not found');
      const out = ObjectValue.fromEntries(parent.entries.values());
      out.delete(last);
      return out;
    }
    if (Array.isArray(parent)) {
      const i = arrayIndex(last, parent.length, false);
      return [...parent.slice(0, i), ...parent.slice(i + 1)];
    }
    if (parent instanceof SetValue) {
      if (!parent.has(last)) throw new PatchError('path not found');
      const out = new SetValue();
      for (const v of parent.values()) if (!equals(v, last)) out.add(v);
      return out;
    }
    throw new PatchError('cannot remove from a scalar');
  });
}

// The document after its root was removed; only an add at the root can follow.
const ABSENT = Symbol('absent');

function present(doc: Value | typeof ABSENT): Value {
  if (doc === ABSENT) throw new PatchError('document was removed');
  return doc;
}

function applyPatch(doc: Value, ops: readonly Value[]): Value | undefined {
  let cur: Value | typeof ABSENT = doc;
  for (const opv of ops) {
    if (!(opv instanceof ObjectValue)) throw new PatchError('not an object');
    const op = opv.getStr('op');
    if (typeof op !== 'string') throw new PatchError("missing 'op'");
    const attr = (k: string): Value => {
      const v = opv.getStr(k);
      if (v === undefined) throw new PatchError(`missing '${k}' attribute`);
      return v;
    };
    const pathOf = (k: string) => {
      const p = attr(k);
      if (typeof p !== 'string' && !Array.isArray(p)) throw new PatchError('bad path');
      return parsePath('json.patch', p);
    };
    switch (op) {
      case 'add': {
        const p = pathOf('path');
        const v = attr('value');
        cur = p.length === 0 ? v : add(present(cur), p, v);
        break;
      }
      case 'remove': {
        const p = pathOf('path');
        present(cur);
        cur = p.length === 0 ? ABSENT : remove(present(cur), p);
        break;
      }
      case 'replace': {
        const p = pathOf('path');
        const v = attr('value');
        present(cur);
        cur = p.length === 0 ? v : add(remove(present(cur), p), p, v);
        break;
      }
      case 'move': {
        const from = pathOf('from');
        const p = pathOf('path');
        const chunk = getAt(present(cur), from);
        const removed: Value | typeof ABSENT = from.length === 0 ? ABSENT : remove(present(cur), from);
        cur = p.length === 0 ? chunk : add(present(removed), p, chunk);
        break;
      }
      case 'copy': {
        const from = pathOf('from');
        const p = pathOf('path');
        const chunk = getAt(present(cur), from);
        cur = p.length === 0 ? chunk : add(present(cur), p, chunk);
        break;
      }
      case 'test':
        if (!equals(getAt(present(cur), pathOf('path')), attr('value'))) throw new PatchError('test failed');
        break;
      default:
        throw new PatchError(`unrecognized op '${op}'`);
    }
  }
  return cur === ABSENT ? undefined : cur;
}

export const jsonOpBuiltins: BuiltinTable = {
  'json.filter': {
    arity: 2,
    fn: (args) => {
      const obj = argObject('json.filter', args, 0);
      return filterValue(obj, pathsToTree(paths('json.filter', args[1] ?? null)));
    },
  },
  'json.remove': {
    arity: 2,
    fn: (args) => {
      const obj = argObject('json.remove', args, 0);
      return removeTree(obj, pathsToTree(paths('json.remove', args[1] ?? null)));
    },
  },
  'json.patch': {
    arity: 2,
    fn: (args) => {
      const doc = args[0] ?? null;
      const ops = argArray('json.patch', args, 1);
      try {
        return applyPatch(doc, ops);
      } catch (e) {
        // OPA makes a failed patch undefined rather than an error.
        if (e instanceof PatchError) return undefined;
        throw e;
      }
    },
  },
};
