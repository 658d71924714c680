// Builds the ioctl shims (see README "ioctl shims"): small C programs that ask /dev/sev-guest and
// /dev/tdx_guest for reports on kernels without configfs-tsm.
//
//   node packages/attester/shims/build.mjs --out DIR [--variant static|test]
//
// `static` (what `make build` ships in dist/bin): statically linked with musl-gcc (Debian
// musl-tools), else `gcc -static`, stripped. `test`: the same sources linked dynamically against
// glibc, so that the mock TEE's LD_PRELOAD kernel can stand in for the device nodes (a static
// program ignores LD_PRELOAD). Nothing else differs between the two.
import { execFileSync } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

/** Source file → installed name. */
export const SHIMS = [
  { name: 'broker-snp-report', source: 'snp-report.c' },
  { name: 'broker-tdx-report', source: 'tdx-report.c' },
];

const WARNINGS = ['-std=c11', '-D_GNU_SOURCE', '-Wall', '-Wextra', '-Werror'];

function has(command) {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The compiler and flags of a variant. */
function toolchain(variant) {
  if (variant === 'test') return { cc: 'gcc', flags: [...WARNINGS, '-O1', '-g', '-U_FORTIFY_SOURCE'] };
  const hardening = ['-Os', '-fstack-protector-strong', '-static', '-s'];
  if (has('musl-gcc')) return { cc: 'musl-gcc', flags: [...WARNINGS, ...hardening] };
  return { cc: 'gcc', flags: [...WARNINGS, ...hardening] };
}

/**
 * Compiles every shim into `outDir`; returns `[{ name, path, bytes, cc }]`.
 * @param {{ outDir: string, variant?: 'static' | 'test' }} options
 */
export function buildShims({ outDir, variant = 'static' }) {
  if (variant !== 'static' && variant !== 'test') throw new Error(`unknown shim variant ${variant}`);
  mkdirSync(outDir, { recursive: true });
  const { cc, flags } = toolchain(variant);
  return SHIMS.map(({ name, source }) => {
    const path = join(outDir, name);
    execFileSync(cc, [...flags, '-o', path, join(here, source)], { stdio: ['ignore', 'ignore', 'inherit'] });
    return { name, path, bytes: statSync(path).size, cc };
  });
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const value = (flag) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const outDir = value('--out');
  if (outDir === undefined) {
    console.error('usage: build.mjs --out DIR [--variant static|test]');
    process.exit(2);
  }
  for (const s of buildShims({ outDir: resolve(outDir), variant: value('--variant') ?? 'static' })) {
    console.log(`${s.path} ${s.bytes}`);
  }
}
