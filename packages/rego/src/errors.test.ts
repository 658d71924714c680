import { describe, expect, it } from 'vitest';
import { Engine } from './engine.js';
import { RegoError, RegoParseError } from './index.js';

describe('RegoError', () => {
  it('is the base of the engine’s errors and carries OPA’s code', () => {
    const e = new Engine();
    let caught: unknown;
    try {
      e.addPolicy('bad.rego', 'package p\nallow {');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(RegoParseError);
    expect(caught).toBeInstanceOf(RegoError);
    expect(caught).toBeInstanceOf(Error);
    expect((caught as RegoError).code).toBe('rego_parse_error');
  });
});
