// The `errorStyle` option (regorus' or OPA's error texts) and unsupported builtins replaced with `with`.
import { describe, expect, it } from 'vitest';
import { Engine, type EngineOptions } from './engine.js';
import { RegoEvalError, RegoParseError } from './errors.js';

function failure(src: string, query: string, opts: EngineOptions = {}): Error {
  const e = new Engine(opts);
  try {
    e.addPolicy('test-0.rego', src);
    e.evalQuery(query);
  } catch (err) {
    return err as Error;
  }
  throw new Error('no error');
}

describe('errorStyle', () => {
  const complete = 'package x\np := 1\np := 2 if { true }\n';
  const fn = 'package x\nf(a) := 1\nf(a) := 2 if { a > 0 }\nq := f(1)\n';
  const keys = 'package x\nq[k] := v if { some v in [1, 2]; k := "a" }\n';
  const builtin = 'package x\np := concat(1, [])\n';

  it('keeps regorus texts by default', () => {
    expect(failure(complete, 'data.x.p').message).toMatch(/^test-0\.rego:\d+:\d+: /);
    expect(failure(fn, 'data.x.q').message).not.toContain('produced conflicting values');
    expect(failure(builtin, 'data.x.p').message).toBe(
      'test-0.rego:2:6: concat: operand 1 must be string but got number',
    );
  });

  it("gives OPA's texts and conflict wording in OPA style", () => {
    const opa = { errorStyle: 'opa' } as const;
    expect(failure(complete, 'data.x.p', opa).message).toMatch(
      /^test-0\.rego:\d+: eval_conflict_error: rule data\.x\.p produced conflicting values$/,
    );
    expect(failure(fn, 'data.x.q', opa).message).toMatch(
      /eval_conflict_error: function data\.x\.f produced conflicting values for the same inputs$/,
    );
    expect(failure(keys, 'data.x.q', opa).message).toMatch(
      /eval_conflict_error: object keys must be unique$/,
    );
    const b = failure(builtin, 'data.x.p', opa);
    expect(b).toBeInstanceOf(RegoEvalError);
    expect(b.message).toBe('test-0.rego:2: eval_type_error: concat: operand 1 must be string but got number');
    const parse = failure('package x\np := 1 +\n', 'data.x.p', opa);
    expect(parse).toBeInstanceOf(RegoParseError);
    expect(parse.message).toMatch(/^1 error occurred: test-0\.rego:\d+: rego_parse_error: /);
  });
});

describe('unsupported builtins', () => {
  it('are refused at load, naming the builtin', () => {
    expect(() =>
      new Engine().addPolicy('a.rego', 'package a\np := http.send({"url": "x", "method": "get"})\n'),
    ).toThrow('a.rego:2:6: builtin http.send is not supported by this engine');
  });

  it('load when a `with` modifier replaces them, and fail only where not replaced', () => {
    const e = new Engine();
    e.addPolicy(
      'a.rego',
      `package a
mock(req) := {"body": {"roles": ["admin"]}}
allow if "admin" in http.send({"method": "GET", "url": "u"}).body.roles
test_allow if allow with http.send as mock
`,
    );
    expect(e.evalRule('data.a.test_allow')).toBe(true);
    expect(() => e.evalRule('data.a.allow')).toThrow('http.send: not supported by this engine');
  });
});
