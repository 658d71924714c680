// The `rego` command: `rego eval` evaluates a query, `rego test` runs OPA-format YAML test cases.
import { readFileSync } from 'node:fs';
import { runCaseFile } from './cases.js';
import { Engine } from './engine.js';
import { RegoEvalError, RegoLimitError, RegoParseError } from './errors.js';
import { plainNumber } from './format.js';
import { ObjectValue, SetValue, type Value } from './value.js';

export interface CliIO {
  readonly out: (s: string) => void;
  readonly err: (s: string) => void;
  readonly readFile: (path: string) => string;
}

const defaultIO: CliIO = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
  readFile: (p) => readFileSync(p, 'utf8'),
};

const USAGE = `usage:
  rego eval [--v0] [--non-strict] [-d file.rego|file.json]... [-i input.json] QUERY
  rego test [--v0] CASES.yaml...
`;

/** Runs the command; returns the process exit code (0 success, 1 failure, 2 usage error). */
export async function main(argv: string[], io: CliIO = defaultIO): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    if (cmd === 'eval') return evalCommand(rest, io);
    if (cmd === 'test') return testCommand(rest, io);
    if (cmd === '-h' || cmd === '--help' || cmd === 'help') {
      io.out(USAGE);
      return 0;
    }
    io.err(USAGE);
    return 2;
  } catch (e) {
    if (e instanceof RegoParseError || e instanceof RegoEvalError || e instanceof RegoLimitError) {
      io.err(`rego: ${e.message}\n`);
      return 1;
    }
    if (e instanceof UsageError) {
      io.err(`rego: ${e.message}\n${USAGE}`);
      return 2;
    }
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string') {
      io.err(`rego: ${(e as Error).message}\n`);
      return 1;
    }
    throw e;
  }
}

class UsageError extends Error {}

function evalCommand(args: string[], io: CliIO): number {
  let v0 = false;
  let strict = true;
  const dataFiles: string[] = [];
  let inputFile: string | undefined;
  let query: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--v0') v0 = true;
    else if (a === '--non-strict') strict = false;
    else if (a === '-d' || a === '--data') {
      const f = args[++i];
      if (f === undefined) throw new UsageError(`${a} needs a file`);
      dataFiles.push(f);
    } else if (a === '-i' || a === '--input') {
      const f = args[++i];
      if (f === undefined) throw new UsageError(`${a} needs a file`);
      inputFile = f;
    } else if (a.startsWith('-') && a.length > 1) {
      throw new UsageError(`unknown option ${a}`);
    } else if (query === undefined) query = a;
    else throw new UsageError('more than one query given');
  }
  if (query === undefined) throw new UsageError('missing query');
  const engine = new Engine({
    regoVersion: v0 ? 'v0' : 'v1',
    strictBuiltinErrors: strict,
    gatherPrints: true,
  });
  for (const f of dataFiles) {
    const text = io.readFile(f);
    if (f.endsWith('.json')) engine.addDataJson(text);
    else engine.addPolicy(f, text);
  }
  if (inputFile !== undefined) engine.setInputJson(io.readFile(inputFile));
  const r = engine.evalQuery(query);
  for (const p of engine.takePrints()) io.err(`${p}\n`);
  if (r.result.length === 0) {
    io.out('{}\n');
    return 0;
  }
  const out = {
    result: r.result.map((x) => ({
      expressions: x.expressions.map((e) => ({ value: e.value, text: e.text, location: e.location })),
      ...(Object.keys(x.bindings).length > 0 ? { bindings: x.bindings } : {}),
    })),
  };
  io.out(`${pretty(out, '')}\n`);
  return 0;
}

function testCommand(args: string[], io: CliIO): number {
  let v0: boolean | undefined;
  const files: string[] = [];
  for (const a of args) {
    if (a === '--v0') v0 = true;
    else if (a.startsWith('-') && a.length > 1) throw new UsageError(`unknown option ${a}`);
    else files.push(a);
  }
  if (files.length === 0) throw new UsageError('no case files given');
  let passed = 0;
  let failed = 0;
  for (const f of files) {
    const outcomes = runCaseFile(f, io.readFile(f), v0 === undefined ? {} : { v0 });
    for (const o of outcomes) {
      if (o.status === 'pass') passed++;
      else if (o.status === 'fail') {
        failed++;
        io.out(`FAIL ${o.file}: ${o.note}: ${o.reason ?? ''}\n`);
      } else {
        io.out(`SKIP ${o.file}: ${o.note}: ${o.reason ?? ''}\n`);
      }
    }
  }
  io.out(`${passed} passed, ${failed} failed\n`);
  return failed === 0 ? 0 : 1;
}

/** Pretty JSON (two-space indent) of Rego values and plain objects; sets become sorted arrays. */
function pretty(v: unknown, indent: string): string {
  const next = `${indent}  `;
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
      return plainNumber(v);
    case 'bigint':
      return v.toString();
    case 'string':
      return JSON.stringify(v);
  }
  let entries: [string, unknown][] | undefined;
  let items: unknown[] | undefined;
  if (Array.isArray(v)) items = v;
  else if (v instanceof SetValue) items = v.sorted();
  else if (v instanceof ObjectValue) {
    entries = v.sortedEntries().map(([k, x]) => [typeof k === 'string' ? k : compactKey(k), x]);
  } else entries = Object.entries(v as Record<string, unknown>);
  if (items) {
    if (items.length === 0) return '[]';
    return `[\n${items.map((x) => next + pretty(x, next)).join(',\n')}\n${indent}]`;
  }
  if (!entries || entries.length === 0) return '{}';
  return `{\n${entries.map(([k, x]) => `${next}${JSON.stringify(k)}: ${pretty(x, next)}`).join(',\n')}\n${indent}}`;
}

function compactKey(k: Value): string {
  return pretty(k, '').replace(/\n\s*/g, '');
}
