// The OpaqueData of an NVIDIA GET_MEASUREMENTS response: a list of `type u16, size u16, data`
// items (little-endian), each of a known NVIDIA type. Names and value shapes are the ones NVIDIA's
// nvtrust tools and trustee's verifier report, so policies written for trustee read the same claims.
import { VerificationError } from '../errors.js';

type Decode = (data: Buffer, name: string) => unknown;

/** NUL-padded text: UTF-8 with replacement characters for bad bytes, trailing NULs trimmed. */
const text: Decode = (data) => new TextDecoder('utf-8').decode(data).replace(/\0+$/, '');
const hex: Decode = (data) => data.toString('hex');

function malformed(message: string): VerificationError {
  return new VerificationError('REPORT_MALFORMED', `NVIDIA report opaque data: ${message}`);
}

/** The first half byte-reversed, then the byte after it: `00 9f 00 96 01 00 00 00` → `96.00.9f.00.01`. */
const vbiosVersion: Decode = (data, name) => {
  const half = Math.floor(data.length / 2);
  if (half >= data.length) throw malformed(`${name} is empty`);
  const head = [...data.subarray(0, half)].reverse().map((b) => b.toString(16).padStart(2, '0'));
  return `${head.join('.')}.${data[half]!.toString(16).padStart(2, '0')}`;
};

/** One little-endian u32 per measurement block, numbered from 1. */
const measurementCount: Decode = (data, name) => {
  if (data.length % 4 !== 0) throw malformed(`${name} is not a multiple of 4 bytes`);
  // trustee numbers the counts with a u8 starting at 1.
  if (data.length / 4 > 255) throw malformed(`${name} has more than 255 counts`);
  const counts: Record<string, number> = {};
  for (let i = 0; i < data.length / 4; i++) counts[String(i + 1)] = data.readUInt32LE(4 * i);
  return counts;
};

const switchPdis: Decode = (data, name) => {
  if (data.length % 8 !== 0) throw malformed(`${name} is not a multiple of 8 bytes`);
  const pdis: string[] = [];
  for (let i = 0; i < data.length; i += 8) pdis.push(data.subarray(i, i + 8).toString('hex'));
  return pdis;
};

function littleEndianU64(data: Buffer, name: string): bigint {
  if (data.length > 8) throw malformed(`${name} is longer than 8 bytes`);
  let v = 0n;
  for (let i = data.length - 1; i >= 0; i--) v = (v << 8n) | BigInt(data[i]!);
  return v;
}

const integer: Decode = (data, name) => {
  const v = littleEndianU64(data, name);
  // JSON numbers here are doubles; a larger version would silently change.
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw malformed(`${name} exceeds 2^53`);
  return Number(v);
};

const featureFlag: Decode = (data, name) =>
  (['SPT', 'MPT', 'PPCIE'] as const)[Number(littleEndianU64(data, name))] ?? 'unknown';

/** OpaqueDataType code → claim name and decoder. Any other code rejects the report. */
export const OPAQUE_DATA_TYPES: ReadonlyMap<number, readonly [string, Decode]> = new Map([
  [1, ['cert_issuer_name', hex]],
  [2, ['cert_authority_key_identifier', hex]],
  [3, ['driver_version', text]],
  [4, ['gpu_info', hex]],
  [5, ['id_sku', hex]],
  [6, ['vbios_version', vbiosVersion]],
  [7, ['manufacturer_id', hex]],
  [8, ['tamper_detection', hex]],
  [9, ['smc', hex]],
  [10, ['vpr', hex]],
  [11, ['nvdec0_status', text]],
  [12, ['measurement_count', measurementCount]],
  [13, ['cpr_info', hex]],
  [14, ['board_id', hex]],
  [15, ['chip_sku', text]],
  [16, ['chip_sku_mod', text]],
  [17, ['project', text]],
  [18, ['project_sku', text]],
  [19, ['project_sku_mod', hex]],
  [20, ['fwid', hex]],
  [21, ['protected_pcie_status', text]],
  [22, ['switch_pdi', switchPdis]],
  [23, ['floorswept_ports', hex]],
  [24, ['position_id', hex]],
  [25, ['lock_switch_status', hex]],
  [32, ['gpu_link_conn', hex]],
  [33, ['sys_enable_status', hex]],
  [34, ['opaque_data_version', integer]],
  [35, ['chip_info', text]],
  [36, ['feature_flag', featureFlag]],
] as const);

export const OPAQUE_DRIVER_VERSION = 'driver_version';
export const OPAQUE_VBIOS_VERSION = 'vbios_version';
export const OPAQUE_FWID = 'fwid';

/**
 * Decodes the items into `name → value`. An unknown or repeated type is an error, and the driver
 * and VBIOS versions must be there: they name the device's TCB. As trustee does, a tail of four
 * bytes or fewer after the last item is not read.
 */
export function decodeOpaqueData(bytes: Buffer): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (bytes.length === 0) return out;
  let offset = 0;
  while (offset + 4 < bytes.length) {
    const code = bytes.readUInt16LE(offset);
    const size = bytes.readUInt16LE(offset + 2);
    offset += 4;
    const known = OPAQUE_DATA_TYPES.get(code);
    if (known === undefined) throw malformed(`unknown data type ${code}`);
    const [name, decode] = known;
    if (offset + size > bytes.length) {
      throw malformed(`${name} (${size} bytes at offset ${offset}) runs past the opaque data`);
    }
    if (Object.hasOwn(out, name)) throw malformed(`${name} appears twice`);
    out[name] = decode(bytes.subarray(offset, offset + size), name);
    offset += size;
  }
  if (!Object.hasOwn(out, OPAQUE_VBIOS_VERSION) || !Object.hasOwn(out, OPAQUE_DRIVER_VERSION)) {
    throw malformed('both vbios_version and driver_version must be present');
  }
  return out;
}
