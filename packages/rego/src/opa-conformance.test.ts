// OPA's own conformance suite (testdata/opa/v1, copied from open-policy-agent/opa, see PROVENANCE.md),
// run through `runCaseFile` exactly as `rego test` runs it. The cases that fail are listed, each with a
// reason, in testdata/opa/v1-known-failures.json; SUPPORTED.md shows that list. The test fails when a case
// outside the list fails, and when a listed case passes (remove it from the list then).
//
// REGO_OPA_KNOWN_FAILURES=write rewrites the list from the current failures (keeping the reasons of the
// entries still failing, `TODO` for new ones) and the list in SUPPORTED.md.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { runCaseFile } from './cases.js';

const ROOT = fileURLToPath(new URL('../testdata/opa/v1/', import.meta.url));
const KNOWN_FILE = fileURLToPath(new URL('../testdata/opa/v1-known-failures.json', import.meta.url));
const SUPPORTED_FILE = fileURLToPath(new URL('../SUPPORTED.md', import.meta.url));
const BEGIN = '<!-- known-failures:begin (generated from testdata/opa/v1-known-failures.json) -->';
const END = '<!-- known-failures:end -->';

type Known = Record<string, Record<string, string>>;
const known: Known = JSON.parse(readFileSync(KNOWN_FILE, 'utf8'));
const writeMode = process.env.REGO_OPA_KNOWN_FAILURES === 'write';

function caseFiles(dir: string): string[] {
  const out: string[] = [];
  for (const f of readdirSync(dir).sort()) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) out.push(...caseFiles(p));
    else if (/\.ya?ml$/.test(f)) out.push(relative(ROOT, p).split('\\').join('/'));
  }
  return out;
}

/** Case keys: the note, with ` #2`, ` #3`, … for repeated notes within a file. */
function keyed<T extends { note: string }>(outcomes: readonly T[]): [string, T][] {
  const seen = new Map<string, number>();
  return outcomes.map((o) => {
    const n = (seen.get(o.note) ?? 0) + 1;
    seen.set(o.note, n);
    return [n === 1 ? o.note : `${o.note} #${n}`, o];
  });
}

/** The generated part of SUPPORTED.md: the known failures grouped by reason. */
function renderKnown(k: Known): string {
  const byReason = new Map<string, string[]>();
  let total = 0;
  for (const [file, cases] of Object.entries(k)) {
    for (const [note, reason] of Object.entries(cases)) {
      byReason.set(reason, [...(byReason.get(reason) ?? []), `\`${file}\`: ${note}`]);
      total++;
    }
  }
  const lines = [BEGIN, '', `${total} known failures.`, ''];
  for (const [reason, cases] of [...byReason].sort((a, b) => b[1].length - a[1].length)) {
    lines.push(`### ${reason} (${cases.length})`, '');
    for (const c of cases) lines.push(`- ${c}`);
    lines.push('');
  }
  lines.push(END);
  return lines.join('\n');
}

const files = caseFiles(ROOT);
const folders = [...new Set(files.map((f) => f.split('/')[0]!))];
const current: Known = {};

describe('OPA v1 conformance suite', () => {
  it('has the copied cases', () => {
    expect(files.length).toBeGreaterThan(500);
    const missing = Object.keys(known).filter((f) => !files.includes(f));
    expect(missing, 'listed files that do not exist').toEqual([]);
  });

  for (const folder of folders) {
    it(folder, () => {
      const unexpected: string[] = [];
      const nowPassing: string[] = [];
      for (const file of files.filter((f) => f.startsWith(`${folder}/`))) {
        const outcomes = runCaseFile(`v1/${file}`, readFileSync(join(ROOT, file), 'utf8'));
        const listed = known[file] ?? {};
        const keys = new Set<string>();
        for (const [key, o] of keyed(outcomes)) {
          keys.add(key);
          if (o.status === 'fail') {
            current[file] = { ...current[file], [key]: listed[key] ?? `TODO: ${o.reason ?? ''}` };
            if (listed[key] === undefined) unexpected.push(`${file}: ${key}: ${o.reason ?? ''}`);
          } else if (listed[key] !== undefined) {
            nowPassing.push(`${file}: ${key}`);
          }
        }
        for (const key of Object.keys(listed)) {
          if (!keys.has(key)) nowPassing.push(`${file}: ${key} (no such case)`);
        }
      }
      if (writeMode) return;
      expect(unexpected, 'failures not in v1-known-failures.json').toEqual([]);
      expect(nowPassing, 'listed in v1-known-failures.json but passing: remove them').toEqual([]);
    });
  }

  it('SUPPORTED.md shows the list', () => {
    const text = readFileSync(SUPPORTED_FILE, 'utf8');
    const a = text.indexOf(BEGIN);
    const b = text.indexOf(END);
    expect(a >= 0 && b > a, 'markers in SUPPORTED.md').toBe(true);
    if (writeMode) return;
    expect(text.slice(a, b + END.length)).toBe(renderKnown(known));
  });

  afterAll(() => {
    if (!writeMode) return;
    const sorted: Known = {};
    for (const f of Object.keys(current).sort()) sorted[f] = current[f]!;
    writeFileSync(KNOWN_FILE, `${JSON.stringify(sorted, null, 2)}\n`);
    const text = readFileSync(SUPPORTED_FILE, 'utf8');
    const a = text.indexOf(BEGIN);
    const b = text.indexOf(END);
    if (a >= 0 && b > a) {
      writeFileSync(SUPPORTED_FILE, text.slice(0, a) + renderKnown(sorted) + text.slice(b + END.length));
    }
  });
});
