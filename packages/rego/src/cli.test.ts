import { describe, expect, it } from 'vitest';
import { type CliIO, main } from './cli.js';

function io(files: Record<string, string>): CliIO & { stdout: string; stderr: string } {
  const r = {
    stdout: '',
    stderr: '',
    out: (s: string) => {
      r.stdout += s;
    },
    err: (s: string) => {
      r.stderr += s;
    },
    readFile: (p: string) => {
      const f = files[p];
      if (f === undefined) {
        const e = new Error(`ENOENT: no such file ${p}`) as NodeJS.ErrnoException;
        e.code = 'ENOENT';
        throw e;
      }
      return f;
    },
  };
  return r;
}

describe('rego eval', () => {
  it('evaluates a query against policies, data and input', async () => {
    const t = io({
      'p.rego': 'package p\nallow if input.user == data.admin\n',
      'd.json': '{"admin": "alice"}',
      'i.json': '{"user": "alice"}',
    });
    expect(await main(['eval', '-d', 'p.rego', '-d', 'd.json', '-i', 'i.json', 'data.p.allow'], t)).toBe(0);
    expect(JSON.parse(t.stdout)).toEqual({
      result: [{ expressions: [{ value: true, text: 'data.p.allow', location: { row: 1, col: 1 } }] }],
    });
  });

  it('prints bindings, keeps big integers exact and prints {} when undefined', async () => {
    const t = io({});
    expect(await main(['eval', 'x := 123456789012345678901234567890'], t)).toBe(0);
    expect(t.stdout).toContain('"x": 123456789012345678901234567890');
    const u = io({});
    expect(await main(['eval', '1 = 2'], u)).toBe(0);
    expect(u.stdout).toBe('{}\n');
  });

  it('supports v0 policies with --v0', async () => {
    const files = { 'p.rego': 'package p\nq[x] { x := 1 }\n' };
    const v1 = io(files);
    expect(await main(['eval', '-d', 'p.rego', 'data.p.q'], v1)).toBe(1);
    expect(v1.stderr).toContain('p.rego:2:');
    const v0 = io(files);
    expect(await main(['eval', '--v0', '-d', 'p.rego', 'data.p.q'], v0)).toBe(0);
    expect(JSON.parse(v0.stdout).result[0].expressions[0].value).toEqual([1]);
  });

  it('reports usage and file errors', async () => {
    const t = io({});
    expect(await main(['eval'], t)).toBe(2);
    expect(await main(['frobnicate'], t)).toBe(2);
    expect(await main(['eval', '-d', 'missing.rego', 'true'], t)).toBe(1);
    expect(t.stderr).toContain('ENOENT');
  });
});

describe('rego test', () => {
  it('runs OPA-format cases and summarizes', async () => {
    const yaml = `cases:
  - note: ok
    modules:
      - |
        package t
        p := 1
    query: data.t.p = x
    want_result:
      - x: 1
  - note: wrong
    modules:
      - |
        package t
        p := 1
    query: data.t.p = x
    want_result:
      - x: 2
  - note: error code
    modules:
      - |
        package t
        p := 1
        p := 2
    query: data.t.p = x
    want_error_code: eval_conflict_error
`;
    const t = io({ 'c.yaml': yaml });
    expect(await main(['test', 'c.yaml'], t)).toBe(1);
    expect(t.stdout).toContain('FAIL c.yaml: wrong');
    expect(t.stdout.trimEnd().split('\n').pop()).toBe('2 passed, 1 failed');
  });

  it('runs regorus-format cases', async () => {
    const yaml = `cases:
  - note: rule
    data: {}
    modules: ["package t\\n\\np[x] { x := [1, 2][_] }"]
    query: data.t.p
    want_result:
      set!: [1, 2]
  - note: err
    data: {}
    modules: ["package t\\nq := 1\\nq := 2"]
    query: data.t.q
    error: rule conflicts
`;
    const t = io({ 'r.yaml': yaml });
    expect(await main(['test', 'r.yaml'], t)).toBe(0);
    expect(t.stdout).toBe('2 passed, 0 failed\n');
  });
});
