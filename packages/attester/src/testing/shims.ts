// Builds the ioctl shims for tests: `test` is the shipped source linked dynamically (so the mock
// TEE's LD_PRELOAD guest kernel can stand in for /dev/sev-guest and /dev/tdx_guest), `static` is
// what `make build` ships. See shims/build.mjs.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BUILD = join(dirname(fileURLToPath(import.meta.url)), '../../shims/build.mjs');

/** Compiles both shims into `outDir` and returns `outDir` (the attesters' `shimDir`). */
export function buildShims(outDir: string, variant: 'static' | 'test' = 'test'): string {
  execFileSync(process.execPath, [BUILD, '--out', outDir, '--variant', variant], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return outDir;
}

/** Whether an ELF executable asks for a program interpreter (PT_INTERP), i.e. is dynamically linked. */
export function hasInterpreter(path: string): boolean {
  const elf = readFileSync(path);
  if (elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2) throw new Error(`${path} is not a 64-bit ELF file`);
  const phoff = Number(elf.readBigUInt64LE(0x20));
  const phentsize = elf.readUInt16LE(0x36);
  const phnum = elf.readUInt16LE(0x38);
  for (let i = 0; i < phnum; i++) {
    if (elf.readUInt32LE(phoff + i * phentsize) === 3) return true;
  }
  return false;
}

/**
 * Runs a shim asynchronously (a test's mock guest kernel answers from the same process, so a
 * synchronous spawn would deadlock) and collects what it wrote and its exit status.
 */
export function runShimRaw(
  path: string,
  input: Uint8Array,
  env: Readonly<Record<string, string>>,
  args: readonly string[] = [],
): Promise<{ status: number | null; stdout: Buffer; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(path, [...args], { env: { ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout: Buffer.concat(out), stderr: err }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(input);
  });
}
