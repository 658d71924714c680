// Runs regorus' OPA-format interpreter cases (test/vectors/regorus/interpreter-cases) with regorus'
// test-driver semantics. Cases that cannot pass are skipped by name below, each with its reason.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { type CaseOutcome, runCaseFile } from './cases.js';

const ROOT = vector('regorus/interpreter-cases');

/** Folders that are not Rego: regorus' Azure Policy targets and its non-standard `or` operator. */
const SKIPPED_FOLDERS: Record<string, string> = {
  target: 'regorus Azure Policy `__target__` extension (azure_policy feature), not part of Rego',
  'rego-extensions/or': 'regorus `or` operator extension (rego-extensions feature), not part of Rego',
};

/** Individual cases, keyed `file|note`. */
export const SKIPPED_CASES: Record<string, string> = {
  'limits/execution_timer.yaml|engine-configured timer triggers limit error':
    'regorus wall-clock timer driven by a simulated clock; this engine bounds evaluation by steps (limits.maxSteps)',
  'limits/execution_timer.yaml|global timer limit applies without engine override':
    'regorus wall-clock timer driven by a simulated clock; this engine bounds evaluation by steps (limits.maxSteps)',
  'limits/execution_timer.yaml|repeated ticks eventually exceed limit':
    'regorus wall-clock timer driven by a simulated clock; this engine bounds evaluation by steps (limits.maxSteps)',
  // The value model orders values across types as OPA does.
  'builtins/comparison/tests.yaml|order':
    'OPA orders objects before sets; regorus orders sets before objects',
  // Builtins follow OPA (and Go's standard library, which OPA uses) where regorus differs.
  'builtins/arrays/slice.yaml|all':
    'OPA raises a type error for a non-integer index; regorus returns undefined',
  'builtins/numbers/intn.yaml|undefined':
    'OPA raises a type error for rand.intn("a", 10.3); regorus returns undefined',
  'builtins/numbers/mod.yaml|integral float too large to convert':
    'OPA computes % on integral numbers written with an exponent (1e16 % 2 = 0); regorus rejects floats',
  'builtins/semver/is_valid.yaml|semver.compare wrong arg1 type':
    'OPA semver.is_valid accepts any value and returns false for non-strings; regorus raises an error',
  'builtins/strings/indexof.yaml|base':
    'OPA raises "empty search character" for indexof("", ""); regorus returns -1',
  'builtins/strings/lower.yaml|unicode string':
    "Go's strings.ToLower has no final-sigma rule (Σ → σ); regorus uses Rust's (Σ → ς at word end)",
  'builtins/strings/sprintf.yaml|numeric formatting':
    "OPA formats with Go's fmt (%f → 3.140000); regorus differs",
  'builtins/strings/sprintf.yaml|error cases':
    "Go's fmt writes %!d(MISSING) for a missing argument instead of failing; regorus raises an error",
  'builtins/time/format.yaml|without-timezone-and-format':
    "OPA's default layout is Go's RFC3339Nano, which drops trailing zeros of the fraction",
  'builtins/time/format.yaml|with-timezone-and-no-format':
    "OPA's default layout is Go's RFC3339Nano, which drops trailing zeros of the fraction",
  'builtins/units/parse.yaml|all':
    'OPA units.parse knows SI prefixes up to E/Ei only (the case itself notes Q, R, Y, Z... are not OPA)',
  'builtins/units/parse.yaml|b suffix not supported':
    'OPA raises an error for "1mb"; regorus returns undefined',
  'builtins/units/parse_bytes.yaml|all':
    'OPA units.parse_bytes knows units up to E/Ei; regorus adds Z/Y/Zi/Yi',
  'builtins/time/add_date.yaml|adding-overflowing-years':
    'builtins library: overflowing years are an error here (see BUILTINS-TODO.md)',
  'builtins/time/add_date.yaml|subtracting-overflowing-years':
    'builtins library: overflowing years are an error here (see BUILTINS-TODO.md)',
  'builtins/uuid/parse.yaml|others':
    'builtins library: uuid.parse omits `time` for v6/v7 (see BUILTINS-TODO.md)',
};

function yamlFiles(): string[] {
  return readdirSync(ROOT, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.yaml'))
    .sort();
}

function folderOf(file: string): string {
  const i = file.lastIndexOf('/');
  return i < 0 ? '.' : file.slice(0, i);
}

const summary = new Map<string, { pass: number; fail: number; skip: number; messageDiffers: number }>();

function record(o: CaseOutcome): void {
  const f = folderOf(o.file);
  const s = summary.get(f) ?? { pass: 0, fail: 0, skip: 0, messageDiffers: 0 };
  s[o.status]++;
  if (o.messageDiffers && o.status === 'pass') s.messageDiffers++;
  summary.set(f, s);
}

describe('regorus interpreter cases', () => {
  for (const file of yamlFiles()) {
    const skipFolder = Object.entries(SKIPPED_FOLDERS).find(([f]) => file.startsWith(`${f}/`));
    it(file, () => {
      const outcomes = runCaseFile(file, readFileSync(join(ROOT, file), 'utf8'), {
        format: 'regorus',
        skip: (f, note) => skipFolder?.[1] ?? SKIPPED_CASES[`${f}|${note}`],
      });
      for (const o of outcomes) record(o);
      const failures = outcomes.filter((o) => o.status === 'fail').map((o) => `${o.note}: ${o.reason}`);
      expect(failures).toEqual([]);
    });
  }
});

// The per-folder table, on request only (REGO_CONFORMANCE_SUMMARY=1): the test output stays quiet.
afterAll(() => {
  if (!process.env.REGO_CONFORMANCE_SUMMARY) return;
  const rows = [...summary.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
  const total = { pass: 0, fail: 0, skip: 0, messageDiffers: 0 };
  const lines = rows.map(([f, s]) => {
    total.pass += s.pass;
    total.fail += s.fail;
    total.skip += s.skip;
    total.messageDiffers += s.messageDiffers;
    return `${f.padEnd(32)} ${String(s.pass).padStart(4)} pass ${String(s.fail).padStart(3)} fail ${String(s.skip).padStart(3)} skip`;
  });
  lines.push(
    `${'TOTAL'.padEnd(32)} ${String(total.pass).padStart(4)} pass ${String(total.fail).padStart(3)} fail ${String(total.skip).padStart(3)} skip (${total.messageDiffers} passing error cases carry OPA builtin wording)`,
  );
  console.log(lines.join('\n'));
});
