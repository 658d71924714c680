// Runs every `bench/<package>/*.bench.ts`: each exports `run(): Promise<Record<string, number>>`
// whose figures include ratios against a floor measured in the same run. Results go to
// dist/bench/<name>.json and a summary is printed.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'bench');
mkdirSync(out, { recursive: true });

const only = process.argv.slice(2);
const benches = [];
// One folder per package measured; a bench is named `<package>.<file>`, as its JSON file.
const here = join(root, 'bench');
for (const entry of readdirSync(here, { withFileTypes: true })) {
  if (!entry.isDirectory()) continue;
  const dir = join(here, entry.name);
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.bench.ts'))) {
    const name = `${entry.name}.${basename(f, '.bench.ts')}`;
    if (only.length === 0 || only.some((o) => name.includes(o))) benches.push({ name, file: join(dir, f) });
  }
}

const summary = {};
for (const b of benches) {
  const outfile = join(out, `${b.name}.mjs`);
  await build({
    entryPoints: [b.file],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'esm',
    packages: 'external',
    logLevel: 'warning',
    plugins: [
      {
        // Workspace packages are bundled (their exports point at TypeScript); npm packages stay external.
        name: 'workspace',
        setup(pb) {
          pb.onResolve({ filter: /^@broker\// }, (args) => {
            // `@broker/<package>` or `@broker/<package>/<export>`, through the package's `exports` map.
            const [name, ...rest] = args.path.slice('@broker/'.length).split('/');
            const dir = join(root, 'packages', name);
            const { exports } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
            const target = exports[rest.length === 0 ? '.' : `./${rest.join('/')}`];
            if (typeof target !== 'string')
              throw new Error(`${args.path} is not an export of packages/${name}`);
            return { path: join(dir, target) };
          });
        },
      },
    ],
  });
  console.log(`\n== ${b.name}`);
  const mod = await import(pathToFileURL(outfile).href);
  const result = await mod.run();
  for (const [k, v] of Object.entries(result)) {
    console.log(`  ${k.padEnd(44)} ${typeof v === 'number' ? Number(v.toPrecision(6)) : v}`);
  }
  writeFileSync(join(out, `${b.name}.json`), `${JSON.stringify(result, null, 2)}\n`);
  summary[b.name] = result;
}
writeFileSync(
  join(out, 'summary.json'),
  `${JSON.stringify({ date: new Date().toISOString(), node: process.version, results: summary }, null, 2)}\n`,
);
console.log(`\nwrote ${join(out, 'summary.json')}`);
