// The PCK certificate chain a TDX quote carries (leaf "Intel SGX PCK Certificate", an "Intel SGX
// PCK Platform CA" or "Processor CA", and the root), and the SGX extensions of the leaf
// (OID 1.2.840.113741.1.13.1, Intel's "SGX PCK Certificate and CRL Profile"): the platform's
// FMSPC, PCE id, the 16 SGX TCB component SVNs, PCESVN and CPUSVN, the SGX type, and for
// platform CA leaves the platform instance id and configuration.
import { X509Certificate } from 'node:crypto';
import { VerificationError } from '../errors.js';
import { pemCertificates } from '../snp/certs.js';
import {
  certificateFields,
  children,
  expectTag,
  oidToString,
  readTlv,
  TAG_BOOLEAN,
  TAG_INTEGER,
  TAG_OCTET_STRING,
  TAG_OID,
  TAG_SEQUENCE,
  type Tlv,
} from '../x509/der.js';

export const OID_SGX_EXTENSIONS = '1.2.840.113741.1.13.1';
const SGX = OID_SGX_EXTENSIONS;
const TAG_ENUMERATED = 0x0a;

export const PCK_LEAF_CN = 'Intel SGX PCK Certificate';
export const PCK_PLATFORM_CA_CN = 'Intel SGX PCK Platform CA';
export const PCK_PROCESSOR_CA_CN = 'Intel SGX PCK Processor CA';

/** What the PCK leaf certifies about the platform. */
export interface PckPlatform {
  readonly ppid: Buffer;
  /** SGX TCB component SVNs 1..16. */
  readonly tcbComponents: readonly number[];
  readonly pceSvn: number;
  readonly cpuSvn: Buffer;
  readonly pceId: Buffer;
  readonly fmspc: Buffer;
  /** 0 Standard, 1 Scalable, 2 Scalable with integrity. */
  readonly sgxType: number;
  /** True when issued by the PCK Platform CA (multi-package platforms), false for the Processor CA. */
  readonly platformCa: boolean;
  /** Platform CA leaves: the platform instance id as a big-endian GUID (trustee's reading). */
  readonly platformInstanceId?: Buffer;
  readonly dynamicPlatform?: boolean;
  readonly cachedKeys?: boolean;
  readonly smtEnabled?: boolean;
}

export interface PckChain {
  readonly leaf: X509Certificate;
  readonly intermediate: X509Certificate;
  /** The root as the quote carries it; trust comes from comparing it with the configured roots. */
  readonly root: X509Certificate;
  readonly leafDer: Buffer;
  readonly platform: PckPlatform;
}

function bad(msg: string): VerificationError {
  return new VerificationError('CERT_MALFORMED', `PCK certificate ${msg}`);
}

function certificate(der: Buffer, what: string): X509Certificate {
  try {
    const c = new X509Certificate(der);
    void c.publicKey;
    return c;
  } catch (e) {
    throw new VerificationError('CERT_MALFORMED', `${what} is not an X.509 certificate`, { cause: e });
  }
}

/** One `SEQUENCE { OID, value }` of the SGX extension, by OID. */
function entries(der: Uint8Array, seq: Tlv, prefix: string): Map<string, Tlv> {
  const out = new Map<string, Tlv>();
  for (const item of children(der, expectTag(seq, TAG_SEQUENCE, 'SGX extension sequence'))) {
    const parts = children(der, expectTag(item, TAG_SEQUENCE, 'SGX extension entry'));
    if (parts.length !== 2) throw bad('SGX extension entry is not an OID and a value');
    const oidTlv = expectTag(parts[0], TAG_OID, 'SGX extension OID');
    const oid = oidToString(der.subarray(oidTlv.start, oidTlv.end));
    if (!oid.startsWith(`${prefix}.`)) throw bad(`SGX extension entry ${oid} is outside ${prefix}`);
    if (out.has(oid)) throw bad(`SGX extension entry ${oid} appears twice`);
    out.set(oid, parts[1]!);
  }
  return out;
}

function required(m: Map<string, Tlv>, oid: string, name: string): Tlv {
  const t = m.get(oid);
  if (t === undefined) throw bad(`SGX extension lacks ${name} (${oid})`);
  return t;
}

function octets(der: Uint8Array, t: Tlv, length: number, name: string): Buffer {
  if (t.tag !== TAG_OCTET_STRING) throw bad(`SGX extension ${name} is not an OCTET STRING`);
  if (t.end - t.start !== length) throw bad(`SGX extension ${name} is not ${length} bytes`);
  return Buffer.from(der.subarray(t.start, t.end));
}

function uint(der: Uint8Array, t: Tlv, max: number, name: string, tag = TAG_INTEGER): number {
  if (t.tag !== tag) throw bad(`SGX extension ${name} has the wrong type`);
  const body = der.subarray(t.start, t.end);
  if (body.length === 0 || body.length > 3 || (body[0]! & 0x80) !== 0) {
    throw bad(`SGX extension ${name} is not a small non-negative integer`);
  }
  if (body.length > 1 && body[0] === 0 && (body[1]! & 0x80) === 0)
    throw bad(`SGX extension ${name} is not minimal DER`);
  let v = 0;
  for (const x of body) v = v * 256 + x;
  if (v > max) throw bad(`SGX extension ${name} ${v} exceeds ${max}`);
  return v;
}

function bool(der: Uint8Array, t: Tlv, name: string): boolean {
  if (t.tag !== TAG_BOOLEAN || t.end - t.start !== 1) throw bad(`SGX extension ${name} is not a BOOLEAN`);
  const v = der[t.start]!;
  if (v !== 0 && v !== 0xff) throw bad(`SGX extension ${name} is not a DER BOOLEAN`);
  return v === 0xff;
}

/** Parses the SGX extension value (the DER inside the extension's OCTET STRING). */
export function parseSgxExtension(value: Uint8Array, platformCa: boolean): PckPlatform {
  const top = readTlv(value, 0, value.length);
  if (top.end !== value.length) throw bad('SGX extension has trailing bytes');
  const m = entries(value, top, SGX);
  const known = new Set([1, 2, 3, 4, 5, 6, 7].map((n) => `${SGX}.${n}`));
  for (const oid of m.keys()) if (!known.has(oid)) throw bad(`SGX extension has unknown entry ${oid}`);
  const ppid = octets(value, required(m, `${SGX}.1`, 'PPID'), 16, 'PPID');
  const tcbSeq = required(m, `${SGX}.2`, 'TCB');
  const tcb = entries(value, tcbSeq, `${SGX}.2`);
  if (tcb.size !== 18) throw bad(`SGX extension TCB has ${tcb.size} entries, not 18`);
  const tcbComponents: number[] = [];
  for (let i = 1; i <= 16; i++) {
    tcbComponents.push(
      uint(value, required(tcb, `${SGX}.2.${i}`, `TCB component ${i}`), 255, `TCB component ${i}`),
    );
  }
  const pceSvn = uint(value, required(tcb, `${SGX}.2.17`, 'PCESVN'), 0xffff, 'PCESVN');
  const cpuSvn = octets(value, required(tcb, `${SGX}.2.18`, 'CPUSVN'), 16, 'CPUSVN');
  const pceId = octets(value, required(m, `${SGX}.3`, 'PCE-ID'), 2, 'PCE-ID');
  const fmspc = octets(value, required(m, `${SGX}.4`, 'FMSPC'), 6, 'FMSPC');
  const sgxType = uint(value, required(m, `${SGX}.5`, 'SGX type'), 2, 'SGX type', TAG_ENUMERATED);
  const pi = m.get(`${SGX}.6`);
  const cfg = m.get(`${SGX}.7`);
  const base = { ppid, tcbComponents, pceSvn, cpuSvn, pceId, fmspc, sgxType, platformCa };
  if (!platformCa) {
    if (pi !== undefined || cfg !== undefined) {
      throw bad('issued by the Processor CA carries platform instance or configuration entries');
    }
    return base;
  }
  if (pi === undefined || cfg === undefined) {
    throw bad('issued by the Platform CA lacks its platform instance id or configuration');
  }
  // The instance id is a GUID stored little-endian; trustee shows it byte-reversed.
  const platformInstanceId = Buffer.from(octets(value, pi, 16, 'platform instance id')).reverse();
  const c = entries(value, cfg, `${SGX}.7`);
  if (c.size !== 3) throw bad('SGX extension configuration does not have 3 entries');
  return {
    ...base,
    platformInstanceId,
    dynamicPlatform: bool(value, required(c, `${SGX}.7.1`, 'dynamic platform'), 'dynamic platform'),
    cachedKeys: bool(value, required(c, `${SGX}.7.2`, 'cached keys'), 'cached keys'),
    smtEnabled: bool(value, required(c, `${SGX}.7.3`, 'SMT enabled'), 'SMT enabled'),
  };
}

/**
 * Parses the quote's PEM chain: exactly three certificates, leaf first, as the QE writes them.
 * Signatures and trust are checked elsewhere; this only reads.
 */
export function parsePckChain(pem: Uint8Array): PckChain {
  // The QE writes the PEM text with a terminating NUL.
  const text = Buffer.from(pem).toString('latin1');
  const ders = pemCertificates(text, 3);
  if (ders.length !== 3) {
    throw new VerificationError(
      'CERT_CHAIN_INVALID',
      `PCK certificate chain must hold 3 certificates (leaf, PCK CA, root), not ${ders.length}`,
    );
  }
  const [leafDer, caDer, rootDer] = ders as [Buffer, Buffer, Buffer];
  const caFields = certificateFields(caDer);
  const leafFields = certificateFields(leafDer);
  certificateFields(rootDer);
  let platformCa: boolean;
  if (caFields.commonName === PCK_PLATFORM_CA_CN) platformCa = true;
  else if (caFields.commonName === PCK_PROCESSOR_CA_CN) platformCa = false;
  else throw bad(`intermediate has an unexpected subject CN ${JSON.stringify(caFields.commonName ?? null)}`);
  if (leafFields.commonName !== PCK_LEAF_CN) {
    throw bad(`leaf has an unexpected subject CN ${JSON.stringify(leafFields.commonName ?? null)}`);
  }
  const ext = leafFields.extensions.get(OID_SGX_EXTENSIONS);
  if (ext === undefined) throw bad('leaf lacks the SGX extensions');
  const platform = parseSgxExtension(ext, platformCa);
  return {
    leaf: certificate(leafDer, 'PCK leaf certificate'),
    intermediate: certificate(caDer, 'PCK CA certificate'),
    root: certificate(rootDer, 'PCK root certificate'),
    leafDer,
    platform,
  };
}
