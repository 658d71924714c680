/**
 * The two facts about an ELF file that decide which shared libraries an image needs: its program
 * interpreter (PT_INTERP) and the libraries it names (DT_NEEDED). 64-bit little-endian only, which
 * covers both image platforms (x86-64 and AArch64). Read from bytes in memory, because the libraries
 * come out of Debian packages that are never installed.
 */
import { ImageBuildError } from './errors.js';

export interface ElfLinking {
  readonly interpreter?: string;
  readonly needed: readonly string[];
}

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;

function fail(what: string, message: string): never {
  throw new ImageBuildError('SHARED_LIBRARY', `${what}: ${message}`);
}

function cString(bytes: Buffer, offset: number, what: string): string {
  if (offset < 0 || offset >= bytes.length) fail(what, `string offset ${offset} outside the file`);
  const end = bytes.indexOf(0, offset);
  if (end < 0) fail(what, 'unterminated string');
  return bytes.toString('latin1', offset, end);
}

/** The interpreter and DT_NEEDED names of the ELF in `bytes` (`what` names it in errors). */
export function elfLinking(bytes: Buffer, what: string): ElfLinking {
  if (bytes.length < 64 || bytes.readUInt32BE(0) !== 0x7f454c46) fail(what, 'not an ELF file');
  if (bytes[4] !== 2 || bytes[5] !== 1) fail(what, 'not a 64-bit little-endian ELF file');
  const phoff = Number(bytes.readBigUInt64LE(0x20));
  const phentsize = bytes.readUInt16LE(0x36);
  const phnum = bytes.readUInt16LE(0x38);
  if (phentsize < 56 || phoff + phnum * phentsize > bytes.length)
    fail(what, 'program headers outside the file');
  const loads: { vaddr: bigint; offset: bigint; filesz: bigint }[] = [];
  let interpreter: string | undefined;
  let dynamic: { offset: number; size: number } | undefined;
  for (let i = 0; i < phnum; i++) {
    const h = phoff + i * phentsize;
    const type = bytes.readUInt32LE(h);
    const offset = bytes.readBigUInt64LE(h + 8);
    const vaddr = bytes.readBigUInt64LE(h + 16);
    const filesz = bytes.readBigUInt64LE(h + 32);
    if (offset + filesz > BigInt(bytes.length)) fail(what, `segment ${i} outside the file`);
    if (type === PT_LOAD) loads.push({ vaddr, offset, filesz });
    else if (type === PT_INTERP) interpreter = cString(bytes, Number(offset), what);
    else if (type === PT_DYNAMIC) dynamic = { offset: Number(offset), size: Number(filesz) };
  }
  if (dynamic === undefined) return { ...(interpreter !== undefined && { interpreter }), needed: [] };
  const neededOffsets: bigint[] = [];
  let strtab: bigint | undefined;
  for (let at = dynamic.offset; at + 16 <= dynamic.offset + dynamic.size; at += 16) {
    const tag = bytes.readBigInt64LE(at);
    const value = bytes.readBigUInt64LE(at + 8);
    if (tag === DT_NULL) break;
    if (tag === DT_NEEDED) neededOffsets.push(value);
    else if (tag === DT_STRTAB) strtab = value;
  }
  if (neededOffsets.length === 0) return { ...(interpreter !== undefined && { interpreter }), needed: [] };
  if (strtab === undefined) fail(what, 'DT_NEEDED without DT_STRTAB');
  const segment = loads.find((l) => strtab >= l.vaddr && strtab < l.vaddr + l.filesz);
  if (segment === undefined) fail(what, 'DT_STRTAB outside every loaded segment');
  const strtabOffset = strtab - segment.vaddr + segment.offset;
  const needed = neededOffsets.map((o) => cString(bytes, Number(strtabOffset + o), what));
  return { ...(interpreter !== undefined && { interpreter }), needed };
}
