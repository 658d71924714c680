import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { normalizeFlowIndent } from './cases.js';
import { RegoLimitError, RegoParseError } from './errors.js';
import { tokenize } from './lexer.js';
import { parseModule, parseQuery } from './parser.js';

const FIXTURES = vector('regorus');

interface LexCase {
  note: string;
  rego: string;
  tokens?: string[] | null;
  error?: string;
}

interface ParseCase {
  note: string;
  rego: string;
  error?: string;
  skip?: boolean;
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => join(dir, f))
    .sort();
}

const v0 = { regoV1: false, maxNesting: 128 };
const v1 = { regoV1: true, maxNesting: 128 };

describe('lexer: regorus lexer cases', () => {
  for (const file of yamlFiles(`${FIXTURES}/lexer-cases`)) {
    const cases = (
      parseYaml(normalizeFlowIndent(readFileSync(file, 'utf8')), { schema: 'failsafe' }) as {
        cases: LexCase[];
      }
    ).cases;
    for (const c of cases) {
      it(`${file.slice(FIXTURES.length + 13)}: ${c.note}`, () => {
        const rego = c.rego ?? '';
        if (c.error !== undefined) {
          expect(() => tokenize(rego)).toThrow(RegoParseError);
          // serde_json's own wording is not reproduced; the rejection is.
          if (!c.error.includes('serde_json')) expect(() => tokenize(rego)).toThrow(c.error);
          return;
        }
        const texts = tokenize(rego).map((t) => t.text);
        expect(texts).toEqual(c.tokens);
      });
    }
  }
});

describe('parser: regorus parser cases (v0)', () => {
  for (const file of yamlFiles(`${FIXTURES}/parser-cases`)) {
    const cases = (
      parseYaml(normalizeFlowIndent(readFileSync(file, 'utf8')), { schema: 'failsafe' }) as {
        cases: ParseCase[];
      }
    ).cases;
    for (const c of cases) {
      const name = `${file.slice(FIXTURES.length + 14)}: ${c.note}`;
      if (String(c.skip) === 'true') continue;
      it(name, () => {
        const src = { name: 'case.rego', text: c.rego };
        if (c.error === undefined) {
          expect(() => parseModule(src, v0)).not.toThrow();
          return;
        }
        // regorus limits expression nesting to 32 levels; ours is configurable, so check with a small limit.
        const opts = c.error.includes('nesting too deep') ? { regoV1: false, maxNesting: 32 } : v0;
        let err: unknown;
        try {
          parseModule(src, opts);
        } catch (e) {
          err = e;
        }
        expect(err instanceof RegoParseError || err instanceof RegoLimitError).toBe(true);
        if (!c.error.includes('nesting too deep')) expect((err as Error).message).toContain(c.error);
      });
    }
  }
});

describe('parser: positions and errors', () => {
  it('reports file, line and column', () => {
    try {
      parseModule({ name: 'p.rego', text: 'package x\n\nallow if {\n  input.a ==\n}\n' }, v1);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(RegoParseError);
      const pe = e as RegoParseError;
      expect(pe.file).toBe('p.rego');
      expect(pe.line).toBe(5);
      expect(pe.col).toBe(1);
      expect(pe.message).toMatch(/^p\.rego:5:1: /);
    }
  });

  it('requires `if` and `contains` in v1, not in v0', () => {
    const body = { name: 'a.rego', text: 'package a\np { true }\n' };
    expect(() => parseModule(body, v1)).toThrow('`if` keyword is required before rule body');
    expect(() => parseModule(body, v0)).not.toThrow();
    const set = { name: 'a.rego', text: 'package a\np[x] if { x := 1 }\nq.r\n' };
    expect(() => parseModule(set, v1)).toThrow('`contains` keyword is required for partial set rules');
  });

  it('rejects shadowing input and data in v1', () => {
    expect(() => parseModule({ name: 'a', text: 'package a\ninput := 1\n' }, v1)).toThrow(
      'input cannot be shadowed',
    );
    expect(() => parseModule({ name: 'a', text: 'package a\np if { data := 1 }\n' }, v1)).toThrow(
      'data cannot be shadowed',
    );
  });

  it('rejects duplicate imports', () => {
    const m = { name: 'a', text: 'package a\nimport data.x\nimport data.x\n' };
    expect(() => parseModule(m, v1)).toThrow('import shadows');
  });

  it('accepts rego.v1 and future.keywords imports in v0 mode', () => {
    const a = parseModule(
      { name: 'a', text: 'package a\nimport rego.v1\np contains x if { some x in [1] }\n' },
      v0,
    );
    expect(a.regoV1).toBe(true);
    const b = parseModule(
      {
        name: 'b',
        text: 'package b\nimport future.keywords.in\nimport future.keywords.if\np if { 1 in [1] }\n',
      },
      v0,
    );
    expect(b.regoV1).toBe(false);
    expect(b.rules).toHaveLength(1);
  });

  it('parses numbers exactly', () => {
    const q = parseQuery({ name: 'q', text: 'x := 123456789012345678901234567890' }, v1);
    const lit = q.stmts[0]!.lit;
    expect(lit.k === 'expr' && lit.expr.k === 'assign' && lit.expr.rhs.k === 'num' && lit.expr.rhs.v).toBe(
      123456789012345678901234567890n,
    );
  });

  it('parses raw strings, comprehensions, every, some and with', () => {
    const m = parseModule(
      {
        name: 'a',
        text: [
          'package a',
          'p := `raw\\n`',
          'q := {k: v | some k, v in input}',
          'r if { every x in [1] { x > 0 } }',
          's if { f(1) with input as {} with data.x as 2 }',
          'f(x) := x',
          'default t := false',
          't := 1 if { false } else := 2',
        ].join('\n'),
      },
      v1,
    );
    expect(m.rules).toHaveLength(7);
  });
});

describe('parser: hostile input', () => {
  it('bounds nesting depth with a clear error', () => {
    const deep = `package a\nx := ${'['.repeat(5000)}${']'.repeat(5000)}\n`;
    expect(() => parseModule({ name: 'd', text: deep }, v1)).toThrow(RegoLimitError);
    const parens = `package a\nx := ${'('.repeat(5000)}1${')'.repeat(5000)}\n`;
    expect(() => parseModule({ name: 'd', text: parens }, v1)).toThrow(/nesting exceeds the limit/);
    const comprs = `package a\nx := ${'[1 | '.repeat(3000)}true${']'.repeat(3000)}\n`;
    expect(() => parseModule({ name: 'd', text: comprs }, v1)).toThrow(RegoLimitError);
  });

  it('rejects truncated sources', () => {
    const full = 'package a\np if {\n  x := {"a": [1, 2, `raw`]}\n  x.a[0] == 1\n}\n';
    for (let n = 10; n < full.length - 2; n++) {
      const text = full.slice(0, n);
      try {
        parseModule({ name: 't', text }, v1);
      } catch (e) {
        expect(e).toBeInstanceOf(RegoParseError);
      }
    }
  });

  it('rejects garbage without crashing', () => {
    let seed = 7;
    const rnd = (): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed;
    };
    const alphabet = 'package a{}[]()|&:=,.;"`\\x1 \n\tif else some in every not with as default import';
    for (let i = 0; i < 500; i++) {
      let text = 'package a\n';
      const n = rnd() % 80;
      for (let j = 0; j < n; j++) text += alphabet[rnd() % alphabet.length];
      try {
        parseModule({ name: 'g', text }, v1);
      } catch (e) {
        expect(e instanceof RegoParseError || e instanceof RegoLimitError).toBe(true);
      }
    }
  });

  it('rejects control characters in strings and stray bytes', () => {
    expect(() => tokenize('"a\u0001b"')).toThrow('invalid character in string');
    expect(() => tokenize('x @ y')).toThrow('invalid character');
    expect(() => tokenize('"unterminated')).toThrow('unmatched "');
    expect(() => tokenize('`unterminated')).toThrow('unmatched `');
  });
});
