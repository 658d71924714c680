// The builtin function table, keyed by OPA's full builtin names, merged from one module per family.

import { aggregateBuiltins } from './aggregates.js';
import type { BuiltinDef, BuiltinTable } from './api.js';
import { arrayBuiltins } from './arrays.js';
import { comparisonBuiltins } from './comparison.js';
import { numberBuiltins } from './numbers.js';
import { objectBuiltins } from './objects.js';
import { regexBuiltins } from './regex.js';
import { setBuiltins } from './sets.js';
import { stringBuiltins } from './strings.js';
import { typeBuiltins } from './types.js';

export type { BuiltinCode, BuiltinContext, BuiltinDef } from './api.js';
export { BuiltinError, builtinError, typeError } from './api.js';

const FAMILIES: readonly BuiltinTable[] = [
  aggregateBuiltins,
  arrayBuiltins,
  comparisonBuiltins,
  numberBuiltins,
  objectBuiltins,
  regexBuiltins,
  setBuiltins,
  stringBuiltins,
  typeBuiltins,
];

function merge(tables: readonly BuiltinTable[]): Map<string, BuiltinDef> {
  const out = new Map<string, BuiltinDef>();
  for (const t of tables) {
    for (const [name, def] of Object.entries(t)) {
      if (out.has(name)) throw new Error(`builtin defined twice: ${name}`);
      out.set(name, def);
    }
  }
  return out;
}

export const BUILTINS: ReadonlyMap<string, BuiltinDef> = merge(FAMILIES);

/** Builtins OPA knows that this engine deliberately does not implement; using one is a load-time error. */
export const UNSUPPORTED: ReadonlySet<string> = new Set<string>([]);
