// Type predicates (is_*) and type_name. The predicates are undefined-free: OPA returns false, not undefined.
import { ObjectValue, SetValue, typeName } from '../value.js';
import type { BuiltinTable } from './api.js';

export const typeBuiltins: BuiltinTable = {
  is_number: { arity: 1, fn: ([x]) => typeof x === 'number' || typeof x === 'bigint' },
  is_string: { arity: 1, fn: ([x]) => typeof x === 'string' },
  is_boolean: { arity: 1, fn: ([x]) => typeof x === 'boolean' },
  is_array: { arity: 1, fn: ([x]) => Array.isArray(x) },
  is_set: { arity: 1, fn: ([x]) => x instanceof SetValue },
  is_object: { arity: 1, fn: ([x]) => x instanceof ObjectValue },
  is_null: { arity: 1, fn: ([x]) => x === null },
  type_name: { arity: 1, fn: ([x]) => typeName(x ?? null) },
};
