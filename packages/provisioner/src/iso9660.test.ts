import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProvisionError } from './errors.js';
import { bufferReader, looksLikeIso, readIsoRootFile, withFileReader } from './iso9660.js';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'iso-'));
const USER_DATA = '#cloud-config\nwrite_files:\n- path: /run/peerpod/initdata\n  content: H4sI\n';
const META = 'instance-id: pod-1\nlocal-hostname: pod-1\n';

/** A cidata image made by genisoimage (Debian `genisoimage`), as cloud-localds makes it. */
async function makeIso(
  name: string,
  flags: string[],
  files: Record<string, string> = { 'user-data': USER_DATA, 'meta-data': META },
) {
  try {
    await run('sh', ['-c', 'command -v genisoimage']);
  } catch {
    throw new Error(
      'genisoimage not found on PATH: run scripts/install-deps.sh (Debian package genisoimage)',
    );
  }
  const src = join(dir, `${name}-src`);
  mkdirSync(src, { recursive: true });
  for (const [f, content] of Object.entries(files)) writeFileSync(join(src, f), content);
  const out = join(dir, `${name}.iso`);
  await run('genisoimage', ['-quiet', '-output', out, '-volid', 'cidata', ...flags, src]);
  return readFileSync(out);
}

let jolietRock: Buffer;
let rockOnly: Buffer;
let jolietOnly: Buffer;
let plain: Buffer;

beforeAll(async () => {
  jolietRock = await makeIso('jr', ['-joliet', '-rock']);
  rockOnly = await makeIso('r', ['-rock']);
  jolietOnly = await makeIso('j', ['-joliet']);
  plain = await makeIso('plain', [], { USERDATA: USER_DATA });
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('readIsoRootFile', () => {
  it('reads user-data from Joliet + Rock Ridge, Rock Ridge only and Joliet only images', async () => {
    for (const iso of [jolietRock, rockOnly, jolietOnly]) {
      expect(looksLikeIso(iso)).toBe(true);
      expect((await readIsoRootFile(bufferReader(iso), 'user-data', 1 << 20))?.toString()).toBe(USER_DATA);
      expect((await readIsoRootFile(bufferReader(iso), 'meta-data', 1 << 20))?.toString()).toBe(META);
    }
  });

  it('reads a plain ISO 9660 name, lower-cased and without its version', async () => {
    expect((await readIsoRootFile(bufferReader(plain), 'userdata', 1 << 20))?.toString()).toBe(USER_DATA);
  });

  it('reads through a file reader as from a block device', async () => {
    const got = await withFileReader(join(dir, 'jr.iso'), (read) =>
      readIsoRootFile(read, 'user-data', 1 << 20),
    );
    expect(got?.toString()).toBe(USER_DATA);
  });

  it('answers undefined for a missing file and refuses one over the size limit', async () => {
    expect(await readIsoRootFile(bufferReader(jolietRock), 'vendor-data', 1 << 20)).toBeUndefined();
    await expect(readIsoRootFile(bufferReader(jolietRock), 'user-data', 10)).rejects.toThrow(
      /larger than 10 bytes/,
    );
  });
});

describe('hostile images', () => {
  it('refuses what is not ISO 9660', async () => {
    expect(looksLikeIso(Buffer.from(USER_DATA))).toBe(false);
    await expect(readIsoRootFile(bufferReader(Buffer.alloc(40000)), 'user-data', 1 << 20)).rejects.toThrow(
      /CD001/,
    );
    await expect(readIsoRootFile(bufferReader(Buffer.alloc(100)), 'user-data', 1 << 20)).rejects.toThrow(
      ProvisionError,
    );
  });

  it('refuses every truncation with an error, never a wrong answer', async () => {
    const sizes = new Set<number>();
    for (let cut = 0; cut < jolietRock.length; cut += 512) sizes.add(cut);
    for (const cut of sizes) {
      const r = readIsoRootFile(bufferReader(jolietRock.subarray(0, cut)), 'user-data', 1 << 20);
      await r.then(
        (v) => expect(v === undefined || v.toString() === USER_DATA, `cut ${cut}`).toBe(true),
        (e) => expect(e, `cut ${cut}`).toBeInstanceOf(ProvisionError),
      );
    }
  });

  it('survives random corruption of the descriptors and directories with ProvisionError or a result', async () => {
    let seed = 12345;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed;
    };
    // Volume descriptors, path tables and root directories live in the first 24 sectors.
    const hot = Math.min(jolietRock.length, 24 * 2048);
    for (let i = 0; i < 400; i++) {
      const copy = Buffer.from(jolietRock);
      for (let k = 0; k < 4; k++) copy[16 * 2048 + (rand() % (hot - 16 * 2048))] = rand() & 0xff;
      try {
        const v = await readIsoRootFile(bufferReader(copy), 'user-data', 1 << 20);
        expect(v === undefined || Buffer.isBuffer(v)).toBe(true);
      } catch (e) {
        expect(e).toBeInstanceOf(ProvisionError);
      }
    }
  });

  it('refuses a root directory claimed larger than the limit and a record that overruns', async () => {
    const huge = Buffer.from(rockOnly);
    huge.writeUInt32LE(64 * 1024 * 1024, 16 * 2048 + 156 + 10);
    await expect(readIsoRootFile(bufferReader(huge), 'user-data', 1 << 20)).rejects.toThrow(/larger than/);
    const past = Buffer.from(rockOnly);
    past.writeUInt32LE(0xffffff, 16 * 2048 + 156 + 2);
    await expect(readIsoRootFile(bufferReader(past), 'user-data', 1 << 20)).rejects.toThrow(/past the end/);
    const noTerminator = Buffer.alloc(90 * 2048);
    for (let s = 16; s < 90; s++) noTerminator.write('\x03CD001\x01', s * 2048, 'latin1');
    await expect(readIsoRootFile(bufferReader(noTerminator), 'user-data', 1 << 20)).rejects.toThrow(
      /terminator/,
    );
  });
});
