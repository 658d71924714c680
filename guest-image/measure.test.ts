// The build-time measurement of the UKI: PCR 11 against systemd's own calculator (systemd-measure,
// from the Debian package systemd), the Authenticode digest's exclusions, and hostile PE headers.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticodeSha256, manifest, PeError, parsePe, replay, ukiEvents } from './measure';

const run = promisify(execFile);
const STUB = '/usr/lib/systemd/boot/efi/linuxx64.efi.stub';
const SYSTEMD_BOOT = '/usr/lib/systemd/boot/efi/systemd-bootx64.efi';
const SYSTEMD_MEASURE = '/usr/lib/systemd/systemd-measure';
const HINT = 'run scripts/install-deps.sh (Debian packages systemd-boot-efi, binutils, systemd)';

let dir: string;
let uki: Buffer;
const parts: Record<string, string> = {};

beforeAll(async () => {
  if (!existsSync(STUB) || !existsSync(SYSTEMD_MEASURE))
    throw new Error(`${STUB} or ${SYSTEMD_MEASURE} missing: ${HINT}`);
  dir = mkdtempSync(join(tmpdir(), 'measure-test-'));
  // Stand-ins for the kernel and initrd.
  const contents: Record<string, Buffer> = {
    // The firmware measures the kernel as a PE image too: systemd-boot's is one at hand.
    linux: readFileSync(SYSTEMD_BOOT),
    initrd: Buffer.from(Array.from({ length: 50_001 }, (_, i) => (i * 7) & 0xff)),
    osrel: Buffer.from('ID=debian\nVERSION_ID="12"\n'),
    cmdline: Buffer.from('root=/dev/mapper/root ro roothash=00 console=ttyS0'),
  };
  for (const [name, data] of Object.entries(contents)) {
    parts[name] = join(dir, name);
    writeFileSync(parts[name], data);
  }
  const out = join(dir, 'uki.efi');
  await run('objcopy', [
    ...['--add-section', `.osrel=${parts.osrel}`, '--change-section-vma', '.osrel=0x20000'],
    ...['--add-section', `.cmdline=${parts.cmdline}`, '--change-section-vma', '.cmdline=0x30000'],
    ...['--add-section', `.linux=${parts.linux}`, '--change-section-vma', '.linux=0x2000000'],
    ...['--add-section', `.initrd=${parts.initrd}`, '--change-section-vma', '.initrd=0x4000000'],
    STUB,
    out,
  ]);
  uki = readFileSync(out);
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('PCR 11 (systemd-stub sections)', () => {
  it('equals systemd-measure calculate, before any boot phase', async () => {
    const { stdout } = await run(SYSTEMD_MEASURE, [
      'calculate',
      `--linux=${parts.linux}`,
      `--osrel=${parts.osrel}`,
      `--cmdline=${parts.cmdline}`,
      `--initrd=${parts.initrd}`,
      '--bank=sha256',
      '--phase=',
    ]);
    const expected = /^11:sha256=([0-9a-f]{64})$/m.exec(stdout)?.[1];
    expect(expected).toMatch(/^[0-9a-f]{64}$/);
    expect(replay(ukiEvents(uki).get(11) ?? [])).toBe(expected);
  });

  it('changes with the command line', async () => {
    const other = join(dir, 'other.efi');
    const cmdline = join(dir, 'cmdline2');
    writeFileSync(cmdline, `${readFileSync(parts.cmdline as string, 'latin1')} x=1`);
    // --update-section would keep the old size; the section is replaced instead.
    await run('objcopy', [
      ...['--remove-section', '.cmdline', '--add-section', `.cmdline=${cmdline}`],
      ...['--change-section-vma', '.cmdline=0x30000', join(dir, 'uki.efi'), other],
    ]);
    const tampered = ukiEvents(readFileSync(other));
    expect(replay(tampered.get(11) ?? [])).not.toBe(replay(ukiEvents(uki).get(11) ?? []));
    expect(replay(tampered.get(4) ?? [])).not.toBe(replay(ukiEvents(uki).get(4) ?? []));
  });
});

describe('Authenticode digest (PCR 4)', () => {
  it('leaves out the checksum and the certificate table, and covers the sections', () => {
    const digest = authenticodeSha256(uki).toString('hex');
    const layout = parsePe(uki);
    const withChecksum = Buffer.from(uki);
    withChecksum.writeUInt32LE(0xdeadbeef, layout.checksumOffset);
    expect(authenticodeSha256(withChecksum).toString('hex')).toBe(digest);

    // A certificate table appended and named in the directory is not hashed either.
    const cert = Buffer.alloc(64, 0x33);
    const signed = Buffer.concat([uki, cert]);
    signed.writeUInt32LE(uki.length, layout.certDirectoryOffset as number);
    signed.writeUInt32LE(cert.length, (layout.certDirectoryOffset as number) + 4);
    expect(authenticodeSha256(signed).toString('hex')).toBe(digest);

    const linux = layout.sections.find((s) => s.name === '.linux');
    const changed = Buffer.from(uki);
    const at = (linux?.pointerToRawData as number) + 10;
    changed[at] = (changed[at] as number) ^ 1;
    expect(authenticodeSha256(changed).toString('hex')).not.toBe(digest);
  });

  it('PCR 4 is the boot-option action, the separator, the UKI, then the kernel it loads', () => {
    const events = ukiEvents(uki).get(4) ?? [];
    expect(events.map((e) => e.event)).toEqual([
      'EV_EFI_ACTION Calling EFI Application from Boot Option',
      'EV_SEPARATOR',
      'EV_EFI_BOOT_SERVICES_APPLICATION UKI',
      'EV_EFI_BOOT_SERVICES_APPLICATION .linux',
    ]);
    expect(events[1]?.digest).toBe('df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b81119');
    expect(events[2]?.digest).toBe(authenticodeSha256(uki).toString('hex'));
  });
});

describe("PCR 9 (the kernel's EFI stub)", () => {
  it('is the command line as UTF-16LE with its NUL, then the initrd', () => {
    const events = ukiEvents(uki).get(9) ?? [];
    const cmdline = readFileSync(parts.cmdline as string, 'latin1');
    const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    expect(events.map((e) => e.digest)).toEqual([
      sha(Buffer.from(`${cmdline}\0`, 'utf16le')),
      sha(readFileSync(parts.initrd as string)),
    ]);
  });
});

describe('the manifest', () => {
  it('is the extend-list form with PCR 03, 04, 09, 11 and 12', () => {
    const m = manifest(uki, 'podvm:test') as { pcrs: Record<string, string[]>; image_tag: string };
    expect(m.image_tag).toBe('podvm:test');
    expect(Object.keys(m.pcrs).sort()).toEqual(['11', '12', '3', '4', '9']);
  });
});

describe('hostile PE input', () => {
  it('refuses what is not a UKI', () => {
    expect(() => parsePe(Buffer.from('not a PE file at all, just text that is long enough to read'))).toThrow(
      PeError,
    );
    expect(() => ukiEvents(readFileSync(STUB))).toThrow(/no \.linux section/);
    const truncated = uki.subarray(0, 0x200);
    expect(() => authenticodeSha256(truncated)).toThrow(PeError);
    const badOffset = Buffer.from(uki);
    badOffset.writeUInt32LE(0xfffffff0, 0x3c);
    expect(() => parsePe(badOffset)).toThrow(/no PE signature/);
    const manySections = Buffer.from(uki);
    manySections.writeUInt16LE(0xffff, manySections.readUInt32LE(0x3c) + 6);
    expect(() => parsePe(manySections)).toThrow(/sections/);
  });
});
