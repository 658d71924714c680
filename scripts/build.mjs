// Bundles each multi-call entry point with esbuild and turns it into a Node single executable
// application (SEA): blob from `node --experimental-sea-config`, injected into a copy of this Node
// binary with postject. Every command name in dist/bin is a symlink that dispatches on argv0.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { buildShims } from '../packages/attester/shims/build.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
const bin = join(dist, 'bin');
const work = join(dist, 'sea');

if (Number(process.versions.node.split('.')[0]) !== 24) {
  throw new Error(
    `build needs Node 24 (the workspace pins it in node_modules/.bin); running ${process.version}`,
  );
}

/**
 * Multi-call executables. The command names each answers to come from the executable itself
 * (`--list-commands`), from the dispatch table in its entry file.
 */
export const EXECUTABLES = [
  { name: 'broker-tools', entry: 'packages/executables/src/tools.ts' },
  {
    name: 'broker-guest',
    entry: 'packages/executables/src/guest.ts',
    // The pod VM's daemons: V8's new space had grown to 8 MiB (agent) and 16 MiB (gate) after the
    // flows and stays committed; 1 MiB semi-spaces cost more, cheap, scavenges and saved ~15 MiB
    // over the guest chain. No Maglev (V8's mid-tier compiler) nor Sparkplug (its baseline
    // compiler): their code in the executable is never paged in and their output never allocated,
    // ~3 MiB less RSS per process each, and the warm resource fetch did not slow down (TurboFan
    // still optimizes what runs hot). The flags that stop optimizing altogether saved more but
    // doubled the warm fetch (packages/executables/README.md).
    execArgv: ['--max-semi-space-size=1', '--no-maglev', '--no-sparkplug'],
    // The daemons each get a bundle of their own (packages/executables/src/launcher.cjs): command →
    // the package its entry imports. A command missing here runs from the full bundle.
    commandBundles: {
      'attestation-agent': '@broker/attestation-agent',
      'confidential-data-hub': '@broker/data-hub',
      'api-server-rest': '@broker/api-server-rest',
      'agent-policy-gate': '@broker/agent-policy',
      'sandbox-agent': '@broker/sandbox-agent',
    },
  },
];

/** The build's identity in every `--version` line; `dev` when git cannot say (a source tarball). */
function gitDescribe() {
  try {
    return execFileSync('git', ['describe', '--tags', '--always', '--dirty'], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return 'dev';
  }
}
const describe = gitDescribe();

const stackTraces = readFileSync(join(root, 'scripts/sea-stack-traces.cjs'), 'utf8');

rmSync(bin, { recursive: true, force: true });
mkdirSync(bin, { recursive: true });
mkdirSync(work, { recursive: true });
// The attester's ioctl shims (static C programs), beside broker-guest: packages/attester/README.md.
const shims = buildShims({ outDir: bin });

/**
 * Bundles `entry` into `${work}/${key}.cjs` with the stack-trace banner, and writes the two assets the
 * banner reads, `${key}.stack-sources.json` and `${key}.stack-mappings.txt`. `only`, when given, is the
 * one package of the entry's dynamic imports that goes into the bundle; the entry's other dynamic
 * imports stay outside it (a command bundle never calls them).
 */
async function bundleProgram(key, entry, only) {
  const bundle = join(work, `${key}.cjs`);
  const entryPath = join(root, entry);
  const plugins =
    only === undefined
      ? []
      : [
          {
            name: 'one-command',
            setup(pb) {
              pb.onResolve({ filter: /^@broker\// }, (args) =>
                args.kind === 'dynamic-import' && args.importer === entryPath && args.path !== only
                  ? { path: args.path, external: true }
                  : undefined,
              );
            },
          },
        ];
  // SEA in Node 24 runs a CommonJS main script.
  await build({
    entryPoints: [entryPath],
    outfile: bundle,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'cjs',
    minify: true,
    // Stack traces name the TypeScript files and lines: the map (without the sources, which a
    // file:line does not need) becomes assets of the executable, read by sea-stack-traces.cjs.
    sourcemap: 'external',
    sourcesContent: false,
    legalComments: 'none',
    logLevel: 'warning',
    plugins,
    define: {
      'import.meta.url': '__broker_import_meta_url',
      __BROKER_GIT_DESCRIBE__: JSON.stringify(describe),
    },
    banner: {
      js: [
        'const __broker_import_meta_url = require("url").pathToFileURL(__filename).href;',
        // Relative to dist/sea, where the blob is made: the executables do not depend on where the
        // repository was cloned, so two builds of one commit are the same bytes (the OCI images).
        `const __broker_bundle_path = ${JSON.stringify(relative(work, bundle))};`,
        `const __broker_stack_assets = ${JSON.stringify(key)};`,
        stackTraces,
      ].join('\n'),
    },
  });
  // Sources relative to the repository, so traces read the same whoever built the executable.
  const mapFile = `${bundle}.map`;
  const map = JSON.parse(readFileSync(mapFile, 'utf8'));
  map.sources = map.sources.map((s) => relative(root, resolve(dirname(bundle), s)));
  writeFileSync(mapFile, JSON.stringify(map));
  // What sea-stack-traces.cjs reads: the sources as JSON, the mappings as text it decodes in place.
  const assets = {
    [`${key}.stack-sources.json`]: join(work, `${key}.stack-sources.json`),
    [`${key}.stack-mappings.txt`]: join(work, `${key}.stack-mappings.txt`),
  };
  writeFileSync(assets[`${key}.stack-sources.json`], JSON.stringify(map.sources));
  writeFileSync(assets[`${key}.stack-mappings.txt`], map.mappings);
  return { bundle, assets };
}

/**
 * V8's code cache for a bundle as packages/executables/src/launcher.cjs compiles it, made by this
 * Node with the executable's V8 flags (a cache made under other flags is rejected).
 */
function codeCache(bundle, out, execArgv) {
  const make = `const { Script, constants } = require('node:vm');
const [bundle, out] = process.argv.slice(1);
const source = require('node:fs').readFileSync(bundle, 'utf8');
const script = new Script('(function (exports, require, module, __filename, __dirname) {' + source + '\\n})', { filename: bundle, importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER });
require('node:fs').writeFileSync(out, script.createCachedData());`;
  execFileSync(process.execPath, [...execArgv, '-e', make, bundle, out], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

const sizes = [];
for (const exe of EXECUTABLES) {
  const full = await bundleProgram(exe.name, exe.entry);
  const bundle = full.bundle;
  let main = bundle;
  let assets = full.assets;
  if (exe.commandBundles !== undefined) {
    // One bundle per daemon and the full one (`all`), behind a launcher that compiles only one.
    const bundles = { all: relative(work, bundle) };
    assets = { ...assets, 'all.cjs': bundle };
    const programs = [['all', full]];
    for (const [command, pkg] of Object.entries(exe.commandBundles)) {
      const program = await bundleProgram(`${exe.name}.${command}`, exe.entry, pkg);
      bundles[command] = relative(work, program.bundle);
      assets = { ...assets, ...program.assets, [`${command}.cjs`]: program.bundle };
      programs.push([command, program]);
    }
    for (const [key, program] of programs) {
      const cache = `${program.bundle}.cache`;
      codeCache(program.bundle, cache, exe.execArgv ?? []);
      assets[`${key}.cache`] = cache;
    }
    main = join(work, `${exe.name}.launcher.cjs`);
    const launch = { self: exe.name, bundles };
    writeFileSync(
      main,
      `const __broker_launch = ${JSON.stringify(launch)};\n${readFileSync(join(root, 'packages/executables/src/launcher.cjs'), 'utf8')}`,
    );
  }
  const blob = join(work, `${exe.name}.blob`);
  const seaConfig = join(work, `${exe.name}.sea.json`);
  // Paths relative to dist/sea (the blob is made there): V8 names the main script's frames by the
  // path given here, and the stack-trace banner matches frames by the same relative name.
  const rel = (p) => relative(work, p);
  writeFileSync(
    seaConfig,
    JSON.stringify({
      main: rel(main),
      output: rel(blob),
      disableExperimentalSEAWarning: true,
      useCodeCache: true,
      ...(exe.execArgv !== undefined && { execArgv: exe.execArgv }),
      assets: Object.fromEntries(Object.entries(assets).map(([k, p]) => [k, rel(p)])),
    }),
  );
  // Under the executable's V8 flags: the blob's code cache for the main script is otherwise rejected
  // (with a warning at every start) by a V8 whose flags differ, such as --no-maglev.
  execFileSync(process.execPath, [...(exe.execArgv ?? []), '--experimental-sea-config', seaConfig], {
    cwd: work,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const out = join(bin, exe.name);
  copyFileSync(process.execPath, out);
  chmodSync(out, 0o755);
  execFileSync(
    process.execPath,
    [
      join(root, 'node_modules/postject/dist/cli.js'),
      out,
      'NODE_SEA_BLOB',
      blob,
      '--sentinel-fuse',
      'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2',
    ],
    // postject warns about ELF note sections on every run; its output matters only when it fails.
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const commands = execFileSync(out, ['--list-commands'], { encoding: 'utf8' }).trim().split('\n');
  for (const cmd of commands) symlinkSync(exe.name, join(bin, cmd));
  sizes.push({
    name: exe.name,
    bytes: statSync(out).size,
    bundleBytes: statSync(bundle).size,
    commands,
  });
}

console.log(`\nsingle executables in dist/bin (broker ${describe}):`);
for (const s of sizes) {
  const mb = (n) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  console.log(
    `  ${s.name.padEnd(16)} ${mb(s.bytes).padStart(10)}  (bundle ${mb(s.bundleBytes)}; commands: ${s.commands.join(', ')})`,
  );
}
for (const s of shims)
  console.log(
    `  ${s.name.padEnd(16)} ${`${(s.bytes / 1024).toFixed(0)} KiB`.padStart(10)}  (static C, ${s.cc})`,
  );
