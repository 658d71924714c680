// `make images`: bundles the image builder (packages/images, TypeScript) with esbuild and runs it with
// this Node; arguments go to `broker-images` (`node scripts/images.mjs --help`).
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist/tools/broker-images.cjs');
mkdirSync(dirname(out), { recursive: true });
await build({
  entryPoints: [join(root, 'packages/images/src/index.ts')],
  outfile: out,
  bundle: true,
  platform: 'node',
  target: 'node24',
  format: 'cjs',
  logLevel: 'warning',
});
const { imagesMain } = createRequire(import.meta.url)(out);
process.exitCode = await imagesMain(process.argv.slice(2), root);
