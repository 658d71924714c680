// Certificate revocation lists of Intel's PKI, supplied offline with the collateral: the PCK CA's
// CRL (PCS `pckcrl?ca=platform|processor`) revokes PCK certificates, the root CA's CRL revokes the
// PCK CAs and the TCB signing certificate. Parsed from DER (or PEM), signature checked against the
// expected issuer, then consulted by serial number.
//
//   CertificateList ::= SEQUENCE { tbsCertList, signatureAlgorithm, signatureValue BIT STRING }
//   TBSCertList ::= SEQUENCE { version INTEGER OPTIONAL, signature, issuer Name, thisUpdate Time,
//                              nextUpdate Time OPTIONAL,
//                              revokedCertificates SEQUENCE OF SEQUENCE { userCertificate INTEGER,
//                                revocationDate Time, crlEntryExtensions OPTIONAL } OPTIONAL,
//                              crlExtensions [0] EXPLICIT Extensions OPTIONAL }
import { constants as cryptoConstants, verify, type X509Certificate } from 'node:crypto';
import { VerificationError } from '../errors.js';
import {
  children,
  decodeSmallUint,
  expectTag,
  oidToString,
  readTlv,
  TAG_INTEGER,
  TAG_OID,
  TAG_SEQUENCE,
  type Tlv,
} from '../x509/der.js';

export const MAX_CRL_BYTES = 1024 * 1024;
const OID_CRL_NUMBER = '2.5.29.20';
const HASH_OF_SIG_ALG: Readonly<Record<string, string>> = {
  '1.2.840.10045.4.3.2': 'sha256',
  '1.2.840.10045.4.3.3': 'sha384',
  '1.2.840.10045.4.3.4': 'sha512',
};

export interface Crl {
  readonly thisUpdate: Date;
  readonly nextUpdate?: Date;
  /** Revoked serial numbers, lower-case hex without leading zeros. */
  readonly revoked: ReadonlySet<string>;
  readonly crlNumber?: number;
  readonly tbs: Buffer;
  readonly hash: string;
  /** RSASSA-PSS (AMD's KDS CRLs: SHA-384, 48-byte salt) rather than ECDSA (Intel's). */
  readonly pss?: boolean;
  readonly signature: Buffer;
}
const OID_RSASSA_PSS = '1.2.840.113549.1.1.10';

function bad(msg: string): VerificationError {
  return new VerificationError('COLLATERAL_INVALID', `CRL ${msg}`);
}

/** A serial number as X509Certificate.serialNumber writes it, without leading zeros. */
export function normalizeSerial(hex: string): string {
  return hex.toLowerCase().replace(/^0+(?=.)/, '');
}

function time(der: Buffer, t: Tlv): Date {
  const s = der.subarray(t.start, t.end).toString('latin1');
  let iso: string;
  if (t.tag === 0x17 && /^\d{12}Z$/.test(s)) {
    const yy = Number(s.slice(0, 2));
    iso = `${yy < 50 ? 20 : 19}${s.slice(0, 2)}-${s.slice(2, 4)}-${s.slice(4, 6)}T${s.slice(6, 8)}:${s.slice(8, 10)}:${s.slice(10, 12)}Z`;
  } else if (t.tag === 0x18 && /^\d{14}Z$/.test(s)) {
    iso = `${s.slice(0, 4)}-${s.slice(4, 6)}-${s.slice(6, 8)}T${s.slice(8, 10)}:${s.slice(10, 12)}:${s.slice(12, 14)}Z`;
  } else {
    throw bad('has a malformed time');
  }
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) throw bad('has an invalid time');
  return d;
}

function toDer(raw: string | Uint8Array): Buffer {
  // PEM may also arrive as bytes (a file read as is).
  const head = typeof raw === 'string' ? '' : Buffer.from(raw.subarray(0, 64)).toString('latin1');
  const input =
    typeof raw !== 'string' && head.includes('-----BEGIN') ? Buffer.from(raw).toString('latin1') : raw;
  if (typeof input !== 'string') return Buffer.from(input);
  const m = /-----BEGIN X509 CRL-----([A-Za-z0-9+/=\s]+)-----END X509 CRL-----/.exec(input);
  if (m !== null) return Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64');
  if (/^(?:[0-9a-fA-F]{2})+$/.test(input.trim())) return Buffer.from(input.trim(), 'hex');
  throw bad('is neither DER, PEM nor hex');
}

export function parseCrl(input: string | Uint8Array): Crl {
  const der = toDer(input);
  if (der.length > MAX_CRL_BYTES)
    throw new VerificationError('EVIDENCE_TOO_LARGE', `CRL is larger than ${MAX_CRL_BYTES} bytes`);
  try {
    const top = expectTag(readTlv(der, 0, der.length), TAG_SEQUENCE, 'CertificateList');
    if (top.end !== der.length) throw bad('has trailing bytes');
    const [tbsT, algT, sigT] = children(der, top);
    const tbsTlv = expectTag(tbsT, TAG_SEQUENCE, 'TBSCertList');
    const alg = children(der, expectTag(algT, TAG_SEQUENCE, 'signatureAlgorithm'));
    const algOid = expectTag(alg[0], TAG_OID, 'signature algorithm');
    const algName = oidToString(der.subarray(algOid.start, algOid.end));
    // PSS parameters are not read: anything but SHA-384 with a 48-byte salt fails the signature check.
    const pss = algName === OID_RSASSA_PSS;
    const hash = pss ? 'sha384' : HASH_OF_SIG_ALG[algName];
    if (hash === undefined) throw bad('is not signed with ECDSA or RSASSA-PSS');
    const sig = expectTag(sigT, 0x03, 'signatureValue');
    if (der[sig.start] !== 0) throw bad('signature has unused bits');
    const parts = children(der, tbsTlv);
    let i = 0;
    if (parts[i]?.tag === TAG_INTEGER) i++; // version
    i++; // signature
    i++; // issuer
    const thisUpdate = time(der, parts[i++]!);
    let nextUpdate: Date | undefined;
    if (parts[i] !== undefined && (parts[i]!.tag === 0x17 || parts[i]!.tag === 0x18))
      nextUpdate = time(der, parts[i++]!);
    const revoked = new Set<string>();
    if (parts[i]?.tag === TAG_SEQUENCE) {
      for (const entry of children(der, parts[i++]!)) {
        const serial = expectTag(
          children(der, expectTag(entry, TAG_SEQUENCE, 'revoked entry'))[0],
          TAG_INTEGER,
          'serial',
        );
        revoked.add(normalizeSerial(der.subarray(serial.start, serial.end).toString('hex')));
      }
    }
    let crlNumber: number | undefined;
    if (parts[i]?.tag === 0xa0) {
      const exts = expectTag(children(der, parts[i++]!)[0], TAG_SEQUENCE, 'crlExtensions');
      for (const ext of children(der, exts)) {
        const f = children(der, expectTag(ext, TAG_SEQUENCE, 'Extension'));
        const oid = expectTag(f[0], TAG_OID, 'extnID');
        if (oidToString(der.subarray(oid.start, oid.end)) !== OID_CRL_NUMBER) continue;
        const value = f[f.length - 1]!;
        crlNumber = decodeSmallUint(der.subarray(value.start, value.end)) ?? undefined;
      }
    }
    if (i !== parts.length) throw bad('has unexpected fields');
    return {
      thisUpdate,
      ...(nextUpdate !== undefined ? { nextUpdate } : {}),
      revoked,
      ...(crlNumber !== undefined ? { crlNumber } : {}),
      tbs: der.subarray(tbsHeaderStart(der, tbsTlv), tbsTlv.end),
      hash,
      ...(pss ? { pss } : {}),
      signature: der.subarray(sig.start + 1, sig.end),
    };
  } catch (e) {
    if (e instanceof VerificationError && e.code !== 'CERT_MALFORMED') throw e;
    throw bad(`is malformed: ${(e as Error).message}`);
  }
}

/** Offset of a TLV's tag byte, from its contents' offset (the DER reader keeps contents offsets). */
function tbsHeaderStart(der: Buffer, t: Tlv): number {
  for (let h = 2; h <= 5; h++) {
    const start = t.start - h;
    if (start < 0) break;
    try {
      const r = readTlv(der, start, der.length);
      if (r.start === t.start && r.end === t.end) return start;
    } catch {
      // not a header of that length
    }
  }
  throw bad('TBSCertList header not found');
}

/** Checks the CRL's signature by `issuer` and that it is in force at `now` (thisUpdate passed). */
export function checkCrl(crl: Crl, issuer: X509Certificate, now: Date, what: string): void {
  let ok = false;
  try {
    ok = crl.pss
      ? verify(
          crl.hash,
          crl.tbs,
          { key: issuer.publicKey, padding: cryptoConstants.RSA_PKCS1_PSS_PADDING, saltLength: 48 },
          crl.signature,
        )
      : verify(crl.hash, crl.tbs, issuer.publicKey, crl.signature);
  } catch {
    ok = false;
  }
  if (!ok) throw new VerificationError('COLLATERAL_INVALID', `${what} is not signed by its issuer`);
  if (crl.thisUpdate.getTime() > now.getTime()) {
    throw new VerificationError('COLLATERAL_INVALID', `${what} was issued after the verification time`);
  }
}

export function isRevoked(crl: Crl, cert: X509Certificate): boolean {
  return crl.revoked.has(normalizeSerial(cert.serialNumber));
}
