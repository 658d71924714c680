// Every builtin of OPA's capabilities is implemented, handled by the evaluator, deprecated (v0 only) or
// listed in UNSUPPORTED, so that a policy calling it is refused at load with a message naming it.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Engine } from '../engine.js';
import { BUILTINS, DEPRECATED, UNSUPPORTED } from './index.js';

const NAMES = readFileSync(
  new URL('../../testdata/opa/capabilities/v1.20.2-builtins.txt', import.meta.url),
  'utf8',
)
  .split('\n')
  .filter((n) => n !== '');
// Not functions of their arguments: the evaluator's own. `internal.template_string` and
// `internal.test_case` are what OPA's compiler generates (template strings, test cases), not callable.
const EVALUATOR = new Set(['eq', 'assign', 'print', 'internal.print', 'walk', 'trace', 'opa.runtime']);
const COMPILER_INTERNAL = new Set(['internal.template_string', 'internal.test_case']);

describe("OPA's builtins", () => {
  it('are all known to the engine', () => {
    expect(NAMES.length).toBeGreaterThan(200);
    const unknown = NAMES.filter(
      (n) =>
        !BUILTINS.has(n) &&
        !DEPRECATED.has(n) &&
        !UNSUPPORTED.has(n) &&
        !EVALUATOR.has(n) &&
        !COMPILER_INTERNAL.has(n),
    );
    expect(unknown).toEqual([]);
  });

  it('unsupported ones are refused at load, naming them', () => {
    for (const name of [...UNSUPPORTED].filter((n) => !EVALUATOR.has(n))) {
      const e = new Engine();
      expect(() => e.addPolicy('p.rego', `package p\nx := ${name}(1)\n`), name).toThrow(
        `builtin ${name} is not supported by this engine`,
      );
    }
  });
});
