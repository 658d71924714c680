// The confidential-computing event log (ACPI CCEL, plus the attestation agent's AAEL events): a
// TCG crypto-agile event log. The first event is a SHA-1-format EV_NO_ACTION "Spec ID Event03"
// naming the digest algorithms and sizes; then TCG_PCR_EVENT2 records, each:
//
//   register index u32 (CC measurement register: RTMR n is index n + 1), event type u32,
//   digest count u32, { algorithm u16, digest }*, event size u32, event bytes
//
// until 8 bytes of 0xFF (or of zeros, the unused tail of the ACPI area). Each event becomes a
// claim the way trustee's eventlog crate shows it (type name, digests, base64 event, details
// decoded per event type, and whether the digests are the hash of the event bytes), and the
// digests of each register fold into the value the TD's RTMR must hold.
import { createHash } from 'node:crypto';
import { VerificationError } from '../errors.js';

/** OVMF's CCEL is 64 KiB, TD-shim's up to 1 MiB; the AAEL adds a few KiB. */
export const MAX_EVENT_LOG_BYTES = 2 * 1024 * 1024;
export const MAX_EVENTS = 16 * 1024;
const MAX_DIGESTS_PER_EVENT = 8;

export const TCG_ALGORITHMS: Readonly<Record<number, string>> = Object.freeze({
  1: 'RSA',
  3: 'TDES',
  4: 'SHA-1',
  11: 'SHA-256',
  12: 'SHA-384',
  13: 'SHA-512',
  18: 'SM3',
});
const NODE_HASH: Readonly<Record<string, string>> = {
  'SHA-1': 'sha1',
  'SHA-256': 'sha256',
  'SHA-384': 'sha384',
  'SHA-512': 'sha512',
  SM3: 'sm3',
};
const DIGEST_SIZE: Readonly<Record<string, number>> = {
  'SHA-1': 20,
  'SHA-256': 32,
  'SHA-384': 48,
  'SHA-512': 64,
  SM3: 32,
};

export const EV_NO_ACTION = 0x3;
export const EV_EVENT_TAG = 0x6;
export const AAEL_EVENT_ID = 0x4141454c;

/** TCG event types with trustee's names (serde SCREAMING_SNAKE_CASE of its enum). */
export const TCG_EVENT_TYPES: ReadonlyMap<number, string> = new Map([
  [0x0, 'EV_PREBOOT_CERT'],
  [0x1, 'EV_POST_CODE'],
  [0x2, 'EV_UNUSED'],
  [0x3, 'EV_NO_ACTION'],
  [0x4, 'EV_SEPARATOR'],
  [0x5, 'EV_ACTION'],
  [0x6, 'EV_EVENT_TAG'],
  [0x7, 'EV_S_CRTM_CONTENTS'],
  [0x8, 'EV_S_CRTM_VERSION'],
  [0x9, 'EV_CPU_MICROCODE'],
  [0xa, 'EV_PLATFORM_CONFIG_FLAGS'],
  [0xb, 'EV_TABLE_OF_DEVICES'],
  [0xc, 'EV_COMPACT_HASH'],
  [0xd, 'EV_IPL'],
  [0xe, 'EV_IPL_PARTITION_DATA'],
  [0xf, 'EV_NONHOST_CODE'],
  [0x10, 'EV_NONHOST_CONFIG'],
  [0x11, 'EV_NONHOST_INFO'],
  [0x12, 'EV_OMIT_BOOT_DEVICE_EVENTS'],
  [0x80000000, 'EV_EFI_EVENT_BASE'],
  [0x80000001, 'EV_EFI_VARIABLE_DRIVER_CONFIG'],
  [0x80000002, 'EV_EFI_VARIABLE_BOOT'],
  [0x80000003, 'EV_EFI_BOOT_SERVICES_APPLICATION'],
  [0x80000004, 'EV_EFI_BOOT_SERVICES_DRIVER'],
  [0x80000005, 'EV_EFI_RUNTIME_SERVICES_DRIVER'],
  [0x80000006, 'EV_EFI_GPT_EVENT'],
  [0x80000007, 'EV_EFI_ACTION'],
  [0x80000008, 'EV_EFI_PLATFORM_FIRMWARE_BLOB'],
  [0x80000009, 'EV_EFI_HANDOFF_TABLES'],
  [0x8000000a, 'EV_EFI_PLATFORM_FIRMWARE_BLOB2'],
  [0x8000000b, 'EV_EFI_HANDOFF_TABLES2'],
  [0x8000000c, 'EV_EFI_VARIABLE_BOOT2'],
  [0x80000010, 'EV_EFI_HCRTM_EVENT'],
  [0x800000e0, 'EV_EFI_VARIABLE_AUTHORITY'],
  [0x800000e1, 'EV_EFI_SPDM_FIRMWARE_BLOB'],
  [0x800000e2, 'EV_EFI_SPDM_FIRMWARE_CONFIG'],
]);

/** Decoded event data; only the members a decoder sets are present (trustee's EventDetails). */
export interface EventDetails {
  string?: string;
  unicode_name?: string;
  unicode_name_length?: number;
  variable_data?: string;
  variable_data_length?: number;
  variable_name?: string;
  device_paths?: string[];
  data?: unknown;
}

export interface EventDigest {
  readonly alg: string;
  readonly digest: string;
}

/** One event as a claim, members in trustee's order. */
export interface EventLogEntry {
  readonly details: EventDetails;
  readonly digest_matches_event: boolean;
  readonly digests: readonly EventDigest[];
  /** The event bytes, standard base64. */
  readonly event: string;
  readonly index: number;
  readonly type_name: string;
}

export interface CcEventLog {
  readonly entries: readonly EventLogEntry[];
  /** Raw digests per register index, for the replay. */
  readonly digests: ReadonlyMap<number, readonly { alg: string; digest: Buffer }[]>;
}

function malformed(msg: string): VerificationError {
  return new VerificationError('REPORT_MALFORMED', `event log ${msg}`);
}

class Cursor {
  pos: number;
  constructor(
    readonly b: Buffer,
    pos = 0,
  ) {
    this.pos = pos;
  }
  need(n: number, what: string): void {
    if (n < 0 || this.pos + n > this.b.length)
      throw malformed(`is truncated reading ${what} at offset ${this.pos}`);
  }
  u8(what: string): number {
    this.need(1, what);
    return this.b[this.pos++]!;
  }
  u16(what: string): number {
    this.need(2, what);
    const v = this.b.readUInt16LE(this.pos);
    this.pos += 2;
    return v;
  }
  u32(what: string): number {
    this.need(4, what);
    const v = this.b.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }
  bytes(n: number, what: string): Buffer {
    this.need(n, what);
    const v = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return v;
  }
}

// ---- event data decoders (trustee's per-type parsers) ----

const utf8Fatal = new TextDecoder('utf-8', { fatal: true });
const utf8Lossy = new TextDecoder('utf-8');

function strictUtf8(b: Uint8Array, what: string): string {
  try {
    return utf8Fatal.decode(b);
  } catch {
    throw malformed(`${what} is not UTF-8`);
  }
}

/** UTF-16LE of whole code units; `strict` refuses unpaired surrogates (Rust's String::from_utf16). */
function utf16(b: Uint8Array, strict: boolean, what: string): string {
  const units: number[] = [];
  for (let i = 0; i + 1 < b.length; i += 2) units.push(b[i]! | (b[i + 1]! << 8));
  let out = '';
  for (let i = 0; i < units.length; i++) {
    const u = units[i]!;
    if (u >= 0xd800 && u <= 0xdbff) {
      const next = units[i + 1];
      if (next !== undefined && next >= 0xdc00 && next <= 0xdfff) {
        out += String.fromCharCode(u, next);
        i++;
        continue;
      }
      if (strict) throw malformed(`${what} is not UTF-16`);
      out += '\ufffd';
    } else if (u >= 0xdc00 && u <= 0xdfff) {
      if (strict) throw malformed(`${what} is not UTF-16`);
      out += '\ufffd';
    } else {
      out += String.fromCharCode(u);
    }
  }
  return out;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const CONTROL = /\p{Cc}/gu;

function simpleString(data: Buffer): EventDetails {
  return { string: strictUtf8(data, 'event text') };
}

/** A length-prefixed description (EV_EFI_PLATFORM_FIRMWARE_BLOB2, EV_EFI_HANDOFF_TABLES2). */
function lengthPrefixedString(data: Buffer): EventDetails {
  if (data.length === 0) throw malformed('description is empty');
  const len = data[0]!;
  // trustee reads bytes 1..len: the description without its terminating NUL.
  if (data.length < len) throw malformed(`description needs ${len} bytes`);
  return { string: strictUtf8(data.subarray(1, Math.max(1, len)), 'description') };
}

function platformConfigFlags(data: Buffer): EventDetails {
  let s: string;
  try {
    s = utf8Fatal.decode(data);
  } catch {
    s = '';
  }
  return { string: s.replaceAll('\u0010', ' ').replace(CONTROL, '') };
}

function eventTag(data: Buffer): EventDetails {
  const c = new Cursor(data);
  const id = c.u32('tagged event id');
  const size = c.u32('tagged event size');
  if (size > data.length - c.pos) throw malformed('tagged event data runs past the event');
  const body = data.subarray(c.pos, c.pos + size);
  const details: EventDetails = { string: utf8Lossy.decode(body).replaceAll('\u0000', '') };
  if (id === AAEL_EVENT_ID) {
    const text = strictUtf8(body, 'AAEL event');
    const first = text.indexOf(' ');
    const second = first < 0 ? -1 : text.indexOf(' ', first + 1);
    if (first < 0 || second < 0) throw malformed('AAEL event is not "<domain> <operation> <content>"');
    const contentText = text.slice(second + 1);
    let content: unknown;
    try {
      content = JSON.parse(contentText);
    } catch {
      content = contentText;
    }
    details.data = { domain: text.slice(0, first), operation: text.slice(first + 1, second), content };
    details.unicode_name = 'AAEL';
  }
  return details;
}

function ipl(data: Buffer): EventDetails {
  if (data.length < 2) throw malformed('EV_IPL data is shorter than 2 bytes');
  if (data[0] === 0x2e && data[1] === 0x00) {
    // GCE's form: "." then UTF-16; trustee drops the last 2 bytes (the NUL).
    const n = data.length - 2;
    if (n === 0 || n % 2 !== 0) throw malformed('EV_IPL UTF-16 text is malformed');
    return { string: utf16(data.subarray(2, n), false, 'EV_IPL text') };
  }
  const nul = data.indexOf(0);
  const slice = data.subarray(0, nul < 0 ? data.length : nul);
  try {
    return { string: utf8Fatal.decode(slice) };
  } catch {
    return { string: hex(data) };
  }
}

function efiVariable(data: Buffer): EventDetails {
  const c = new Cursor(data);
  const guid = c.bytes(16, 'variable GUID');
  const nameLen = c.bytes(8, 'unicode name length').readBigUInt64LE(0);
  const dataLen = c.bytes(8, 'variable data length').readBigUInt64LE(0);
  const remaining = BigInt(data.length - c.pos);
  if (nameLen * 2n > remaining) throw malformed('EFI variable name runs past the event');
  const name = utf16(c.bytes(Number(nameLen) * 2, 'unicode name'), true, 'EFI variable name');
  let varData = '';
  if (dataLen > 0n) {
    if (dataLen > BigInt(data.length - c.pos)) throw malformed('EFI variable data runs past the event');
    varData = c.bytes(Number(dataLen), 'variable data').toString('base64');
  }
  return {
    unicode_name: name,
    unicode_name_length: Number(nameLen),
    variable_data: varData,
    variable_data_length: Number(dataLen),
    variable_name: `${hex(guid.subarray(0, 4))}-${hex(guid.subarray(4, 6))}-${hex(guid.subarray(6, 8))}-${hex(guid.subarray(8, 10))}-${hex(guid.subarray(10, 16))}`,
  };
}

function uefiGuid(b: Uint8Array): string {
  const x = Buffer.from(b);
  const h = (v: number, n: number) => v.toString(16).toUpperCase().padStart(n, '0');
  const tail = [...x.subarray(8, 16)].map((v) => h(v, 2));
  return `${h(x.readUInt32LE(0), 8)}-${h(x.readUInt16LE(4), 4)}-${h(x.readUInt16LE(6), 4)}-${tail.slice(0, 2).join('')}-${tail.slice(2).join('')}`;
}

/** One device-path node as text; undefined when the node is not one trustee decodes. */
function devicePathNode(type: number, sub: number, d: Buffer): string | undefined {
  switch (type) {
    case 0x01: // hardware
      if (sub === 0x01 && d.length >= 2) return `Pci(${d[0]},${d[1]})`;
      return undefined;
    case 0x02: {
      // ACPI
      if (sub !== 0x01 || d.length < 8) return undefined;
      const hid = d.readUInt32LE(0);
      const uid = d.readUInt32LE(4);
      const vendor = hid & 0xffff;
      const letter = (v: number) => String.fromCharCode((v & 0x1f) + 0x40);
      const device = (hid >>> 16).toString(16).toUpperCase().padStart(4, '0');
      return `ACPI(${letter(vendor >> 10)}${letter(vendor >> 5)}${letter(vendor)}${device},${uid})`;
    }
    case 0x03: // messaging
      if (sub === 0x15 && d.length >= 16)
        return `FibreEx(0x${hex(d.subarray(0, 8))},0x${hex(d.subarray(8, 16))})`;
      if (sub === 0x05 && d.length >= 2) return `USB(${d[0]},${d[1]})`;
      if (sub === 0x0b && d.length === 33) {
        const mac = hex(d.subarray(0, 31)).replace(/0+$/, '').toUpperCase();
        return `Mac(${mac},0x${d[32]!.toString(16).padStart(2, '0')})`;
      }
      if (sub === 0x0c && d.length >= 23) {
        // trustee reads each address as a little-endian u32 and prints it most significant byte first.
        const ip = (o: number) => [d[o + 3], d[o + 2], d[o + 1], d[o]].join('.');
        const proto = d.readUInt16LE(12);
        const kind = d[14];
        const gateway = d.readUInt32LE(15);
        const subnet = d.readUInt32LE(19);
        const protocol = proto === 6 ? 'TCP' : proto === 17 ? 'UDP' : '';
        const addrType = kind === 0 ? 'DHCP' : kind === 1 ? 'Static' : '';
        const gs = gateway !== 0 || subnet !== 0 ? `,${gateway},${subnet}` : '';
        return `IPv4(${ip(4)},${protocol},${addrType},${ip(0)}${gs})`;
      }
      return undefined;
    case 0x04: // media
      if (sub === 0x01 && d.length >= 38) {
        const partition = d.readUInt32LE(0);
        const start = d.readBigUInt64LE(4);
        const size = d.readBigUInt64LE(12);
        const format = d[36];
        let prefix: string;
        let sig: string;
        if (format === 0x01) {
          prefix = 'MBR';
          sig = `0x${d.readUInt32LE(20).toString(16).padStart(8, '0')}`;
        } else if (format === 0x02) {
          prefix = 'GPT';
          sig = uefiGuid(d.subarray(20, 36));
        } else {
          return undefined;
        }
        const extra = partition !== 0 ? `,0x${start.toString(16)},0x${size.toString(16)}` : '';
        return `HD(${partition},${prefix},${sig}${extra})`;
      }
      if (sub === 0x03 && d.length >= 16)
        return `VenMedia(${uefiGuid(d.subarray(0, 16))},${hex(d.subarray(16))})`;
      if (sub === 0x04 && d.length > 0 && d.length % 2 === 0) {
        return `File(${utf16(d.subarray(0, d.length - 2), false, 'file path')})`;
      }
      return undefined;
    case 0x05: {
      // BIOS boot specification
      if (sub !== 0x01 || d.length < 4) return undefined;
      const names: Record<number, string> = {
        1: 'FLOPPY',
        2: 'HARD_DRIVE',
        3: 'CDROM',
        4: 'PCMCIA',
        5: 'USB',
        6: 'EMBEDDED_NETWORK',
        128: 'DEV',
        255: 'UNKNOWN',
      };
      const devType = d.readUInt16LE(0);
      const status = d.readUInt16LE(2);
      const rest = d.subarray(4);
      const nul = rest.indexOf(0);
      let desc: string;
      try {
        desc = utf8Fatal.decode(rest.subarray(0, nul < 0 ? rest.length : nul));
      } catch {
        return undefined;
      }
      return `BBS(${names[devType] ?? String(devType)},${desc},${status})`;
    }
    default:
      return undefined;
  }
}

/** EV_EFI_BOOT_SERVICES_APPLICATION: UEFI_IMAGE_LOAD_EVENT; the device path as text nodes. */
function bootServicesApp(data: Buffer): EventDetails {
  if (data.length < 32) throw malformed('image load event is shorter than 32 bytes');
  const pathLen = data.readBigUInt64LE(24);
  if (pathLen === 0n) return {};
  // trustee leaves out the 4-byte end-of-path node.
  if (pathLen < 4n || pathLen - 4n > BigInt(data.length - 32)) {
    throw malformed('image load event device path runs past the event');
  }
  let path = data.subarray(32, 32 + Number(pathLen - 4n));
  if (path.length < 4) throw malformed('image load event device path is shorter than 4 bytes');
  const out: string[] = [];
  while (path.length > 0) {
    if (path.length < 4) throw malformed('device path node header is truncated');
    const type = path[0]!;
    const sub = path[1]!;
    const len = path.readUInt16LE(2);
    if (len < 4 || len > path.length) throw malformed(`device path node length ${len} is invalid`);
    const d = path.subarray(4, len);
    out.push(devicePathNode(type, sub, d) ?? `Path(${type},${sub},${hex(d)})`);
    path = path.subarray(len);
  }
  return { device_paths: out };
}

type Decoder = (data: Buffer) => EventDetails;
const blank: Decoder = () => ({});

const DECODERS: ReadonlyMap<number, Decoder> = new Map<number, Decoder>([
  [0x1, simpleString],
  [0x4, blank],
  [0x5, simpleString],
  [0x6, eventTag],
  [0xa, platformConfigFlags],
  [0xc, simpleString],
  [0xd, ipl],
  [0x12, simpleString],
  [0x80000001, efiVariable],
  [0x80000002, efiVariable],
  [0x80000003, bootServicesApp],
  [0x80000007, simpleString],
  [0x8000000a, lengthPrefixedString],
  [0x8000000b, lengthPrefixedString],
  [0x8000000c, efiVariable],
  [0x800000e0, efiVariable],
]);

function isEnd(b: Buffer, pos: number): boolean {
  const tail = b.subarray(pos, pos + 8);
  return tail.every((x) => x === 0xff) || tail.every((x) => x === 0);
}

/** Parses a CC event log. Malformed records are errors, never skipped. */
export function parseCcEventLog(input: Uint8Array): CcEventLog {
  if (input.length > MAX_EVENT_LOG_BYTES) {
    throw new VerificationError(
      'EVIDENCE_TOO_LARGE',
      `event log is larger than ${MAX_EVENT_LOG_BYTES} bytes`,
    );
  }
  const b = Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const c = new Cursor(b);
  // The Spec ID event, in the SHA-1 record format.
  c.u32('first register index');
  const firstType = c.u32('first event type');
  if (firstType !== EV_NO_ACTION) throw malformed('does not start with an EV_NO_ACTION Spec ID event');
  c.bytes(20, 'first digest');
  const specSize = c.u32('Spec ID event size');
  const spec = new Cursor(c.bytes(specSize, 'Spec ID event'));
  spec.bytes(24, 'Spec ID header');
  const algCount = spec.u32('algorithm count');
  if (algCount > MAX_DIGESTS_PER_EVENT) throw malformed(`names ${algCount} digest algorithms`);
  const sizes = new Map<number, number>();
  for (let i = 0; i < algCount; i++) {
    const id = spec.u16('algorithm id');
    const size = spec.u16('digest size');
    const name = TCG_ALGORITHMS[id];
    if (name === undefined) throw malformed(`names unknown digest algorithm 0x${id.toString(16)}`);
    const known = DIGEST_SIZE[name];
    if (known !== undefined && known !== size) throw malformed(`gives ${name} a digest size of ${size}`);
    sizes.set(id, size);
  }
  const vendorSize = spec.u8('vendor info size');
  spec.bytes(vendorSize, 'vendor info');
  if (spec.pos !== specSize) throw malformed('Spec ID event has trailing bytes');

  const entries: EventLogEntry[] = [];
  const digests = new Map<number, { alg: string; digest: Buffer }[]>();
  while (c.pos < b.length) {
    if (isEnd(b, c.pos)) break;
    if (entries.length >= MAX_EVENTS) throw malformed(`has more than ${MAX_EVENTS} events`);
    const index = c.u32('register index');
    const typeNum = c.u32('event type');
    const typeName = TCG_EVENT_TYPES.get(typeNum);
    if (typeName === undefined) throw malformed(`has unknown event type 0x${typeNum.toString(16)}`);
    const count = c.u32('digest count');
    if (count > MAX_DIGESTS_PER_EVENT) throw malformed(`event has ${count} digests`);
    const ds: { alg: string; digest: Buffer }[] = [];
    for (let i = 0; i < count; i++) {
      const id = c.u16('digest algorithm');
      const name = TCG_ALGORITHMS[id];
      const size = sizes.get(id);
      if (name === undefined || size === undefined) {
        throw malformed(`event digest uses algorithm 0x${id.toString(16)} the Spec ID event does not name`);
      }
      ds.push({ alg: name, digest: Buffer.from(c.bytes(size, 'digest')) });
    }
    const size = c.u32('event size');
    const data = c.bytes(size, 'event data');
    let matches = true;
    for (const d of ds) {
      const h = NODE_HASH[d.alg];
      if (h === undefined) throw malformed(`cannot check a ${d.alg} digest`);
      if (!createHash(h).update(data).digest().equals(d.digest)) matches = false;
    }
    const decode = DECODERS.get(typeNum) ?? blank;
    entries.push({
      details: decode(data),
      digest_matches_event: matches,
      digests: ds.map((d) => ({ alg: d.alg, digest: d.digest.toString('hex') })),
      event: data.toString('base64'),
      index,
      type_name: typeName,
    });
    const list = digests.get(index) ?? [];
    list.push(...ds);
    digests.set(index, list);
  }
  return { entries, digests };
}

/** Folds the digests of register `index` with `alg`: v = H(v ‖ digest), from zero. */
export function replayRegister(log: CcEventLog, index: number, alg = 'SHA-384'): Buffer {
  const h = NODE_HASH[alg];
  const size = DIGEST_SIZE[alg];
  if (h === undefined || size === undefined) throw new RangeError(`cannot replay ${alg}`);
  let v: Buffer = Buffer.alloc(size);
  for (const d of log.digests.get(index) ?? []) {
    if (d.alg === alg) v = createHash(h).update(v).update(d.digest).digest();
  }
  return v;
}

/** Checks that replaying CC registers 1..4 gives RTMR0..3 (SHA-384), as trustee does. */
export function checkRtmrReplay(log: CcEventLog, rtmrs: readonly Uint8Array[]): void {
  rtmrs.forEach((rtmr, i) => {
    const replayed = replayRegister(log, i + 1);
    if (!replayed.equals(rtmr)) {
      throw new VerificationError(
        'EVENT_LOG_MISMATCH',
        `event log replay of RTMR${i} gives ${replayed.toString('hex')}, the quote holds ${Buffer.from(rtmr).toString('hex')}`,
      );
    }
  });
}

/** One record to encode: register index, event type, event bytes; digests computed for each algorithm. */
export interface EventRecord {
  readonly index: number;
  readonly type: number;
  readonly data: Uint8Array;
  /** Digests to write instead of computing them (tests of mismatching records). */
  readonly digests?: readonly { readonly alg: number; readonly digest: Uint8Array }[];
}

const ALG_IDS: Readonly<Record<string, number>> = {
  'SHA-256': 0xb,
  'SHA-384': 0xc,
  'SHA-512': 0xd,
  SM3: 0x12,
};

/**
 * Encodes an event log: the Spec ID event naming `algorithms`, the records, and the 0xFF end
 * flag. The mock TEE's CCEL and tests use it.
 */
export function encodeCcEventLog(
  records: readonly EventRecord[],
  algorithms: readonly string[] = ['SHA-384'],
): Buffer {
  const u16 = (v: number) => {
    const b = Buffer.alloc(2);
    b.writeUInt16LE(v);
    return b;
  };
  const u32 = (v: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v >>> 0);
    return b;
  };
  const ids = algorithms.map((a) => {
    const id = ALG_IDS[a];
    if (id === undefined) throw new RangeError(`cannot encode ${a} digests`);
    return { id, alg: a };
  });
  const spec = Buffer.concat([
    Buffer.from('Spec ID Event03\0', 'latin1'),
    u32(0),
    Buffer.from([0, 2, 0, 2]),
    u32(ids.length),
    ...ids.map(({ alg, id }) => Buffer.concat([u16(id), u16(DIGEST_SIZE[alg]!)])),
    Buffer.from([0]),
  ]);
  const out: Buffer[] = [u32(0), u32(EV_NO_ACTION), Buffer.alloc(20), u32(spec.length), spec];
  for (const r of records) {
    const ds =
      r.digests ??
      ids.map(({ id, alg }) => ({ alg: id, digest: createHash(NODE_HASH[alg]!).update(r.data).digest() }));
    out.push(u32(r.index), u32(r.type), u32(ds.length));
    for (const d of ds) out.push(u16(d.alg), Buffer.from(d.digest));
    out.push(u32(r.data.length), Buffer.from(r.data));
  }
  out.push(Buffer.alloc(8, 0xff));
  return Buffer.concat(out);
}

/** RTMR values after extending each record's SHA-384 digest into register `index - 1`. */
export function rtmrsOf(records: readonly EventRecord[]): Buffer[] {
  const log = parseCcEventLog(encodeCcEventLog(records));
  return [1, 2, 3, 4].map((i) => replayRegister(log, i));
}
