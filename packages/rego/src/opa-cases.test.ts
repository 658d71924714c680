// Cases written for this engine in OPA's test-case format (packages/rego/testdata/opa), run with OPA's
// runner semantics: result sets compared order-insensitively, want_error_code exact, strict_error.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCaseFile } from './cases.js';

const DIR = new URL('../testdata/opa/', import.meta.url);

describe('OPA-format cases', () => {
  for (const f of readdirSync(DIR).filter((x) => x.endsWith('.yaml'))) {
    it(f, () => {
      const outcomes = runCaseFile(f, readFileSync(new URL(f, DIR), 'utf8'), { format: 'opa' });
      expect(outcomes.length).toBeGreaterThan(10);
      expect(outcomes.filter((o) => o.status !== 'pass').map((o) => `${o.note}: ${o.reason}`)).toEqual([]);
    });
  }
});
