// Just enough ISO 9660 to read one file from the root directory of a cloud-init `cidata` image (what
// CAA attaches on platforms without an instance metadata service): the primary volume descriptor, the
// Joliet supplementary descriptor and Rock Ridge `NM` names, which is how `genisoimage -J -R` and
// cloud-localds store the lower-case name `user-data`. Everything is read through bounded reads, so
// the image can be a block device (/dev/disk/by-label/cidata) that is never mounted.
import { open } from 'node:fs/promises';
import { ProvisionError } from './errors.js';

const SECTOR = 2048;
const FIRST_DESCRIPTOR = 16;
const MAX_DESCRIPTORS = 64;
/** A root directory larger than this is not a cidata image. */
export const MAX_DIRECTORY_BYTES = 1024 * 1024;

/** Reads `length` bytes at `offset`; a short result means end of image. */
export type ReadAt = (offset: number, length: number) => Promise<Buffer>;

function fail(why: string): never {
  throw new ProvisionError('ISO_INVALID', `cidata image: ${why}`);
}

async function readExact(read: ReadAt, offset: number, length: number, what: string): Promise<Buffer> {
  const b = await read(offset, length);
  if (b.length < length) fail(`${what} at byte ${offset} is past the end of the image`);
  return b;
}

interface DirRecord {
  readonly extent: number;
  readonly size: number;
  readonly flags: number;
  /** The name as the descriptor's tree gives it. */
  readonly names: readonly string[];
}

interface Volume {
  readonly blockSize: number;
  readonly root: DirRecord;
  readonly joliet: boolean;
}

function rootRecord(desc: Buffer): DirRecord {
  const r = desc.subarray(156, 156 + 34);
  if (r[0] !== 34) fail('the root directory record is malformed');
  return { extent: r.readUInt32LE(2), size: r.readUInt32LE(10), flags: r[25] ?? 0, names: [] };
}

async function volumes(read: ReadAt): Promise<Volume[]> {
  const out: Volume[] = [];
  for (let i = 0; i < MAX_DESCRIPTORS; i++) {
    const desc = await readExact(read, (FIRST_DESCRIPTOR + i) * SECTOR, SECTOR, 'a volume descriptor');
    if (desc.toString('latin1', 1, 6) !== 'CD001') fail('no ISO 9660 volume descriptor (CD001) at sector 16');
    const type = desc[0];
    if (type === 255) return out;
    if (type !== 1 && type !== 2) continue;
    const blockSize = desc.readUInt16LE(128);
    if (blockSize !== 512 && blockSize !== 1024 && blockSize !== 2048)
      fail(`logical block size ${blockSize}`);
    const escapes = desc.toString('latin1', 88, 91);
    const joliet = type === 2 && (escapes === '%/@' || escapes === '%/C' || escapes === '%/E');
    if (type === 2 && !joliet) continue;
    out.push({ blockSize, root: rootRecord(desc), joliet });
  }
  return fail(`no volume descriptor terminator in the first ${MAX_DESCRIPTORS} descriptors`);
}

/** Rock Ridge `NM` name in a record's system use area (SUSP entries), or undefined. */
function rockRidgeName(su: Buffer): string | undefined {
  let name = '';
  let found = false;
  let pos = 0;
  while (pos + 4 <= su.length) {
    const sig = su.toString('latin1', pos, pos + 2);
    const len = su[pos + 2] ?? 0;
    if (len < 4 || pos + len > su.length) break;
    if (sig === 'NM' && len >= 5) {
      const flags = su[pos + 4] ?? 0;
      // CURRENT and PARENT name "." and ".."; only plain names matter here.
      if ((flags & 0x06) === 0) {
        name += su.toString('utf8', pos + 5, pos + len);
        found = true;
      }
      if ((flags & 0x01) === 0 && found) return name;
    }
    if (sig === 'ST') break;
    pos += len;
  }
  return found ? name : undefined;
}

function plainName(id: Buffer, joliet: boolean): string {
  let name = joliet ? id.swap16().toString('utf16le') : id.toString('latin1');
  const semicolon = name.lastIndexOf(';');
  if (semicolon >= 0 && /^\d+$/.test(name.slice(semicolon + 1))) name = name.slice(0, semicolon);
  if (!joliet && name.endsWith('.')) name = name.slice(0, -1);
  return joliet ? name : name.toLowerCase();
}

async function rootEntries(read: ReadAt, vol: Volume): Promise<DirRecord[]> {
  if ((vol.root.flags & 0x02) === 0) fail('the root record is not a directory');
  if (vol.root.size > MAX_DIRECTORY_BYTES)
    fail(`the root directory is larger than ${MAX_DIRECTORY_BYTES} bytes`);
  const dir = await readExact(read, vol.root.extent * vol.blockSize, vol.root.size, 'the root directory');
  const out: DirRecord[] = [];
  let pos = 0;
  while (pos < dir.length) {
    const len = dir[pos] ?? 0;
    if (len === 0) {
      // Records never cross a sector: the rest of this sector is padding.
      pos = (Math.floor(pos / SECTOR) + 1) * SECTOR;
      continue;
    }
    if (len < 34 || pos + len > dir.length) fail(`a directory record at offset ${pos} is malformed`);
    const rec = dir.subarray(pos, pos + len);
    const idLen = rec[32] ?? 0;
    if (33 + idLen > len) fail(`a directory record at offset ${pos} has a name longer than itself`);
    const id = Buffer.from(rec.subarray(33, 33 + idLen));
    pos += len;
    if (idLen === 1 && (id[0] === 0 || id[0] === 1)) continue; // "." and ".."
    if (vol.joliet && idLen % 2 !== 0) fail('a Joliet name has an odd length');
    const names = [plainName(id, vol.joliet)];
    if (!vol.joliet) {
      const su = rec.subarray(33 + idLen + (idLen % 2 === 0 ? 1 : 0));
      const rr = rockRidgeName(su);
      if (rr !== undefined) names.unshift(rr);
    }
    out.push({ extent: rec.readUInt32LE(2), size: rec.readUInt32LE(10), flags: rec[25] ?? 0, names });
  }
  return out;
}

/**
 * The content of file `name` (e.g. `user-data`) in the image's root directory: the Joliet tree is
 * searched first, then the primary tree by Rock Ridge name, then by its ISO 9660 name. Undefined when
 * no tree has it; an error when the image is damaged or the file is larger than `maxBytes`.
 */
export async function readIsoRootFile(
  read: ReadAt,
  name: string,
  maxBytes: number,
): Promise<Buffer | undefined> {
  const vols = (await volumes(read)).sort((a, b) => Number(b.joliet) - Number(a.joliet));
  if (vols.length === 0) fail('no primary volume descriptor');
  for (const vol of vols) {
    const hit = (await rootEntries(read, vol)).find((e) => e.names.includes(name));
    if (hit === undefined) continue;
    if ((hit.flags & 0x02) !== 0) fail(`${name} is a directory`);
    if ((hit.flags & 0x80) !== 0) fail(`${name} spans several extents`);
    if (hit.size > maxBytes) fail(`${name} is larger than ${maxBytes} bytes`);
    return readExact(read, hit.extent * vol.blockSize, hit.size, name);
  }
  return undefined;
}

/** True when `head` (at least 32 KiB + 6 bytes of a file) starts like an ISO 9660 image. */
export function looksLikeIso(head: Buffer): boolean {
  return (
    head.length >= FIRST_DESCRIPTOR * SECTOR + 6 &&
    head.toString('latin1', FIRST_DESCRIPTOR * SECTOR + 1, FIRST_DESCRIPTOR * SECTOR + 6) === 'CD001'
  );
}

/** A bounded reader over a file or block device. */
export async function withFileReader<T>(path: string, use: (read: ReadAt) => Promise<T>): Promise<T> {
  const fh = await open(path, 'r');
  try {
    return await use(async (offset, length) => {
      const buf = Buffer.alloc(length);
      let got = 0;
      while (got < length) {
        const { bytesRead } = await fh.read(buf, got, length - got, offset + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return buf.subarray(0, got);
    });
  } finally {
    await fh.close();
  }
}

/** A reader over bytes in memory (tests, and small images read whole). */
export function bufferReader(bytes: Buffer): ReadAt {
  return async (offset, length) => bytes.subarray(offset, offset + length);
}
