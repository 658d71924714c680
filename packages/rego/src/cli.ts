// The `rego` command: `rego eval` evaluates a query, `rego test` runs OPA-format YAML test cases.
import { readFileSync } from 'node:fs';
import { type OptionValues, runCommand, UsageError } from '@broker/cli';
import { runCaseFile } from './cases.js';
import { Engine } from './engine.js';
import type { ErrorStyle } from './errors.js';
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

const VERSION = '0.1.0';

const HELP = `Usage: rego <COMMAND> [OPTIONS]

A Rego interpreter (v1, with a v0 mode), for trustee's and kata's policies.

Commands:
  eval  Evaluate a query; prints OPA's JSON result ({} when undefined)
  test  Run OPA-format YAML case files; prints one line per failure and "N passed, N failed"

Options:
  -h, --help     Print help (each command has its own: rego eval --help)
  -V, --version  Print version
`;

const TOP = { name: 'rego', version: VERSION, help: HELP, subcommands: ['eval', 'test'] } as const;

const EVAL = {
  name: 'rego eval',
  version: VERSION,
  help: `Usage: rego eval [OPTIONS] <QUERY>

Options:
  -d, --data <FILE>   A policy (.rego) or data document (.json); repeatable
  -i, --input <FILE>  The input document (JSON)
      --v0            Parse policies as Rego v0
      --non-strict    Built-in errors make the expression undefined instead of failing
      --errors <STYLE>  Error texts as regorus words them (regorus, default) or as OPA prints them (opa)
  -h, --help          Print help
`,
  options: {
    data: { type: 'string', short: 'd', multiple: true },
    input: { type: 'string', short: 'i' },
    v0: { type: 'boolean' },
    'non-strict': { type: 'boolean' },
    errors: { type: 'string' },
  },
  positionals: ['QUERY'],
  exitStatus: [[1, 'a file unreadable, a parse or evaluation error']],
} as const;

const TEST = {
  name: 'rego test',
  version: VERSION,
  help: `Usage: rego test [OPTIONS] <CASES.yaml>...

Options:
      --v0        Parse policies as Rego v0 (cases may also say so)
  -h, --help      Print help
`,
  options: { v0: { type: 'boolean' } },
  positionals: ['CASES...'],
  exitStatus: [[1, 'a case failed, or a file is unreadable or malformed']],
} as const;

/** Runs the command; returns the process exit code (0 success, 1 failure, 2 usage error). */
export function main(argv: string[], io: CliIO = defaultIO): Promise<number> {
  return runCommand(
    TOP,
    argv,
    ({ command, rest }) =>
      command === 'eval'
        ? runCommand(
            EVAL,
            rest,
            ({ values, positionals }) => evalCommand(values, positionals[0] as string, io),
            io,
          )
        : runCommand(TEST, rest, ({ values, positionals }) => testCommand(values, positionals, io), io),
    io,
  );
}

function evalCommand(values: OptionValues<typeof EVAL.options>, query: string, io: CliIO): number {
  const errorStyle: ErrorStyle = values.errors === 'opa' ? 'opa' : 'regorus';
  if (values.errors !== undefined && values.errors !== errorStyle) {
    throw new UsageError(`option '--errors' must be regorus or opa`);
  }
  const engine = new Engine({
    regoVersion: values.v0 ? 'v0' : 'v1',
    strictBuiltinErrors: !values['non-strict'],
    gatherPrints: true,
    errorStyle,
  });
  for (const f of values.data ?? []) {
    const text = io.readFile(f);
    if (f.endsWith('.json')) engine.addDataJson(text);
    else engine.addPolicy(f, text);
  }
  if (values.input !== undefined) engine.setInputJson(io.readFile(values.input));
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

function testCommand(values: OptionValues<typeof TEST.options>, files: readonly string[], io: CliIO): number {
  let passed = 0;
  let failed = 0;
  for (const f of files) {
    const outcomes = runCaseFile(f, io.readFile(f), values.v0 === undefined ? {} : { v0: values.v0 });
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
