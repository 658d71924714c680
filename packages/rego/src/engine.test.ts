import { describe, expect, it } from 'vitest';
import { Engine } from './engine.js';
import { RegoEvalError, RegoLimitError, RegoParseError } from './errors.js';
import { jsonText } from './format.js';
import { valueAtPath } from './interpreter.js';
import { ObjectValue, SetValue, toJSON, type Value } from './value.js';

function engine(src: string, opts: ConstructorParameters<typeof Engine>[0] = {}): Engine {
  const e = new Engine(opts);
  e.addPolicy('test.rego', src);
  return e;
}

function j(v: Value | undefined): string {
  return v === undefined ? 'undefined' : jsonText(v);
}

describe('Engine: rules', () => {
  it('evaluates complete, set, object and function rules', () => {
    const e = engine(`package t
p := 1
q contains x if { some x in [1, 2, 3]; x > 1 }
r[k] := v if { some k, v in {"a": 1, "b": 2} }
f(x) := x * 2
s := f(21)
a.b.c := "ref head"
`);
    expect(e.evalRule('data.t.p')).toBe(1);
    expect(j(e.evalRule('data.t.q'))).toBe('[2,3]');
    expect(j(e.evalRule('data.t.r'))).toBe('{"a":1,"b":2}');
    expect(e.evalRule('data.t.s')).toBe(42);
    expect(e.evalRule('data.t.a.b.c')).toBe('ref head');
  });

  it('returns undefined for undefined rules and rejects unknown paths', () => {
    const e = engine('package t\np if { false }\n');
    expect(e.evalRule('data.t.p')).toBeUndefined();
    expect(() => e.evalRule('data.t.nope')).toThrow(RegoEvalError);
  });

  it('applies defaults and else chains', () => {
    const e = engine(`package t
default allow := false
allow if input.user == "admin"
level := "high" if { input.n > 10 } else := "mid" if { input.n > 5 } else := "low"
`);
    e.setInput({ user: 'bob', n: 7 });
    expect(e.evalRule('data.t.allow')).toBe(false);
    expect(e.evalRule('data.t.level')).toBe('mid');
    e.setInput({ user: 'admin', n: 11 });
    expect(e.evalRule('data.t.allow')).toBe(true);
    expect(e.evalRule('data.t.level')).toBe('high');
  });

  it('supports every, not, comprehensions and membership', () => {
    const e = engine(`package t
all_pos if { every x in input.xs { x > 0 } }
none_neg if { not any_neg }
any_neg if { some x in input.xs; x < 0 }
doubled := [y | some x in input.xs; y := x * 2]
keys := {k | some k, _ in input.obj}
inv := {v: k | some k, v in input.obj}
has2 if 2 in input.xs
has_pair if "b", 2 in input.obj
`);
    e.setInput({ xs: [1, 2, 3], obj: { a: 1, b: 2 } });
    expect(e.evalRule('data.t.all_pos')).toBe(true);
    expect(e.evalRule('data.t.none_neg')).toBe(true);
    expect(j(e.evalRule('data.t.doubled'))).toBe('[2,4,6]');
    expect(j(e.evalRule('data.t.keys'))).toBe('["a","b"]');
    expect(j(e.evalRule('data.t.inv'))).toBe('{"1":"a","2":"b"}');
    expect(e.evalRule('data.t.has2')).toBe(true);
    expect(e.evalRule('data.t.has_pair')).toBe(true);
  });

  it('unifies with = in both directions and destructures', () => {
    const e = engine(`package t
p := [a, b] if { [a, {"x": b}] = [1, {"x": 2}] }
q := x if { {"k": x} = input }
`);
    e.setInput({ k: 'v' });
    expect(j(e.evalRule('data.t.p'))).toBe('[1,2]');
    expect(e.evalRule('data.t.q')).toBe('v');
  });

  it('keeps integers beyond 2^53 exact', () => {
    const e = engine('package t\nbig := 123456789012345678901234567890\nsame if { big == input.n }\n');
    e.setInputJson('{"n": 123456789012345678901234567890}');
    expect(e.evalRule('data.t.big')).toBe(123456789012345678901234567890n);
    expect(e.evalRule('data.t.same')).toBe(true);
  });

  it('merges base documents with virtual documents', () => {
    const e = engine('package t\np := data.t.base + 1\n');
    e.addData({ t: { base: 41 } });
    expect(e.evalRule('data.t.p')).toBe(42);
    const r = e.evalQuery('data.t');
    expect(j(r.result[0]!.expressions[0]!.value)).toBe('{"base":41,"p":42}');
  });
});

describe('Engine: queries', () => {
  it('returns OPA-style results with bindings and expression locations', () => {
    const e = engine('package t\nxs := [1, 2, 3]\n');
    const r = e.evalQuery('x := data.t.xs[_]; x > 1');
    expect(r.result).toHaveLength(2);
    expect(r.result.map((x) => x.bindings.x)).toEqual([2, 3]);
    expect(r.result[0]!.expressions.map((x) => x.text)).toEqual(['x := data.t.xs[_]', 'x > 1']);
    expect(r.result[0]!.expressions[1]!.location).toEqual({ row: 1, col: 20 });
  });

  it('returns no results for an undefined query and false for a false comparison', () => {
    const e = engine('package t\n');
    expect(e.evalQuery('1 = 2').result).toEqual([]);
    const r = e.evalQuery('1 == 2');
    expect(r.result[0]!.expressions[0]!.value).toBe(false);
  });

  it('rejects unsafe variables in queries', () => {
    const e = engine('package t\n');
    expect(() => e.evalQuery('x > 1')).toThrow(/unsafe/);
  });
});

describe('Engine: data and input', () => {
  it('deep-merges data and rejects conflicts without partial updates', () => {
    const e = new Engine();
    e.addData({ a: { x: 1 } });
    e.addData({ a: { y: 2 }, b: 3 });
    expect(e.evalQuery('data').result[0]!.expressions[0]!.value).toBeInstanceOf(ObjectValue);
    expect(() => e.addData({ a: { m: 1, x: 2 } })).toThrow(RegoEvalError);
    expect(j(e.evalQuery('data').result[0]!.expressions[0]!.value)).toBe('{"a":{"x":1,"y":2},"b":3}');
  });

  it('replaces data with clearData and keeps clones independent', () => {
    const e = engine('package t\np := data.v\n');
    e.addData({ v: 1 });
    const c = e.clone();
    c.clearData();
    c.addData({ v: 2 });
    expect(e.evalRule('data.t.p')).toBe(1);
    expect(c.evalRule('data.t.p')).toBe(2);
  });

  it('rejects non-object data and bounds document depth', () => {
    const e = new Engine({ limits: { maxDocumentDepth: 10 } });
    expect(() => e.addData([1])).toThrow(RegoEvalError);
    let deep: unknown = 1;
    for (let i = 0; i < 50; i++) deep = { x: deep };
    expect(() => e.setInput(deep)).toThrow(RegoLimitError);
    expect(() => e.setInputJson('['.repeat(100) + ']'.repeat(100))).toThrow(RegoLimitError);
    expect(() => e.setInputJson('{"a":')).toThrow(RegoParseError);
  });
});

describe('Engine: errors', () => {
  it('reports unknown functions when the policy is prepared', () => {
    const e = engine('package t\np if { no_such_fn(1) }\n');
    expect(() => e.prepare()).toThrow(RegoParseError);
    expect(() => e.prepare()).toThrow('could not find function no_such_fn');
  });

  it('rejects unsupported builtins when the policy is added', () => {
    const e = new Engine();
    expect(() => e.addPolicy('a.rego', 'package t\np := http.send({"url": "x"})\n')).toThrow(
      'builtin http.send is not supported by this engine',
    );
    expect(e.getPackages()).toEqual([]);
  });

  it('rejects builtins removed in v1 in v1 modules only', () => {
    const v1 = engine('package t\np := cast_array({1})\n');
    expect(() => v1.prepare()).toThrow('could not find function cast_array');
    const v0 = engine('package t\np := any([true])\n', { regoVersion: 'v0' });
    expect(v0.evalRule('data.t.p')).toBe(true);
  });

  it('raises conflict errors for complete rules and functions', () => {
    const e = engine(`package t
p := 1
p := 2
f(x) := 1 if x > 0
f(x) := 2 if x > 0
q := f(1)
o[k] := v if { some k, v in [["a", 1], ["a", 2]][_] }
`);
    expect(() => e.evalRule('data.t.p')).toThrow(/conflict/);
    try {
      e.evalRule('data.t.q');
      expect.unreachable();
    } catch (err) {
      expect((err as RegoEvalError).code).toBe('eval_conflict_error');
    }
  });

  it('makes builtin errors undefined in non-strict mode and raises them in strict mode', () => {
    const src = 'package t\np := count(input.x)\nq if { not count(input.x) }\n';
    const strict = engine(src);
    strict.setInput({ x: 5 });
    expect(() => strict.evalRule('data.t.p')).toThrow(RegoEvalError);
    const lax = engine(src, { strictBuiltinErrors: false });
    lax.setInput({ x: 5 });
    expect(lax.evalRule('data.t.p')).toBeUndefined();
    expect(lax.evalRule('data.t.q')).toBe(true);
  });

  it('detects recursion', () => {
    const e = engine('package t\np if q\nq if p\n');
    try {
      e.evalRule('data.t.p');
      expect.unreachable();
    } catch (err) {
      expect((err as RegoEvalError).code).toBe('rego_recursion_error');
    }
    const f = engine('package t\nf(x) := f(x)\np := f(1)\n');
    expect(() => f.evalRule('data.t.p')).toThrow(/recursion/);
  });
});

describe('Engine: limits', () => {
  it('stops runaway evaluation after the step budget', () => {
    const e = engine(
      'package t\np := count([x | some a in numbers; some b in numbers; x := a * b])\nnumbers := [i | some i in input]\n',
      {
        limits: { maxSteps: 10_000 },
      },
    );
    e.setInput(Array.from({ length: 500 }, (_, i) => i));
    expect(() => e.evalRule('data.t.p')).toThrow(RegoLimitError);
  });

  it('bounds collection size', () => {
    const e = engine('package t\np := {x | some x in input}\n', { limits: { maxCollectionSize: 100 } });
    e.setInput(Array.from({ length: 200 }, (_, i) => i));
    expect(() => e.evalRule('data.t.p')).toThrow(/collection exceeds/);
  });

  it('bounds the memory an evaluation builds: a million distinct 8 KiB strings stop at the budget', () => {
    const bomb = `package policy
pad := sprintf("%08192d", [0])
bomb := {s | some i in numbers.range(1, 1000000); s := sprintf("%d%s", [i, pad])}
allow if count(bomb) > 0
`;
    const e = engine(bomb, { limits: { maxMemoryBytes: 16 * 1024 * 1024 } });
    let err: unknown;
    try {
      e.evalRule('data.policy.allow');
    } catch (x) {
      err = x;
    }
    expect(err).toBeInstanceOf(RegoLimitError);
    expect((err as RegoLimitError).limit).toBe('memory');
    expect((err as Error).message).toBe('evaluation exceeded the memory limit of 16777216 bytes');
  });

  it('charges composite set members by their key, and clones by their entries', () => {
    const members = engine('package t\np := {[i, input] | some i in numbers.range(1, 100000)}\n', {
      limits: { maxMemoryBytes: 4 * 1024 * 1024 },
    });
    members.setInput('x'.repeat(1024));
    expect(() => members.evalRule('data.t.p')).toThrow(/memory limit/);
    const unions = engine(
      'package t\nbig := {sprintf("%d", [i]): i | some i in numbers.range(1, 10000)}\np := [object.union(big, {"k": i}) | some i in numbers.range(1, 10000)]\n',
      { limits: { maxMemoryBytes: 16 * 1024 * 1024 } },
    );
    expect(() => unions.evalRule('data.t.p')).toThrow(/memory limit/);
  });

  it('charges what a builtin returns however deeply it is nested', () => {
    // json.unmarshal makes a new 8 KiB string under 100 levels of arrays on each call.
    const doc = `${'['.repeat(100)}"${'x'.repeat(8192)}"${']'.repeat(100)}`;
    const e = engine('package t\np := [json.unmarshal(input) | some i in numbers.range(1, 1000)]\n', {
      limits: { maxMemoryBytes: 8 * 1024 * 1024 },
    });
    e.setInput(doc);
    expect(() => e.evalRule('data.t.p')).toThrow(/memory limit/);
  });

  it('charges two bytes a character, as V8 keeps a string with a character past U+00FF', () => {
    const e = engine(
      'package t\np := {s | some i in numbers.range(1, 1000); s := sprintf("%d%s", [i, input])}\n',
      { limits: { maxMemoryBytes: 12 * 1024 * 1024 } },
    );
    e.setInput('é'.repeat(8192));
    expect(() => e.evalRule('data.t.p')).toThrow(/memory limit/);
  });

  it('leaves ordinary evaluations well under the default memory budget', () => {
    const e = engine('package t\np := {sprintf("%d", [i]) | some i in numbers.range(1, 1000)}\n');
    expect((e.evalRule('data.t.p') as SetValue).size).toBe(1000);
  });

  it('bounds policy size', () => {
    const e = new Engine({ limits: { maxPolicyBytes: 100 } });
    expect(() => e.addPolicy('big.rego', `package t\n${'# padding\n'.repeat(20)}`)).toThrow(RegoLimitError);
  });

  it('rejects long operator and reference chains and deep documents with limit errors', () => {
    const e = new Engine();
    expect(() => e.addPolicy('a.rego', `package t\np := ${Array(5000).fill('1').join(' + ')}\n`)).toThrow(
      RegoLimitError,
    );
    expect(() => e.addPolicy('b.rego', `package t\np := input${'.a'.repeat(5000)}\n`)).toThrow(
      RegoLimitError,
    );
    expect(() => e.evalQuery(`x := ${'['.repeat(3000)}${']'.repeat(3000)}`)).toThrow(RegoLimitError);
    const ok = new Engine();
    ok.addPolicy('c.rego', `package t\np := ${Array(500).fill('1').join(' + ')}\n`);
    expect(ok.evalRule('data.t.p')).toBe(500);
  });

  it('schedules many statements written in reverse dependency order', () => {
    const n = 2000;
    const stmts = Array.from({ length: n }, (_, i) => `  x${i + 1} = x${i + 2} + 1`).join('\n');
    const e = engine(`package t\np := x1 if {\n${stmts}\n  x${n + 1} = 0\n}\n`);
    expect(e.evalRule('data.t.p')).toBe(n);
  });

  it('bounds call depth', () => {
    let src = 'package t\nf0(x) := x\n';
    for (let i = 1; i < 40; i++) src += `f${i}(x) := f${i - 1}(x)\n`;
    src += 'p := f39(1)\n';
    const e = engine(src, { limits: { maxCallDepth: 20 } });
    expect(() => e.evalRule('data.t.p')).toThrow(RegoLimitError);
    expect(engine(src).evalRule('data.t.p')).toBe(1);
  });
});

describe('Engine: print', () => {
  it('formats arguments like regorus and locates the call', () => {
    const e = engine(
      `package t
p if {
  print("s:", "raw", 1, 1.5, true, null, [1, "a"], {"b": {"c": 2}}, {2, 1}, input.missing)
}
`,
      { gatherPrints: true },
    );
    e.evalRule('data.t.p');
    expect(e.takePrints()).toEqual([
      'test.rego:3: s: raw 1 1.5 true null [1, "a"] {"b": {"c": 2}} {1, 2} <undefined>',
    ]);
    expect(e.takePrints()).toEqual([]);
  });

  it('discards prints unless gathering', () => {
    const e = engine('package t\np if { print("x") }\n');
    expect(e.evalRule('data.t.p')).toBe(true);
    expect(e.takePrints()).toEqual([]);
  });
});

describe('Engine: with', () => {
  it('replaces input, data and functions for one expression', () => {
    const e = engine(`package t
f(x) := x + 1
g(x) := x * 10
base := data.base
p := v if { v := base with data.base as 5 }
q := v if { v := input.a with input as {"a": 7} }
r := v if { v := f(1) with f as g }
s := v if { v := f(1) with f as 99 }
`);
    e.addData({ base: 1 });
    expect(e.evalRule('data.t.p')).toBe(5);
    expect(e.evalRule('data.t.base')).toBe(1);
    expect(e.evalRule('data.t.q')).toBe(7);
    expect(e.evalRule('data.t.r')).toBe(10);
    expect(e.evalRule('data.t.s')).toBe(99);
  });
});

describe('Engine: host builtins and cloning', () => {
  it('calls registered host builtins', () => {
    const e = engine('package t\np := lookup("a")\nq := lookup("zz")\nr if { "x" in lookup("a") }\n');
    const calls: Value[] = [];
    e.registerBuiltin('lookup', 1, ([k]) => {
      calls.push(k!);
      return k === 'a' ? ['x', 'y'] : null;
    });
    expect(j(e.evalRule('data.t.p'))).toBe('["x","y"]');
    expect(e.evalRule('data.t.q')).toBeNull();
    expect(e.evalRule('data.t.r')).toBe(true);
    expect(calls).toContain('a');
    expect(() => e.registerBuiltin('lookup', 1, () => null)).toThrow(RegoEvalError);
  });

  it('reports host builtin failures as builtin errors', () => {
    const e = engine('package t\np := boom(1)\n');
    e.registerBuiltin('boom', 1, () => {
      throw new Error('kaput');
    });
    expect(() => e.evalRule('data.t.p')).toThrow(/kaput/);
  });

  it('clones share policies but not later changes', () => {
    const a = engine('package t\np := input.x\n');
    a.setInput({ x: 1 });
    const b = a.clone();
    b.setInput({ x: 2 });
    b.addPolicy('more.rego', 'package t\nq := 3\n');
    expect(a.evalRule('data.t.p')).toBe(1);
    expect(b.evalRule('data.t.p')).toBe(2);
    expect(b.evalRule('data.t.q')).toBe(3);
    expect(() => a.evalRule('data.t.q')).toThrow();
  });

  it('returns the package name from addPolicy and lists packages', () => {
    const e = new Engine();
    expect(e.addPolicy('a.rego', 'package a.b\n')).toBe('data.a.b');
    expect(e.getPackages()).toEqual(['data.a.b']);
  });
});

describe('Engine: v0 mode', () => {
  it('accepts v0 syntax only in v0 mode', () => {
    const src = 'package t\np[x] { x := input[_] }\nq { true }\n';
    expect(() => new Engine().addPolicy('a', src)).toThrow(RegoParseError);
    const e = new Engine({ regoVersion: 'v0' });
    e.addPolicy('a', src);
    e.setInput([1, 2]);
    expect(toJSON(e.evalRule('data.t.p')!)).toEqual([1, 2]);
    expect(e.evalRule('data.t.q')).toBe(true);
    expect(e.evalRule('data.t.p')).toBeInstanceOf(SetValue);
  });
});

describe('Engine: several rules with a prepared input', () => {
  const src = `package t
import rego.v1
shared := count(input.items)
a := shared + 1
b := shared * 10
c if { false }
`;

  it('evaluates rules together with the given input and leaves the engine untouched', () => {
    const e = engine(src);
    e.setInput({ items: [1] });
    const input = e.inputValue({ items: [1, 2, 3] });
    expect(e.evalRules(['data.t.a', 'data.t.b', 'data.t.c'], input)).toEqual([4, 30, undefined]);
    // The same value again, and the engine's own input as before.
    expect(e.evalRules(['data.t.b'], input)).toEqual([30]);
    expect(e.evalRule('data.t.a')).toBe(2);
    expect(e.evalRules(['data.t.a'], undefined)).toEqual([undefined]);
    expect(j(input)).toBe('{"items":[1,2,3]}');
  });

  it('gives what separate evaluations give, and refuses unknown paths as evalRule does', () => {
    const e = engine(src);
    const input = e.inputValue({ items: ['x', 'y'] });
    e.setInput({ items: ['x', 'y'] });
    expect(e.evalRules(['data.t.a', 'data.t.b'], input)).toEqual([
      e.evalRule('data.t.a'),
      e.evalRule('data.t.b'),
    ]);
    expect(() => e.evalRules(['data.t.a', 'data.t.nope'], input)).toThrow(
      'not a valid rule path: data.t.nope',
    );
    expect(e.hasRule('data.t.a')).toBe(true);
    expect(e.hasRule('data.t.nope')).toBe(false);
  });

  it('gives each rule the step budget of a separate evaluation', () => {
    const e = engine(
      'package t\nimport rego.v1\nn := count([x | some x in numbers.range(1, 300)])\nm := count([x | some x in numbers.range(1, 300)])\n',
      { limits: { maxSteps: 1000 } },
    );
    expect(e.evalRules(['data.t.n', 'data.t.m'], undefined)).toEqual([300, 300]);
    expect(() => e.evalRule('data.t.n')).not.toThrow();
  });

  it('converts input with the depth limit setInput has', () => {
    const e = engine(src, { limits: { maxDocumentDepth: 3 } });
    expect(() => e.inputValue({ a: { b: { c: { d: { e: 1 } } } } })).toThrow(RegoLimitError);
  });

  it('knows whether a policy reads the clock or random numbers, or calls host builtins', () => {
    expect(engine(src).isDeterministic()).toBe(true);
    expect(engine('package t\nimport rego.v1\np if time.now_ns() > 0\n').isDeterministic()).toBe(false);
    expect(engine('package t\nimport rego.v1\np := rand.intn("k", 10)\n').isDeterministic()).toBe(false);
    expect(engine('package t\nimport rego.v1\np := [uuid.rfc4122("k")]\n').isDeterministic()).toBe(false);
    expect(engine('package t\nimport rego.v1\np := {x | x := time.now_ns()}\n').isDeterministic()).toBe(
      false,
    );
    const host = new Engine();
    host.registerBuiltin('lookup', 1, () => 1);
    host.addPolicy('h.rego', 'package t\nimport rego.v1\np := 1\n');
    expect(host.isDeterministic()).toBe(false);
  });
});

describe('Engine: input reads', () => {
  it('reports each read of input with the path and the value found', () => {
    const e = engine(
      'package t\nimport rego.v1\np if { input.a.b == 1; not input.c }\nq := [x | some x in input.list]\n',
    );
    const reads: [string[], unknown][] = [];
    const input = e.inputValue({ a: { b: 1 }, list: [1, 2], secret: 'never read' });
    e.evalRules(['data.t.p', 'data.t.q'], input, (path, v) =>
      reads.push([[...path], v === undefined ? undefined : toJSON(v)]),
    );
    expect(reads).toEqual([
      [['a', 'b'], 1],
      [['c'], undefined],
      [['list'], [1, 2]],
    ]);
    expect(valueAtPath(input, ['a', 'b'])).toBe(1);
    expect(valueAtPath(input, ['a', 'x'])).toBeUndefined();
  });

  it('knows whether a policy uses with, and which host builtins the caller accounts for', () => {
    expect(engine('package t\nimport rego.v1\np if { input.a == 1 with input.a as 1 }\n').usesWith()).toBe(
      true,
    );
    expect(engine('package t\nimport rego.v1\np := input.a\n').usesWith()).toBe(false);
    const host = new Engine();
    host.registerBuiltin('lookup', 1, () => 1);
    host.addPolicy('h.rego', 'package t\nimport rego.v1\np := lookup(1)\n');
    expect(host.isDeterministic(new Set(['lookup']))).toBe(true);
    expect(host.isDeterministic(new Set(['other']))).toBe(false);
  });
});
