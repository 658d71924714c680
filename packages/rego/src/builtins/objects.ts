// Object builtins: object.get/keys/remove/filter/union/union_n/subset.
import { compare, equals, ObjectValue, SetValue, type Value } from '../value.js';
import { argArray, argObject, BuiltinError, type BuiltinTable, elementError, typeErrorOneOf } from './api.js';

/** Follows a path of keys/indices/members through a value, as OPA's Value.Find. */
export function findPath(v: Value, path: readonly Value[]): Value | undefined {
  let cur: Value = v;
  for (const seg of path) {
    if (cur instanceof ObjectValue) {
      const next = cur.get(seg);
      if (next === undefined) return undefined;
      cur = next;
    } else if (Array.isArray(cur)) {
      if (typeof seg !== 'number' || !Number.isInteger(seg) || seg < 0 || seg >= cur.length) return undefined;
      cur = cur[seg]!;
    } else if (cur instanceof SetValue) {
      if (!cur.has(seg)) return undefined;
      cur = seg;
    } else {
      return undefined;
    }
  }
  return cur;
}

/** Keys given as an array, set or object (its keys), as OPA's object.remove/filter accept. */
function keySet(name: string, v: Value): SetValue {
  if (Array.isArray(v)) return SetValue.of(v);
  if (v instanceof SetValue) return v;
  if (v instanceof ObjectValue) return SetValue.of(v.keys());
  throw typeErrorOneOf(name, 2, ['object', 'set', 'array'], v);
}

/** Recursive merge; on a key present in both, objects merge and anything else takes b's value. */
export function mergeObjects(a: ObjectValue, b: ObjectValue): ObjectValue {
  const out = ObjectValue.fromEntries(a.entries.values());
  for (const [k, vb] of b.entries.values()) {
    const va = out.get(k);
    out.set(k, va instanceof ObjectValue && vb instanceof ObjectValue ? mergeObjects(va, vb) : vb);
  }
  return out;
}

/** Applies a filter tree (objects of keys, null at leaves) to a value, as OPA's object filtering. */
export function filterValue(v: Value, filter: Value): Value {
  if (filter === null) return v;
  if (!(filter instanceof ObjectValue)) return v;
  if (v instanceof ObjectValue) {
    const out = new ObjectValue();
    for (const [k, x] of v.entries.values()) {
      const f = filter.get(k);
      if (f !== undefined) out.set(k, filterValue(x, f));
    }
    return out;
  }
  if (Array.isArray(v)) {
    const out: Value[] = [];
    v.forEach((x, i) => {
      const f = filter.get(String(i));
      if (f !== undefined) out.push(filterValue(x, f));
    });
    return out;
  }
  if (v instanceof SetValue) {
    const out = new SetValue();
    for (const x of v.values()) {
      const f = filter.get(x);
      if (f !== undefined) out.add(filterValue(x, f));
    }
    return out;
  }
  return v;
}

function arraySubset(sup: readonly Value[], sub: readonly Value[]): boolean {
  if (sub.length > sup.length) return false;
  outer: for (let start = 0; start + sub.length <= sup.length; start++) {
    for (let j = 0; j < sub.length; j++) if (compare(sup[start + j]!, sub[j]!) !== 0) continue outer;
    return true;
  }
  return sub.length === 0;
}

function setSubset(sup: SetValue, sub: SetValue): boolean {
  for (const k of sub.items.keys()) if (!sup.items.has(k)) return false;
  return true;
}

// OPA's array-over-set check only succeeds once an array element has been visited, so an empty
// array never contains even the empty set.
function arraySetSubset(sup: readonly Value[], sub: SetValue): boolean {
  let unmatched = sub.size;
  for (const x of sup) {
    if (sub.has(x)) unmatched--;
    if (unmatched <= 0) return true;
  }
  return false;
}

function objectSubset(sup: ObjectValue, sub: ObjectValue): boolean {
  for (const [k, vs] of sub.entries.values()) {
    const vp = sup.get(k);
    if (vp === undefined) return false;
    if (equals(vs, vp)) continue;
    if (vp instanceof ObjectValue && vs instanceof ObjectValue) {
      if (!objectSubset(vp, vs)) return false;
    } else if (vp instanceof SetValue && vs instanceof SetValue) {
      if (!setSubset(vp, vs)) return false;
    } else if (Array.isArray(vp) && Array.isArray(vs)) {
      if (!arraySubset(vp, vs)) return false;
    } else {
      return false;
    }
  }
  return true;
}

export const objectBuiltins: BuiltinTable = {
  'object.get': {
    arity: 3,
    fn: (args) => {
      const obj = argObject('object.get', args, 0);
      const key = args[1] ?? null;
      const dflt = args[2] ?? null;
      // A null value is a value: only a missing key takes the default.
      const found = Array.isArray(key) ? (key.length === 0 ? obj : findPath(obj, key)) : obj.get(key);
      return found === undefined ? dflt : found;
    },
  },
  'object.keys': {
    arity: 1,
    fn: (args) => SetValue.of(argObject('object.keys', args, 0).keys()),
  },
  'object.remove': {
    arity: 2,
    fn: (args) => {
      const obj = argObject('object.remove', args, 0);
      const keys = keySet('object.remove', args[1] ?? null);
      const out = new ObjectValue();
      for (const [k, v] of obj.entries.values()) if (!keys.has(k)) out.set(k, v);
      return out;
    },
  },
  'object.filter': {
    arity: 2,
    fn: (args) => {
      const obj = argObject('object.filter', args, 0);
      const keys = keySet('object.filter', args[1] ?? null);
      const out = new ObjectValue();
      for (const k of keys.values()) {
        const v = obj.get(k);
        if (v !== undefined) out.set(k, v);
      }
      return out;
    },
  },
  'object.union': {
    arity: 2,
    fn: (args) => mergeObjects(argObject('object.union', args, 0), argObject('object.union', args, 1)),
  },
  'object.union_n': {
    arity: 1,
    fn: (args) => {
      const arr = argArray('object.union_n', args, 0);
      let acc = new ObjectValue();
      for (const o of arr) {
        if (!(o instanceof ObjectValue)) throw elementError('object.union_n', 1, arr, 'object', o);
        acc = mergeObjects(acc, o);
      }
      return acc;
    },
  },
  'object.subset': {
    arity: 2,
    fn: ([sup = null, sub = null]) => {
      if (sup instanceof ObjectValue && sub instanceof ObjectValue) return objectSubset(sup, sub);
      if (sup instanceof SetValue && sub instanceof SetValue) return setSubset(sup, sub);
      if (Array.isArray(sup) && Array.isArray(sub)) return arraySubset(sup, sub);
      if (Array.isArray(sup) && sub instanceof SetValue) return arraySetSubset(sup, sub);
      throw new BuiltinError(
        'eval_type_error',
        'object.subset: both arguments object.subset must be of the same type or array and set',
      );
    },
  },
};
