// The certificate table the host hands out with an extended SNP report (GHCB specification,
// "SNP Extended Guest Request"), as configfs-tsm's `auxblob` carries it: 24-byte entries
// {GUID (RFC byte order), offset u32 LE, length u32 LE} ended by an all-zero entry, followed by
// the certificates; offsets count from the start of the table. The sev crate turns it into
// `CertTableEntry { cert_type, data }` values, sorted by type; this module does the same.
import { EvidenceCollectionFailed } from '../attester.js';

/** The sev crate's `CertType` as serde writes it: a variant name, or `{"OTHER": "<uuid>"}`. */
export type SevCertType = 'Empty' | 'ARK' | 'ASK' | 'VCEK' | 'VLEK' | 'CRL' | { readonly OTHER: string };

/** The sev crate's `CertTableEntry` as serde writes it: the certificate bytes as an array of numbers. */
export interface SevCertTableEntryJson {
  readonly cert_type: SevCertType;
  readonly data: number[];
}

/** GUIDs of the certificate types the GHCB specification names. */
export const CERT_TYPE_GUIDS: Readonly<Record<string, SevCertType>> = Object.freeze({
  '00000000-0000-0000-0000-000000000000': 'Empty',
  'c0b406a4-a803-4952-9743-3fb6014cd0ae': 'ARK',
  '4ab7b379-bbac-4fe4-a02f-05aef327c782': 'ASK',
  '63da758d-e664-4564-adc5-f4b93be8accd': 'VCEK',
  'a8074bc2-a25a-483e-aae6-39c045a0b8a1': 'VLEK',
  '92f81bc3-5811-4d3d-97ff-d19f88dc67ea': 'CRL',
});

const ENTRY_SIZE = 24;
/** The kernel passes at most SEV_FW_BLOB_MAX_SIZE (16 KiB) of certificates; this leaves room. */
export const MAX_CERT_TABLE_BYTES = 64 * 1024;
/** A host table names a handful of certificates. */
export const MAX_CERT_TABLE_ENTRIES = 64;

function guidString(b: Uint8Array): string {
  const h = Buffer.from(b).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// The sev crate's `Ord for CertType`: ARK < VCEK < VLEK < ASK < CRL < OTHER (by UUID) < Empty.
const RANK: Record<string, number> = { ARK: 0, VCEK: 1, VLEK: 2, ASK: 3, CRL: 4, OTHER: 5, Empty: 6 };

function rank(t: SevCertType): number {
  return typeof t === 'string' ? RANK[t]! : RANK.OTHER!;
}

function compare(a: SevCertType, b: SevCertType): number {
  const d = rank(a) - rank(b);
  if (d !== 0 || typeof a === 'string' || typeof b === 'string') return d;
  return a.OTHER < b.OTHER ? -1 : a.OTHER > b.OTHER ? 1 : 0;
}

function fail(message: string): never {
  throw new EvidenceCollectionFailed(`Failed to parse the SNP certificate table: ${message}`);
}

/**
 * The entries of a certificate table, sorted as the sev crate sorts them (a stable sort, so
 * entries of one type keep the host's order). The table must end with its all-zero entry, and
 * every certificate must lie inside the blob.
 */
export function parseCertTable(blob: Uint8Array): SevCertTableEntryJson[] {
  if (blob.length > MAX_CERT_TABLE_BYTES) fail(`${blob.length} bytes is more than ${MAX_CERT_TABLE_BYTES}`);
  const b = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
  const entries: SevCertTableEntryJson[] = [];
  for (let i = 0; ; i++) {
    const at = i * ENTRY_SIZE;
    if (at + ENTRY_SIZE > b.length) fail('the table has no terminating entry');
    const guid = b.subarray(at, at + 16);
    const offset = b.readUInt32LE(at + 16);
    const length = b.readUInt32LE(at + 20);
    // The sev crate stops at the first zero GUID, whatever its offset and length.
    if (guid.every((x) => x === 0)) break;
    if (i === MAX_CERT_TABLE_ENTRIES) fail(`more than ${MAX_CERT_TABLE_ENTRIES} entries`);
    if (offset > b.length || length > b.length - offset) {
      fail(`entry ${i} points outside the ${b.length}-byte blob (offset ${offset}, length ${length})`);
    }
    const id = guidString(guid);
    const certType = CERT_TYPE_GUIDS[id] ?? { OTHER: id };
    entries.push({ cert_type: certType, data: [...b.subarray(offset, offset + length)] });
  }
  // Array.prototype.sort is stable, as Rust's slice::sort is.
  return entries.sort((x, y) => compare(x.cert_type, y.cert_type));
}
