// Array builtins.
import { argArray, argSmallInt, type BuiltinTable } from './api.js';

export const arrayBuiltins: BuiltinTable = {
  'array.concat': {
    arity: 2,
    fn: (args) => [...argArray('array.concat', args, 0), ...argArray('array.concat', args, 1)],
  },
  'array.slice': {
    arity: 3,
    fn: (args) => {
      const arr = argArray('array.slice', args, 0);
      let start = argSmallInt('array.slice', args, 1);
      let stop = argSmallInt('array.slice', args, 2);
      // Out-of-range indices clamp rather than fail, as OPA does.
      stop = Math.min(Math.max(stop, 0), arr.length);
      start = Math.min(Math.max(start, 0), stop);
      return arr.slice(start, stop);
    },
  },
  'array.flatten': {
    arity: 1,
    // One level: elements that are arrays are spliced in, others kept.
    fn: (args) => argArray('array.flatten', args, 0).flatMap((x) => (Array.isArray(x) ? x : [x])),
  },
  'array.reverse': {
    arity: 1,
    fn: (args) => [...argArray('array.reverse', args, 0)].reverse(),
  },
};
