// The measurement manifest of the measured pod-VM image, computed from the build outputs (the UKI),
// never from a boot: what OVMF, systemd-stub and the kernel's EFI stub extend into the vTPM's SHA-256
// PCRs when the image boots. The output is the extend-list form that `reference-values` reads
// (packages/reference-values/src/manifest.ts), plus the events named, for people and for the boot test.
//
//   node guest-image/measure.ts --uki podvm.efi --image-tag TAG [--roothash HEX] > manifest.json
//
// Runs on the workspace's Node (type stripping); imports nothing outside node:.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

export class PeError extends Error {}

export interface PeSection {
  readonly name: string;
  readonly virtualSize: number;
  readonly virtualAddress: number;
  readonly sizeOfRawData: number;
  readonly pointerToRawData: number;
}

export interface PeLayout {
  readonly checksumOffset: number;
  /** File offset of the certificate table's data directory entry, when the header has one. */
  readonly certDirectoryOffset: number | undefined;
  readonly certTableSize: number;
  readonly sizeOfHeaders: number;
  readonly sections: readonly PeSection[];
}

const MAX_SECTIONS = 96;

function need(cond: boolean, why: string): asserts cond {
  if (!cond) throw new PeError(`PE image: ${why}`);
}

/** The parts of a PE/COFF header that Authenticode and the UKI's sections need. */
export function parsePe(pe: Uint8Array): PeLayout {
  const b = Buffer.from(pe.buffer, pe.byteOffset, pe.byteLength);
  need(b.length >= 0x40 && b.readUInt16LE(0) === 0x5a4d, 'no MZ header');
  const peOff = b.readUInt32LE(0x3c);
  need(peOff + 24 <= b.length && b.readUInt32LE(peOff) === 0x00004550, 'no PE signature');
  const sectionCount = b.readUInt16LE(peOff + 6);
  const optSize = b.readUInt16LE(peOff + 20);
  const opt = peOff + 24;
  need(sectionCount <= MAX_SECTIONS, `${sectionCount} sections`);
  need(opt + optSize <= b.length && optSize >= 96, 'optional header out of bounds');
  const magic = b.readUInt16LE(opt);
  need(magic === 0x10b || magic === 0x20b, `optional header magic 0x${magic.toString(16)}`);
  const dirs = opt + (magic === 0x20b ? 112 : 96);
  const dirCount = b.readUInt32LE(dirs - 4);
  need(dirs + 8 * Math.min(dirCount, 16) <= opt + optSize, 'data directories out of bounds');
  const certDirectoryOffset = dirCount > 4 ? dirs + 4 * 8 : undefined;
  const certTableSize = certDirectoryOffset === undefined ? 0 : b.readUInt32LE(certDirectoryOffset + 4);
  const sizeOfHeaders = b.readUInt32LE(opt + 60);
  const table = opt + optSize;
  need(table + 40 * sectionCount <= b.length, 'section table out of bounds');
  need(
    sizeOfHeaders >= table + 40 * sectionCount && sizeOfHeaders <= b.length,
    'SizeOfHeaders out of bounds',
  );
  const sections: PeSection[] = [];
  for (let i = 0; i < sectionCount; i++) {
    const s = table + 40 * i;
    const raw = b.subarray(s, s + 8);
    const nul = raw.indexOf(0);
    const section = {
      name: raw.subarray(0, nul < 0 ? 8 : nul).toString('latin1'),
      virtualSize: b.readUInt32LE(s + 8),
      virtualAddress: b.readUInt32LE(s + 12),
      sizeOfRawData: b.readUInt32LE(s + 16),
      pointerToRawData: b.readUInt32LE(s + 20),
    };
    need(
      section.pointerToRawData + section.sizeOfRawData <= b.length,
      `section ${section.name} out of bounds`,
    );
    sections.push(section);
  }
  return { checksumOffset: opt + 64, certDirectoryOffset, certTableSize, sizeOfHeaders, sections };
}

/**
 * The Authenticode SHA-256 of a PE image, as the firmware measures an EFI application it loads
 * (EV_EFI_BOOT_SERVICES_APPLICATION): the headers without the checksum and the certificate table's
 * directory entry, the sections in file order, then any bytes after them except the certificate table.
 */
export function authenticodeSha256(pe: Uint8Array): Buffer {
  const b = Buffer.from(pe.buffer, pe.byteOffset, pe.byteLength);
  const layout = parsePe(b);
  const h = createHash('sha256');
  h.update(b.subarray(0, layout.checksumOffset));
  if (layout.certDirectoryOffset === undefined) {
    h.update(b.subarray(layout.checksumOffset + 4, layout.sizeOfHeaders));
  } else {
    h.update(b.subarray(layout.checksumOffset + 4, layout.certDirectoryOffset));
    h.update(b.subarray(layout.certDirectoryOffset + 8, layout.sizeOfHeaders));
  }
  let hashed = layout.sizeOfHeaders;
  const inFileOrder = layout.sections
    .filter((s) => s.sizeOfRawData > 0)
    .sort((x, y) => x.pointerToRawData - y.pointerToRawData);
  for (const s of inFileOrder) {
    h.update(b.subarray(s.pointerToRawData, s.pointerToRawData + s.sizeOfRawData));
    hashed += s.sizeOfRawData;
  }
  if (b.length > hashed + layout.certTableSize) h.update(b.subarray(hashed, b.length - layout.certTableSize));
  return h.digest();
}

/** A section's contents as loaded: VirtualSize bytes, zero-filled past the raw data. */
export function sectionContents(pe: Uint8Array, section: PeSection): Buffer {
  const out = Buffer.alloc(section.virtualSize);
  const raw = Math.min(section.virtualSize, section.sizeOfRawData);
  Buffer.from(pe.buffer, pe.byteOffset, pe.byteLength).copy(
    out,
    0,
    section.pointerToRawData,
    section.pointerToRawData + raw,
  );
  return out;
}

export interface MeasuredEvent {
  readonly event: string;
  readonly digest: string;
}

/** The text of OVMF's EV_EFI_ACTION before it starts a boot option. */
export const CALLING_EFI_APPLICATION = 'Calling EFI Application from Boot Option';
/**
 * The sections systemd-stub 252 (Debian 12) measures into PCR 11, in this order (its enum, not file
 * order); .pcrsig is never measured. Newer stubs add .uname and .sbat: a stub with other sections
 * needs this list revised against its boot's event log.
 */
export const STUB_MEASURED_SECTIONS = [
  '.linux',
  '.osrel',
  '.cmdline',
  '.initrd',
  '.splash',
  '.dtb',
  '.pcrpkey',
];

const sha256 = (data: Uint8Array | string): string => createHash('sha256').update(data).digest('hex');
const SEPARATOR: MeasuredEvent = { event: 'EV_SEPARATOR', digest: sha256(Buffer.alloc(4)) };

function section(layout: PeLayout, name: string): PeSection | undefined {
  const found = layout.sections.filter((s) => s.name === name);
  if (found.length > 1) throw new PeError(`PE image: section ${name} appears ${found.length} times`);
  return found[0];
}

/** PCR → the events the boot of this UKI extends into it, in order. */
export function ukiEvents(uki: Uint8Array): Map<number, MeasuredEvent[]> {
  const pe = Buffer.from(uki.buffer, uki.byteOffset, uki.byteLength);
  const layout = parsePe(pe);
  for (const required of ['.linux', '.initrd', '.cmdline']) {
    if (section(layout, required) === undefined) throw new PeError(`UKI: no ${required} section`);
  }
  const pcr11: MeasuredEvent[] = [];
  for (const name of STUB_MEASURED_SECTIONS) {
    const s = section(layout, name);
    if (s === undefined) continue;
    pcr11.push({ event: `EV_IPL ${name} (name)`, digest: sha256(Buffer.from(`${name}\0`, 'latin1')) });
    pcr11.push({ event: `EV_IPL ${name} (contents)`, digest: sha256(sectionContents(pe, s)) });
  }
  const linux = section(layout, '.linux') as PeSection;
  const initrd = section(layout, '.initrd') as PeSection;
  const cmdline = sectionContents(pe, section(layout, '.cmdline') as PeSection).toString('latin1');
  return new Map([
    // OVMF: PCR 3 gets only the separator (no platform configuration measured there).
    [3, [SEPARATOR]],
    // OVMF: the boot attempt, the separator closing pre-boot, the UKI as loaded from the ESP; then the
    // kernel, which systemd-stub starts through the firmware's LoadImage, so OVMF measures it too.
    [
      4,
      [
        { event: `EV_EFI_ACTION ${CALLING_EFI_APPLICATION}`, digest: sha256(CALLING_EFI_APPLICATION) },
        SEPARATOR,
        { event: 'EV_EFI_BOOT_SERVICES_APPLICATION UKI', digest: authenticodeSha256(pe).toString('hex') },
        {
          event: 'EV_EFI_BOOT_SERVICES_APPLICATION .linux',
          digest: authenticodeSha256(sectionContents(pe, linux)).toString('hex'),
        },
      ],
    ],
    // Linux's EFI stub: the command line systemd-stub hands it (UTF-16LE with its NUL), then the
    // initrd it loads through systemd-stub's LoadFile2 protocol.
    [
      9,
      [
        {
          event: 'EV_EVENT_TAG LOADED_IMAGE::LoadOptions',
          digest: sha256(Buffer.from(`${cmdline}\0`, 'utf16le')),
        },
        { event: 'EV_EVENT_TAG Linux initrd', digest: sha256(sectionContents(pe, initrd)) },
      ],
    ],
    [11, pcr11],
    // Nothing is extended into PCR 12: the firmware passes no command line that the UKI would take.
    [12, []],
  ]);
}

export function replay(events: readonly MeasuredEvent[]): string {
  let v = Buffer.alloc(32);
  for (const e of events) v = createHash('sha256').update(v).update(Buffer.from(e.digest, 'hex')).digest();
  return v.toString('hex');
}

export function manifest(uki: Uint8Array, imageTag: string, roothash?: string): object {
  const events = ukiEvents(uki);
  const pcrs: Record<string, string[]> = {};
  const named: Record<string, MeasuredEvent[]> = {};
  const values: Record<string, string> = {};
  for (const [pcr, list] of events) {
    pcrs[String(pcr)] = list.map((e) => e.digest);
    named[String(pcr)] = list;
    values[`pcr${String(pcr).padStart(2, '0')}`] = replay(list);
  }
  return {
    image_tag: imageTag,
    description:
      'Measured pod-VM image (UKI + dm-verity root) booted by OVMF: the SHA-256 digests extended into each PCR, in order, computed from the UKI at build time.',
    pcrs,
    events: named,
    expected: values,
    uki: { sha256: sha256(uki), authenticode_sha256: authenticodeSha256(uki).toString('hex') },
    ...(roothash !== undefined && { roothash }),
  };
}

function main(argv: string[]): void {
  const args = new Map<string, string>();
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i] as string;
    const value = argv[i + 1];
    if (!['--uki', '--image-tag', '--roothash'].includes(key) || value === undefined) {
      process.stderr.write('usage: measure.ts --uki FILE --image-tag TAG [--roothash HEX]\n');
      process.exit(2);
    }
    args.set(key, value);
  }
  const uki = args.get('--uki');
  const tag = args.get('--image-tag');
  if (uki === undefined || tag === undefined) {
    process.stderr.write('usage: measure.ts --uki FILE --image-tag TAG [--roothash HEX]\n');
    process.exit(2);
  }
  process.stdout.write(
    `${JSON.stringify(manifest(readFileSync(uki), tag, args.get('--roothash')), null, 2)}\n`,
  );
}

if (import.meta.main) main(process.argv.slice(2));
