// A minimal DER reader for the parts of X.509 certificates that Node's X509Certificate does not
// expose: the extensions (AMD's TCB and hardware ID) and the subject's common name. Signatures,
// keys and validity still come from Node (OpenSSL); this only walks the same bytes.
import { VerificationError } from '../errors.js';

export const TAG_BOOLEAN = 0x01;
export const TAG_INTEGER = 0x02;
export const TAG_OCTET_STRING = 0x04;
export const TAG_OID = 0x06;
export const TAG_SEQUENCE = 0x30;
export const TAG_SET = 0x31;

export interface Tlv {
  readonly tag: number;
  /** Offset of the contents. */
  readonly start: number;
  /** Offset just past the contents. */
  readonly end: number;
}

function malformed(what: string): VerificationError {
  return new VerificationError('CERT_MALFORMED', `certificate DER is malformed: ${what}`);
}

/** Reads one TLV at `pos` that must end by `limit`. Single-byte tags and definite, minimal lengths only. */
export function readTlv(buf: Uint8Array, pos: number, limit: number): Tlv {
  if (pos + 2 > limit) throw malformed('truncated header');
  const tag = buf[pos]!;
  if ((tag & 0x1f) === 0x1f) throw malformed('multi-byte tag');
  let len = buf[pos + 1]!;
  let start = pos + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 3) throw malformed('unsupported length form');
    if (start + n > limit) throw malformed('truncated length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[start + i]!;
    if (buf[start] === 0 || len < 0x80) throw malformed('non-minimal length');
    start += n;
  }
  const end = start + len;
  if (end > limit) throw malformed('contents past the end');
  return { tag, start, end };
}

/** The TLVs inside a constructed value. */
export function children(buf: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  let pos = parent.start;
  while (pos < parent.end) {
    const t = readTlv(buf, pos, parent.end);
    out.push(t);
    pos = t.end;
  }
  return out;
}

export function expectTag(t: Tlv | undefined, tag: number, what: string): Tlv {
  if (t === undefined || t.tag !== tag) throw malformed(`expected ${what}`);
  return t;
}

/** Dotted-decimal form of an OBJECT IDENTIFIER's contents. */
export function oidToString(bytes: Uint8Array): string {
  if (bytes.length === 0 || bytes.length > 64) throw malformed('bad OID length');
  const arcs: number[] = [];
  let v = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (v === 0 && b === 0x80) throw malformed('non-minimal OID arc');
    v = v * 128 + (b & 0x7f);
    if (v > Number.MAX_SAFE_INTEGER / 128) throw malformed('OID arc too large');
    if ((b & 0x80) === 0) {
      if (arcs.length === 0) {
        const first = v < 80 ? Math.floor(v / 40) : 2;
        arcs.push(first, v - first * 40);
      } else {
        arcs.push(v);
      }
      v = 0;
    }
  }
  if ((bytes[bytes.length - 1]! & 0x80) !== 0) throw malformed('truncated OID');
  return arcs.join('.');
}

/** A non-negative DER INTEGER (complete TLV in `bytes`) as a number, or null if not one. */
export function decodeSmallUint(bytes: Uint8Array): number | null {
  let t: Tlv;
  try {
    t = readTlv(bytes, 0, bytes.length);
  } catch {
    return null;
  }
  if (t.tag !== TAG_INTEGER || t.end !== bytes.length || t.end === t.start) return null;
  const body = bytes.subarray(t.start, t.end);
  if (body[0]! & 0x80) return null; // negative
  if (body.length > 1 && body[0] === 0 && (body[1]! & 0x80) === 0) return null; // non-minimal
  if (body.length > 7) return null;
  let v = 0;
  for (const b of body) v = v * 256 + b;
  return v;
}

/** The contents of a DER OCTET STRING spanning all of `bytes`, or null if `bytes` is not one. */
export function decodeOctetString(bytes: Uint8Array): Uint8Array | null {
  try {
    const t = readTlv(bytes, 0, bytes.length);
    if (t.tag !== TAG_OCTET_STRING || t.end !== bytes.length) return null;
    return bytes.subarray(t.start, t.end);
  } catch {
    return null;
  }
}

export interface CertificateFields {
  /** extnID (dotted) → extnValue contents. */
  readonly extensions: ReadonlyMap<string, Uint8Array>;
  /** The subject's single commonName, if it has exactly one. */
  readonly commonName?: string;
}

const OID_COMMON_NAME = '2.5.4.3';
const CN_STRING_TAGS = new Set([0x0c, 0x13, 0x16, 0x14]); // UTF8String, PrintableString, IA5String, TeletexString

/**
 * Extensions and subject CN of a DER certificate. The certificate must be exactly one DER
 * value; a repeated extension is an error, as x509-parser's `get_extension_unique` makes it.
 */
export function certificateFields(der: Uint8Array): CertificateFields {
  const cert = expectTag(readTlv(der, 0, der.length), TAG_SEQUENCE, 'Certificate');
  if (cert.end !== der.length) throw malformed('trailing bytes after the certificate');
  const tbs = expectTag(children(der, cert)[0], TAG_SEQUENCE, 'TBSCertificate');
  const parts = children(der, tbs);
  let i = 0;
  if (parts[i]?.tag === 0xa0) i++; // [0] version
  i++; // serialNumber
  i++; // signature
  i++; // issuer
  i++; // validity
  const subject = expectTag(parts[i++], TAG_SEQUENCE, 'subject Name');
  i++; // subjectPublicKeyInfo
  const extensions = new Map<string, Uint8Array>();
  for (; i < parts.length; i++) {
    const p = parts[i]!;
    if (p.tag !== 0xa3) continue; // [1], [2] unique IDs
    const list = expectTag(children(der, p)[0], TAG_SEQUENCE, 'Extensions');
    for (const ext of children(der, list)) {
      const f = children(der, expectTag(ext, TAG_SEQUENCE, 'Extension'));
      const oidTlv = expectTag(f[0], TAG_OID, 'extnID');
      let k = 1;
      if (f[k]?.tag === TAG_BOOLEAN) k++;
      const value = expectTag(f[k], TAG_OCTET_STRING, 'extnValue');
      if (k + 1 !== f.length) throw malformed('extra fields in an Extension');
      const oid = oidToString(der.subarray(oidTlv.start, oidTlv.end));
      if (extensions.has(oid)) throw malformed(`extension ${oid} appears twice`);
      extensions.set(oid, der.subarray(value.start, value.end));
    }
  }
  const names: string[] = [];
  for (const rdn of children(der, subject)) {
    for (const atv of children(der, expectTag(rdn, TAG_SET, 'RelativeDistinguishedName'))) {
      const [type, value] = children(der, expectTag(atv, TAG_SEQUENCE, 'AttributeTypeAndValue'));
      const oidTlv = expectTag(type, TAG_OID, 'attribute type');
      if (oidToString(der.subarray(oidTlv.start, oidTlv.end)) !== OID_COMMON_NAME) continue;
      if (value === undefined || !CN_STRING_TAGS.has(value.tag)) continue;
      names.push(
        Buffer.from(der.subarray(value.start, value.end)).toString(value.tag === 0x0c ? 'utf8' : 'latin1'),
      );
    }
  }
  return names.length === 1 ? { extensions, commonName: names[0]! } : { extensions };
}
