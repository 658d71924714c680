import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { elfLinking } from './elf.js';
import { ImageBuildError } from './errors.js';

const node = readFileSync(process.execPath);

/** binutils' readelf, a reader we did not write, on the same file. */
function readelf(path: string): { interpreter?: string; needed: string[] } {
  const text = execFileSync('readelf', ['-d', '-l', '-W', path], { encoding: 'utf8' });
  const interpreter = /\[Requesting program interpreter: ([^\]]+)\]/.exec(text)?.[1];
  const needed = [...text.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1] as string);
  return { ...(interpreter !== undefined && { interpreter }), needed };
}

function code(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return e instanceof ImageBuildError ? e.code : 'other';
  }
  return undefined;
}

describe('elfLinking', () => {
  it('reads the interpreter and DT_NEEDED of the Node runtime as readelf does', () => {
    expect(elfLinking(node, 'node')).toEqual(readelf(process.execPath));
  });

  it.skipIf(process.arch !== 'x64')('reads a shared library (no interpreter) as readelf does', () => {
    const libstdcxx = '/usr/lib/x86_64-linux-gnu/libstdc++.so.6';
    const lib = readFileSync(libstdcxx);
    expect(elfLinking(lib, 'libstdc++')).toEqual(readelf(libstdcxx));
  });

  it('refuses what is not a 64-bit little-endian ELF file', () => {
    expect(code(() => elfLinking(Buffer.from('#!/bin/sh\necho hi\n'.padEnd(80)), 'script'))).toBe(
      'SHARED_LIBRARY',
    );
    expect(code(() => elfLinking(Buffer.alloc(10), 'short'))).toBe('SHARED_LIBRARY');
    const elf32 = Buffer.from(node.subarray(0, 64));
    elf32[4] = 1;
    expect(code(() => elfLinking(elf32, '32-bit'))).toBe('SHARED_LIBRARY');
    const bigEndian = Buffer.from(node.subarray(0, 64));
    bigEndian[5] = 2;
    expect(code(() => elfLinking(bigEndian, 'big-endian'))).toBe('SHARED_LIBRARY');
  });

  it('refuses headers and segments that point outside the file, and never reads past it', () => {
    // The first 4 KiB keep the program headers but cut the segments they describe.
    expect(code(() => elfLinking(node.subarray(0, 4096), 'truncated'))).toBe('SHARED_LIBRARY');
    const phoffPastEnd = Buffer.from(node);
    phoffPastEnd.writeBigUInt64LE(BigInt(node.length), 0x20);
    expect(code(() => elfLinking(phoffPastEnd, 'phoff'))).toBe('SHARED_LIBRARY');
    const manyHeaders = Buffer.from(node);
    manyHeaders.writeUInt16LE(0xffff, 0x38);
    expect(code(() => elfLinking(manyHeaders, 'phnum'))).toBe('SHARED_LIBRARY');
  });

  it('refuses a string table outside every loaded segment', () => {
    // Find the PT_DYNAMIC segment and point DT_STRTAB far away, then at the file's last byte.
    const phoff = Number(node.readBigUInt64LE(0x20));
    const phentsize = node.readUInt16LE(0x36);
    const phnum = node.readUInt16LE(0x38);
    let dyn = -1;
    for (let i = 0; i < phnum; i++)
      if (node.readUInt32LE(phoff + i * phentsize) === 2) dyn = phoff + i * phentsize;
    expect(dyn).toBeGreaterThan(0);
    const dynOffset = Number(node.readBigUInt64LE(dyn + 8));
    const withStrtab = (value: bigint) => {
      const copy = Buffer.from(node);
      for (let at = dynOffset; ; at += 16) {
        const tag = copy.readBigInt64LE(at);
        if (tag === 0n) throw new Error('no DT_STRTAB');
        if (tag === 5n) {
          copy.writeBigUInt64LE(value, at + 8);
          return copy;
        }
      }
    };
    expect(code(() => elfLinking(withStrtab(0xffff_ffff_0000n), 'strtab'))).toBe('SHARED_LIBRARY');
    expect(code(() => elfLinking(withStrtab(0n), 'strtab at 0'))).toBe('SHARED_LIBRARY');
  });
});
