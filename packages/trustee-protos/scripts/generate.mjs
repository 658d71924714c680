// Regenerates src/generated/*.gen.ts from trustee's protos (protos/, see PROVENANCE.md) with ts-proto
// as a protoc plugin. Needs Debian's protoc (`protobuf-compiler`, in scripts/install-deps.sh).
// The output is committed, so building and testing need neither; the test in src/generated.test.ts
// fails when the committed files differ from what this script writes.
// Usage: node scripts/generate.mjs [OUT_DIR]   (default: src/generated)
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const protos = join(pkg, 'protos');
const out = resolve(process.argv[2] ?? join(pkg, 'src', 'generated'));
// The workspace's node_modules/.bin, where npm links ts-proto's plugin.
const plugin = join(pkg, '..', '..', 'node_modules', '.bin', 'protoc-gen-ts_proto');

export const TS_PROTO_OPTIONS = [
  'outputServices=grpc-js',
  'esModuleInterop=true',
  'importSuffix=.js',
  'fileSuffix=.gen',
  'env=node',
  'useExactTypes=false',
];

mkdirSync(out, { recursive: true });
const files = readdirSync(protos)
  .filter((f) => f.endsWith('.proto'))
  .sort();
execFileSync(
  'protoc',
  [
    `--plugin=protoc-gen-ts_proto=${plugin}`,
    `--ts_proto_out=${out}`,
    `--ts_proto_opt=${TS_PROTO_OPTIONS.join(',')}`,
    `-I${protos}`,
    ...files,
  ],
  { stdio: ['ignore', 'inherit', 'inherit'] },
);
