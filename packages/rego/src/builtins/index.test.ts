import { describe, expect, it } from 'vitest';
import type { Value } from '../value.js';
import { BUILTINS, DEPRECATED, UNSUPPORTED } from './index.js';
import { failure, testContext } from './testkit.js';

// The builtins kata's genpolicy rules and trustee's policies call.
const REQUIRED = [
  'count',
  'replace',
  'regex.match',
  'split',
  'is_null',
  'startswith',
  'concat',
  'trim_prefix',
  'contains',
  'to_number',
  'substring',
  'lower',
  'regex.find_all_string_submatch_n',
  'bits.and',
  'bits.or',
  'bits.negate',
  'base64url.encode',
  'array.concat',
  'time.parse_rfc3339_ns',
  'object.union_n',
  'object.subset',
];

describe('the builtin table', () => {
  it('has every builtin the target policies use', () => {
    for (const name of REQUIRED) expect(BUILTINS.has(name), name).toBe(true);
  });

  it('keeps supported, deprecated and unsupported names consistent', () => {
    for (const name of UNSUPPORTED) expect(BUILTINS.has(name), name).toBe(false);
    for (const name of DEPRECATED) expect(BUILTINS.has(name), name).toBe(true);
  });

  it('turns engine size limits into builtin errors', () => {
    const e = failure('replace', 'a'.repeat(1_000_000), 'a', 'x'.repeat(1000));
    expect(e.code).toBe('eval_builtin_error');
    expect(e.message).toMatch(/^replace: result too large/);
    let deep: Value = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    const marshal = BUILTINS.get('json.marshal')!;
    expect(() => marshal.fn([deep], testContext())).toThrow(/^json.marshal: result too large/);
  });

  it('declares sensible arities', () => {
    for (const [name, def] of BUILTINS) {
      expect(Number.isInteger(def.arity) && def.arity >= 0 && def.arity <= 4, name).toBe(true);
      expect(def.fn.length, name).toBeLessThanOrEqual(2);
    }
    expect(BUILTINS.get('time.now_ns')?.nondeterministic).toBe(true);
  });
});
