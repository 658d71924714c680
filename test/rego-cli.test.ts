// dist/bin/rego from a fresh build: eval with policies, data and input, and OPA-format case files.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { binary, runToEnd } from './helpers/process.js';

const FIXTURES = vector('');
const dir = mkdtempSync(join(tmpdir(), 'broker-rego-cli-'));

describe('rego CLI (single executable)', () => {
  it("evaluates trustee's default resource policy against EAR claims", async () => {
    const input = join(dir, 'input.json');
    const data = join(dir, 'data.json');
    writeFileSync(
      input,
      JSON.stringify({
        submods: { cpu0: { 'ear.status': 'affirming', 'ear.veraison.annotated-evidence': { snp: {} } } },
      }),
    );
    writeFileSync(
      data,
      JSON.stringify({ plugin: 'resource', 'resource-path': ['default', 'key', '1'], query: {} }),
    );
    const policy = join(FIXTURES, 'trustee/policies/resource/default.rego');
    const r = await runToEnd(binary('rego'), [
      'eval',
      '-d',
      policy,
      '-d',
      data,
      '-i',
      input,
      'data.policy.allow',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).result[0].expressions[0].value).toBe(true);

    writeFileSync(
      input,
      JSON.stringify({ submods: { cpu0: { 'ear.veraison.annotated-evidence': { sample: {} } } } }),
    );
    const denied = await runToEnd(binary('rego'), [
      'eval',
      '-d',
      policy,
      '-d',
      data,
      '-i',
      input,
      'data.policy.allow',
    ]);
    expect(JSON.parse(denied.stdout).result[0].expressions[0].value).toBe(false);
  });

  it('runs OPA-format case files and ends with the plain summary line', async () => {
    const r = await runToEnd(binary('rego'), [
      'test',
      join(FIXTURES, 'regorus/interpreter-cases/every/tests.yaml'),
    ]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').at(-1)).toMatch(/^\d+ passed, 0 failed$/);
  });

  it('reports a failing case and exits non-zero', async () => {
    const cases = join(dir, 'cases.yaml');
    writeFileSync(
      cases,
      [
        'cases:',
        '  - note: wrong',
        '    modules: ["package t\\np := 1"]',
        '    query: data.t.p = x',
        '    want_result: [{x: 2}]',
      ].join('\n'),
    );
    const r = await runToEnd(binary('rego'), ['test', cases]);
    expect(r.code).not.toBe(0);
    expect(r.stdout.trim().split('\n').at(-1)).toBe('0 passed, 1 failed');
  });

  it('gives file, line and column for a parse error', async () => {
    const bad = join(dir, 'bad.rego');
    writeFileSync(bad, 'package x\n\nallow if {\n  input.a ==\n}\n');
    const r = await runToEnd(binary('rego'), ['eval', '-d', bad, 'data.x.allow']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/bad\.rego:\d+:\d+/);
  });
});
