// The executables' stack-trace banner (scripts/sea-stack-traces.cjs) maps frames of a minified bundle
// back to the TypeScript lines that threw, from the map it reads as a SEA asset: run here in a vm
// context with node:sea stood in for.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createContext, runInContext } from 'node:vm';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BANNER = readFileSync(new URL('../../../scripts/sea-stack-traces.cjs', import.meta.url), 'utf8');
const BUNDLE_PATH = '/build/bundle.cjs';

// Two modules, each function throwing on a known line; many small functions so that the map has
// more segments than one checkpoint covers.
const filler = Array.from(
  { length: 200 },
  (_, i) => `export function f${i}(x: number): number {\n  return x * ${i} + ${i};\n}`,
).join('\n');
const FILES: Record<string, string> = {
  'a.ts': `${filler}\nexport function failA(): never {\n  throw new Error('from a');\n}\n`,
  'b.ts': `import { failA, f7 } from './a.js';\nexport function failB(n: number): number {\n  if (n > 1) return f7(n);\n  const e = new Error('from b');\n  throw e;\n}\nexport { failA };\n`,
  'main.ts': `import { failA, failB } from './b.js';\nimport * as a from './a.js';\n(globalThis as any).run = { failA, failB, sum: () => Object.values(a).length };\n`,
};
const LINE_OF_A = filler.split('\n').length + 2;

let dir: string;
let code: string;
let mapText: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sea-stack-'));
  for (const [name, text] of Object.entries(FILES)) await writeFile(join(dir, name), text);
  const out = await build({
    entryPoints: [join(dir, 'main.ts')],
    bundle: true,
    write: false,
    outfile: join(dir, 'out.cjs'),
    platform: 'node',
    format: 'cjs',
    minify: true,
    sourcemap: 'external',
    sourcesContent: false,
    logLevel: 'silent',
  });
  code = out.outputFiles.find((f) => f.path.endsWith('.cjs'))!.text;
  mapText = out.outputFiles.find((f) => f.path.endsWith('.map'))!.text;
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** node:sea of an executable whose map is `mapJson` (the build's two assets), or of one without. */
function fakeSea(mapJson: string | undefined) {
  const assets = new Map<string, Uint8Array>();
  if (mapJson !== undefined) {
    let map: { sources?: unknown; mappings?: unknown } = {};
    try {
      map = JSON.parse(mapJson);
    } catch {
      assets.set('b.stack-sources.json', Buffer.from(mapJson));
    }
    if (map.sources !== undefined)
      assets.set('b.stack-sources.json', Buffer.from(JSON.stringify(map.sources)));
    if (typeof map.mappings === 'string') assets.set('b.stack-mappings.txt', Buffer.from(map.mappings));
  }
  const asset = (key: string) => {
    const bytes = assets.get(key);
    if (bytes === undefined) throw new Error(`no asset ${key}`);
    return bytes;
  };
  return {
    isSea: () => mapJson !== undefined,
    getAsset: (key: string) => Buffer.from(asset(key)).toString('utf8'),
    getRawAsset: (key: string) => {
      const b = asset(key);
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
    },
  };
}

function stackOf(mapJson: string | undefined, call: string): string {
  const sea = fakeSea(mapJson);
  const context = createContext({
    require: (id: string) => {
      if (id !== 'node:sea') throw new Error(`unexpected require ${id}`);
      return sea;
    },
    __broker_bundle_path: BUNDLE_PATH,
    __broker_stack_assets: 'b',
  });
  runInContext(BANNER, context, { filename: '/build/banner.cjs' });
  runInContext(code, context, { filename: BUNDLE_PATH });
  return runInContext(
    `(() => { try { ${call}; return 'no error'; } catch (e) { return e.stack; } })()`,
    context,
  ) as string;
}

describe('stack traces of a bundled executable', () => {
  it('name the TypeScript file and line of each frame', () => {
    const stack = stackOf(mapText, 'run.failA()');
    expect(stack.split('\n')[0]).toBe('Error: from a');
    expect(stack).toMatch(new RegExp(`at \\S+ \\(a\\.ts:${LINE_OF_A}:\\d+\\)`));
    const b = stackOf(mapText, 'run.failB(0)');
    expect(b).toMatch(/at \S+ \(b\.ts:4:\d+\)/);
  });

  it('agree with node:module SourceMap for every segment of the map', async () => {
    const { SourceMap } = await import('node:module');
    const reference = new SourceMap(JSON.parse(mapText));
    const context = createContext({
      require: () => fakeSea(mapText),
      __broker_bundle_path: BUNDLE_PATH,
      __broker_stack_assets: 'b',
    });
    // Each generated column of the bundle's first lines, through the banner's frame formatter.
    runInContext(BANNER, context);
    const format = runInContext('Error.prepareStackTrace', context) as (
      e: unknown,
      frames: unknown[],
    ) => string;
    const lines = code.split('\n');
    let compared = 0;
    for (let line = 0; line < lines.length; line++) {
      for (let col = 0; col < lines[line]!.length; col += 7) {
        const frame = {
          getFileName: () => BUNDLE_PATH,
          getLineNumber: () => line + 1,
          getColumnNumber: () => col + 1,
          getFunctionName: () => null,
          isAsync: () => false,
          toString: () => 'unmapped',
        };
        const got = format(new Error('x'), [frame]).split('\n    at ')[1];
        const want = reference.findEntry(line, col) as {
          generatedLine?: number;
          originalSource?: string;
          originalLine?: number;
          originalColumn?: number;
        };
        const expected =
          want.originalSource === undefined || want.generatedLine !== line
            ? 'unmapped'
            : `${want.originalSource}:${want.originalLine! + 1}:${want.originalColumn! + 1}`;
        expect(got, `${line}:${col}`).toBe(expected);
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(500);
  });

  it('leave frames as they are without a map, or with a broken one', () => {
    expect(stackOf(undefined, 'run.failA()')).toMatch(/\(\/build\/bundle\.cjs:1:\d+\)/);
    expect(stackOf('{"version":3,"sources":["a.ts"],"mappings":"!!"}', 'run.failA()')).toMatch(
      /\(\/build\/bundle\.cjs:1:\d+\)/,
    );
    expect(stackOf('not json', 'run.failA()')).toMatch(/\(\/build\/bundle\.cjs:1:\d+\)/);
  });
});
