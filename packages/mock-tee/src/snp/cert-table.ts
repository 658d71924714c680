// The host side of the SNP certificate table (GHCB specification, "SNP Extended Guest Request"):
// what a hypervisor hands the guest with an extended report and configfs-tsm exposes as `auxblob`.
// 24-byte entries {GUID in RFC byte order, offset u32 LE, length u32 LE}, an all-zero entry, then
// the certificates; offsets count from the start of the table.
import { MockTeeError } from '../errors.js';

/** GUIDs of the certificate types the GHCB specification names. */
export const CERT_TABLE_GUIDS = Object.freeze({
  ARK: 'c0b406a4-a803-4952-9743-3fb6014cd0ae',
  ASK: '4ab7b379-bbac-4fe4-a02f-05aef327c782',
  VCEK: '63da758d-e664-4564-adc5-f4b93be8accd',
  VLEK: 'a8074bc2-a25a-483e-aae6-39c045a0b8a1',
  CRL: '92f81bc3-5811-4d3d-97ff-d19f88dc67ea',
} as const);

export interface CertTableInput {
  /** A named type, or any other GUID (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`). */
  readonly type: keyof typeof CERT_TABLE_GUIDS | string;
  readonly data: Uint8Array;
}

const ENTRY_SIZE = 24;
const GUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function guidBytes(type: string): Buffer {
  const guid = (CERT_TABLE_GUIDS as Record<string, string>)[type] ?? type;
  if (!GUID_RE.test(guid) || /^[0-]+$/.test(guid)) {
    throw new MockTeeError(
      'USAGE',
      `certificate table type ${JSON.stringify(type)} is neither a known type nor a GUID`,
    );
  }
  return Buffer.from(guid.replaceAll('-', ''), 'hex');
}

/** Lays out a certificate table; an empty list gives an empty blob (the kernel's "no certificates"). */
export function encodeCertTable(entries: readonly CertTableInput[]): Buffer {
  if (entries.length === 0) return Buffer.alloc(0);
  const header = Buffer.alloc((entries.length + 1) * ENTRY_SIZE);
  let offset = header.length;
  entries.forEach((e, i) => {
    guidBytes(e.type).copy(header, i * ENTRY_SIZE);
    header.writeUInt32LE(offset, i * ENTRY_SIZE + 16);
    header.writeUInt32LE(e.data.length, i * ENTRY_SIZE + 20);
    offset += e.data.length;
  });
  return Buffer.concat([header, ...entries.map((e) => Buffer.from(e.data))]);
}
