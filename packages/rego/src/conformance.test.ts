// Runs regorus' OPA-format interpreter cases (shared/fixtures/regorus/interpreter-cases) with regorus'
// test-driver semantics. Cases that cannot pass are skipped by name below, each with its reason.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type CaseOutcome, runCaseFile } from './cases.js';

const ROOT = '/work/shared/fixtures/regorus/interpreter-cases';

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

afterAll(() => {
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
