// Runner for YAML test cases in OPA's format (v1/test/cases) and in regorus' variant of it
// (tests/interpreter/cases). Used by the conformance tests and by `rego test`.
import { parse as parseYaml } from 'yaml';
import { Engine, type QueryResults } from './engine.js';
import { RegoEvalError, RegoLimitError, RegoParseError } from './errors.js';
import { jsonText } from './format.js';
import { compare, equals, ObjectValue, SetValue, type Value } from './value.js';

export type CaseFormat = 'opa' | 'regorus';

export interface CaseOutcome {
  readonly file: string;
  readonly note: string;
  readonly status: 'pass' | 'fail' | 'skip';
  /** Why a case failed or was skipped. */
  readonly reason?: string;
  /** For an expected error: the error message differed but an error of a builtin occurred. */
  readonly messageDiffers?: boolean;
}

export interface RunOptions {
  /** Case format; by default detected from the fields the cases use. */
  readonly format?: CaseFormat;
  /** Rego v0 for all cases; by default OPA cases under a `v0/` folder and regorus cases except bindings.yaml. */
  readonly v0?: boolean;
  /** Returns a reason to skip a case by name, or undefined to run it. */
  readonly skip?: (file: string, note: string) => string | undefined;
}

type Raw = Map<unknown, unknown>;

function get(m: Raw, k: string): unknown {
  return m.get(k);
}

/** YAML (parsed with Map objects) to a Rego value, with regorus' `set!` / `object!` encodings. */
export function yamlToValue(y: unknown, encodings: boolean): Value | undefined {
  if (y === null || typeof y === 'boolean' || typeof y === 'string') {
    if (encodings && y === '#undefined') return undefined;
    return y;
  }
  if (typeof y === 'number') return Object.is(y, -0) ? 0 : y;
  if (typeof y === 'bigint') return y >= -9007199254740991n && y <= 9007199254740991n ? Number(y) : y;
  if (Array.isArray(y)) return y.map((x) => yamlToValue(x, encodings) ?? null);
  if (y instanceof Map) {
    if (encodings && y.size === 1) {
      const s = y.get('set!');
      if (Array.isArray(s)) {
        const out = new SetValue();
        for (const x of s) out.add(yamlToValue(x, encodings) ?? null);
        return out;
      }
      const o = y.get('object!');
      if (Array.isArray(o)) {
        const out = new ObjectValue();
        for (const item of o) {
          if (!(item instanceof Map)) continue;
          out.set(
            yamlToValue(item.get('key'), encodings) ?? null,
            yamlToValue(item.get('value'), encodings) ?? null,
          );
        }
        return out;
      }
    }
    const out = new ObjectValue();
    for (const [k, v] of y) out.set(yamlToValue(k, encodings) ?? null, yamlToValue(v, encodings) ?? null);
    return out;
  }
  return String(y);
}

function detectFormat(cases: Raw[]): CaseFormat {
  for (const c of cases) {
    for (const k of ['error', 'no_result', 'skip', 'want_prints', 'strict', 'execution_timer', 'traces']) {
      if (c.has(k)) return 'regorus';
    }
    for (const k of ['want_error', 'want_error_code', 'input_term', 'strict_error', 'want_defined']) {
      if (c.has(k)) return 'opa';
    }
    const wr = c.get('want_result');
    if (wr !== undefined && !(Array.isArray(wr) && wr.every((x) => x instanceof Map))) return 'regorus';
  }
  return 'opa';
}

/**
 * Indents the continuation lines of multi-line flow collections (`key: [` ... `]`). serde_yaml accepts them
 * at any indentation, the `yaml` package requires them to be indented deeper than their key.
 */
export function normalizeFlowIndent(text: string): string {
  const lines = text.split('\n');
  let blockIndent = -1;
  let depth = 0;
  let baseIndent = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const indent = line.length - line.trimStart().length;
    if (blockIndent >= 0) {
      if (line.trim() === '' || indent > blockIndent) continue;
      blockIndent = -1;
    }
    if (depth > 0 && line.trim() !== '' && indent <= baseIndent) {
      lines[i] = ' '.repeat(baseIndent + 2 - indent) + line;
    }
    if (depth === 0) baseIndent = indent;
    let quote = '';
    let prev = '';
    for (const ch of line) {
      if (quote) {
        if (ch === quote) quote = '';
      } else if (ch === '"' || ch === "'") quote = ch;
      else if (ch === '#' && (prev === '' || prev === ' ')) break;
      else if ((ch === '[' || ch === '{') && (depth > 0 || prev === '' || prev === ':' || prev === '-'))
        depth++;
      else if ((ch === ']' || ch === '}') && depth > 0) depth--;
      if (ch !== ' ') prev = ch;
      else if (prev !== '') prev = prev === ':' || prev === '-' ? prev : ' ';
    }
    if (depth === 0 && /(^|:\s|-\s)\s*[|>][-+]?\s*$/.test(line.trimEnd())) blockIndent = indent;
  }
  return lines.join('\n');
}

/** Runs every case of one YAML file. */
export function runCaseFile(file: string, text: string, opts: RunOptions = {}): CaseOutcome[] {
  const doc = parseYaml(normalizeFlowIndent(text), { mapAsMap: true, intAsBigInt: true }) as unknown;
  if (!(doc instanceof Map) || !Array.isArray(doc.get('cases'))) {
    return [{ file, note: '(file)', status: 'fail', reason: 'no `cases` list' }];
  }
  const cases = (doc.get('cases') as unknown[]).filter((c): c is Raw => c instanceof Map);
  const format = opts.format ?? detectFormat(cases);
  return cases.map((c) => {
    const note = String(get(c, 'note') ?? '(unnamed)');
    const reason = opts.skip?.(file, note);
    if (reason !== undefined) return { file, note, status: 'skip', reason };
    if (format === 'regorus' && get(c, 'skip') === true)
      return { file, note, status: 'skip', reason: 'skip: true' };
    try {
      return format === 'regorus' ? runRegorusCase(file, note, c, opts) : runOpaCase(file, note, c, opts);
    } catch (e) {
      return { file, note, status: 'fail', reason: `runner: ${(e as Error).message}` };
    }
  });
}

function isEngineError(e: unknown): e is Error {
  return e instanceof RegoParseError || e instanceof RegoEvalError || e instanceof RegoLimitError;
}

/** An engine with the case's modules and data. OPA's runner names modules `test-N.rego` and prints OPA's errors. */
function loadEngine(c: Raw, v0: boolean, strict: boolean, format: CaseFormat): Engine {
  const e = new Engine({
    regoVersion: v0 ? 'v0' : 'v1',
    strictBuiltinErrors: strict,
    gatherPrints: true,
    errorStyle: format === 'opa' ? 'opa' : 'regorus',
  });
  const modules = get(c, 'modules');
  if (Array.isArray(modules)) {
    modules.forEach((m, i) => {
      e.addPolicy(format === 'opa' ? `test-${i}.rego` : `rego_${i}`, String(m));
    });
  }
  const data = get(c, 'data');
  if (data instanceof Map) e.addData(yamlToValue(data, false));
  e.prepare();
  return e;
}

function querySummary(r: QueryResults): Value[] {
  // regorus' test driver: one result gives its bindings (or each expression's value); several results
  // give each one's bindings (or the array of its expression values).
  const out: Value[] = [];
  const bindingsValue = (b: Record<string, Value>): ObjectValue => {
    const o = new ObjectValue();
    for (const [k, v] of Object.entries(b)) o.set(k, v);
    return o;
  };
  if (r.result.length === 1) {
    const only = r.result[0]!;
    if (Object.keys(only.bindings).length > 0) out.push(bindingsValue(only.bindings));
    else for (const e of only.expressions) out.push(e.value);
  } else {
    for (const x of r.result) {
      if (Object.keys(x.bindings).length > 0) out.push(bindingsValue(x.bindings));
      else out.push(x.expressions.map((e) => e.value));
    }
  }
  return out;
}

function runRegorusCase(file: string, note: string, c: Raw, opts: RunOptions): CaseOutcome {
  const v0 = opts.v0 ?? !file.includes('bindings.yaml');
  const strict = get(c, 'strict') !== false;
  const wantRaw = c.has('want_result') ? get(c, 'want_result') : undefined;
  const wantError = get(c, 'error');
  const noResult = get(c, 'no_result') === true;
  const wantPrints = get(c, 'want_prints');
  let results: Value[] = [];
  let prints: string[] = [];
  try {
    const e = loadEngine(c, v0, strict, 'regorus');
    const inputRaw = get(c, 'input');
    const inputs: (Value | undefined)[] = [];
    if (inputRaw instanceof Map && Array.isArray(inputRaw.get('many!')) && inputRaw.size === 1) {
      for (const x of inputRaw.get('many!') as unknown[]) inputs.push(yamlToValue(x, false));
    } else if (inputRaw !== undefined) {
      inputs.push(yamlToValue(inputRaw, false));
    }
    const query = String(get(c, 'query') ?? '');
    if (inputs.length === 0) results = querySummary(e.evalQuery(query));
    else {
      for (const input of inputs) {
        e.setInput(input);
        results.push(...querySummary(e.evalQuery(query)));
      }
    }
    prints = e.takePrints();
  } catch (err) {
    if (!isEngineError(err)) throw err;
    if (typeof wantError === 'string') {
      if (err.message.includes(wantError)) return { file, note, status: 'pass' };
      const builtin =
        err instanceof RegoEvalError && (err.code === 'eval_type_error' || err.code === 'eval_builtin_error');
      return {
        file,
        note,
        status: builtin ? 'pass' : 'fail',
        messageDiffers: true,
        reason: `error \`${err.message}\` does not contain \`${wantError}\``,
      };
    }
    return { file, note, status: 'fail', reason: `unexpected error: ${err.message}` };
  }
  if (wantRaw !== undefined) {
    let expected: (Value | undefined)[];
    if (wantRaw instanceof Map && wantRaw.size === 1 && Array.isArray(wantRaw.get('many!'))) {
      expected = (wantRaw.get('many!') as unknown[]).map((x) => yamlToValue(x, true));
    } else {
      expected = [yamlToValue(wantRaw, true)];
    }
    if (expected.length !== results.length) {
      return {
        file,
        note,
        status: 'fail',
        reason: `expected ${expected.length} results, got ${results.length}: ${results.map(jsonText).join(' ')}`,
      };
    }
    for (let i = 0; i < expected.length; i++) {
      const x = expected[i];
      const got = results[i]!;
      if (x === undefined || !equals(x, got)) {
        return {
          file,
          note,
          status: 'fail',
          reason: `result ${i}: expected ${x === undefined ? '<undefined>' : jsonText(x)}, got ${jsonText(got)}`,
        };
      }
    }
    if (Array.isArray(wantPrints)) {
      const want = wantPrints.map(String);
      if (want.length !== prints.length || want.some((p, i) => p !== prints[i])) {
        return { file, note, status: 'fail', reason: `prints differ: ${JSON.stringify(prints)}` };
      }
    }
    return { file, note, status: 'pass' };
  }
  if (noResult) return { file, note, status: 'pass' };
  return { file, note, status: 'fail', reason: 'evaluation succeeded but an error was expected' };
}

/** OPA's `sort_bindings`: an array (or a set, which OPA's runner sees as an array) in OPA's value order. */
function sortBindings(v: Value): Value {
  const shaped = asJsonShape(v);
  return Array.isArray(shaped) ? [...shaped].sort(compare) : shaped;
}

/** Sets as (sorted) arrays, at any depth: the JSON form OPA's runner compares. */
function asJsonShape(v: Value): Value {
  if (v instanceof SetValue) return v.sorted().map(asJsonShape);
  if (Array.isArray(v)) return v.map(asJsonShape);
  if (v instanceof ObjectValue) {
    const o = new ObjectValue();
    for (const [k, x] of v.entries.values()) o.set(k, asJsonShape(x));
    return o;
  }
  return v;
}

/**
 * OPA's runner: the error contains `want_error`. OPA renamed two conflict messages (to name the rule or
 * function); cases written before the rename expect the older text, which stands for the newer one here.
 */
const OPA_RENAMED_ERRORS: ReadonlyMap<string, RegExp> = new Map([
  ['complete rules must not produce multiple outputs', /rule data\.\S+ produced conflicting values/],
  [
    'functions must not produce multiple outputs for same inputs',
    /function data\.\S+ produced conflicting values for the same inputs/,
  ],
]);

function opaErrorMatches(message: string, want: string): boolean {
  return message.includes(want) || OPA_RENAMED_ERRORS.get(want)?.test(message) === true;
}

function runOpaCase(file: string, note: string, c: Raw, opts: RunOptions): CaseOutcome {
  const v0 = opts.v0 ?? /(^|[\\/])v0[\\/]/.test(file);
  const strict = get(c, 'strict_error') === true;
  const wantError = get(c, 'want_error');
  const wantCode = get(c, 'want_error_code');
  const wantDefined = get(c, 'want_defined');
  const wantRaw = get(c, 'want_result');
  let rs: QueryResults;
  try {
    const e = loadEngine(c, v0, strict, 'opa');
    const inputTerm = get(c, 'input_term');
    if (typeof inputTerm === 'string') {
      const r = new Engine({ regoVersion: v0 ? 'v0' : 'v1' }).evalQuery(`__input__ := ${inputTerm}`);
      e.setInput(r.result[0]?.bindings.__input__);
    } else if (c.has('input')) {
      e.setInput(yamlToValue(get(c, 'input'), false));
    }
    rs = e.evalQuery(String(get(c, 'query') ?? ''));
  } catch (err) {
    if (!isEngineError(err)) throw err;
    if (wantCode === undefined && wantError === undefined) {
      return { file, note, status: 'fail', reason: `unexpected error: ${err.message}` };
    }
    const code =
      err instanceof RegoEvalError ? err.code : err instanceof RegoParseError ? 'rego_parse_error' : 'limit';
    if (typeof wantCode === 'string' && code !== wantCode) {
      return { file, note, status: 'fail', reason: `error code ${code}, want ${wantCode}: ${err.message}` };
    }
    if (typeof wantError === 'string' && !opaErrorMatches(err.message, wantError)) {
      return {
        file,
        note,
        status: 'fail',
        reason: `error \`${err.message}\` does not contain \`${wantError}\``,
      };
    }
    return { file, note, status: 'pass' };
  }
  if (wantCode !== undefined || wantError !== undefined) {
    return { file, note, status: 'fail', reason: 'evaluation succeeded but an error was expected' };
  }
  if (typeof wantDefined === 'boolean') {
    const defined = rs.result.length > 0;
    return defined === wantDefined
      ? { file, note, status: 'pass' }
      : { file, note, status: 'fail', reason: `defined is ${defined}, want ${wantDefined}` };
  }
  const sort = get(c, 'sort_bindings') === true;
  const got = new Set(
    rs.result.map((r) => {
      const o = new ObjectValue();
      for (const [k, v] of Object.entries(r.bindings)) o.set(k, sort ? sortBindings(v) : v);
      return jsonText(o);
    }),
  );
  const want = new Set<string>();
  for (const w of Array.isArray(wantRaw) ? wantRaw : []) {
    const v = yamlToValue(w, false);
    if (v instanceof ObjectValue) {
      const o = new ObjectValue();
      for (const [k, x] of v.entries.values()) o.set(k, sort ? sortBindings(x) : x);
      want.add(jsonText(o));
    } else if (v !== undefined) want.add(jsonText(v));
  }
  const same = got.size === want.size && [...got].every((g) => want.has(g));
  return same
    ? { file, note, status: 'pass' }
    : { file, note, status: 'fail', reason: `got ${[...got].join(' ')}; want ${[...want].join(' ')}` };
}
