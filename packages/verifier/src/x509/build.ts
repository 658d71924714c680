// A small DER writer and X.509 v3 certificate issuer, for test hardware roots (the mock TEE's ARK,
// ASK and VCEK, and this package's tests). Signing uses Node's crypto: RSASSA-PSS with SHA-384
// (AMD's ARK and ASK) or ECDSA with SHA-384.
import { constants as cryptoConstants, type KeyObject, randomBytes, sign } from 'node:crypto';

export function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

export function der(tag: number, ...contents: Uint8Array[]): Buffer {
  const body = Buffer.concat(contents);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

export const derSequence = (...c: Uint8Array[]) => der(0x30, ...c);
export const derSet = (...c: Uint8Array[]) => der(0x31, ...c);
export const derOctetString = (b: Uint8Array) => der(0x04, b);
export const derNull = () => Buffer.from([0x05, 0x00]);
export const derBoolean = (v: boolean) => Buffer.from([0x01, 0x01, v ? 0xff : 0x00]);
export const derUtf8 = (s: string) => der(0x0c, Buffer.from(s, 'utf8'));
export const derPrintable = (s: string) => der(0x13, Buffer.from(s, 'latin1'));
export const derExplicit = (n: number, ...c: Uint8Array[]) => der(0xa0 | n, ...c);

/** A non-negative INTEGER from a number, bigint or big-endian magnitude. */
export function derInteger(v: number | bigint | Uint8Array): Buffer {
  let mag: Buffer;
  if (typeof v === 'number' || typeof v === 'bigint') {
    let x = BigInt(v);
    if (x < 0n) throw new RangeError('negative INTEGER');
    const bytes: number[] = [];
    do {
      bytes.unshift(Number(x & 0xffn));
      x >>= 8n;
    } while (x > 0n);
    mag = Buffer.from(bytes);
  } else {
    let i = 0;
    while (i < v.length - 1 && v[i] === 0) i++;
    mag = Buffer.from(v.subarray(i));
    if (mag.length === 0) mag = Buffer.from([0]);
  }
  if (mag[0]! & 0x80) mag = Buffer.concat([Buffer.from([0]), mag]);
  return der(0x02, mag);
}

export function derOid(oid: string): Buffer {
  const arcs = oid.split('.').map((a) => Number(a));
  if (arcs.length < 2 || arcs.some((a) => !Number.isSafeInteger(a) || a < 0))
    throw new RangeError(`bad OID ${oid}`);
  const out: number[] = [];
  const push = (v: number) => {
    const groups: number[] = [v & 0x7f];
    for (let x = Math.floor(v / 128); x > 0; x = Math.floor(x / 128)) groups.unshift((x & 0x7f) | 0x80);
    out.push(...groups);
  };
  push(arcs[0]! * 40 + arcs[1]!);
  for (const a of arcs.slice(2)) push(a);
  return der(0x06, Buffer.from(out));
}

export function derBitString(b: Uint8Array): Buffer {
  return der(0x03, Buffer.from([0]), b);
}

/** UTCTime before 2050, GeneralizedTime from then on (RFC 5280 §4.1.2.5). */
export function derTime(d: Date): Buffer {
  const iso = d.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
  return d.getUTCFullYear() < 2050 ? der(0x17, Buffer.from(digits.slice(2))) : der(0x18, Buffer.from(digits));
}

const OID_SHA384 = '2.16.840.1.101.3.4.2.2';
const OID_MGF1 = '1.2.840.113549.1.1.8';
const OID_RSASSA_PSS = '1.2.840.113549.1.1.10';
const OID_ECDSA_SHA384 = '1.2.840.10045.4.3.3';

/** AlgorithmIdentifier of RSASSA-PSS, SHA-384, MGF1-SHA-384, 48-byte salt: what AMD's ARK uses. */
export function rsaPssSha384Algorithm(): Buffer {
  const sha384 = derSequence(derOid(OID_SHA384), derNull());
  return derSequence(
    derOid(OID_RSASSA_PSS),
    derSequence(
      derExplicit(0, sha384),
      derExplicit(1, derSequence(derOid(OID_MGF1), sha384)),
      derExplicit(2, derInteger(48)),
      derExplicit(3, derInteger(1)),
    ),
  );
}

export interface NameAttribute {
  readonly oid: string;
  readonly value: string;
}

export const OID_CN = '2.5.4.3';
export const OID_COUNTRY = '2.5.4.6';
export const OID_LOCALITY = '2.5.4.7';
export const OID_STATE = '2.5.4.8';
export const OID_ORG = '2.5.4.10';
export const OID_ORG_UNIT = '2.5.4.11';

export function derName(attrs: readonly NameAttribute[]): Buffer {
  return derSequence(
    ...attrs.map((a) =>
      derSet(derSequence(derOid(a.oid), a.oid === OID_COUNTRY ? derPrintable(a.value) : derUtf8(a.value))),
    ),
  );
}

export interface ExtensionSpec {
  readonly oid: string;
  readonly critical?: boolean;
  /** The DER value that goes inside extnValue's OCTET STRING. */
  readonly value: Uint8Array;
}

export interface CertificateSpec {
  readonly subject: readonly NameAttribute[];
  readonly issuer: readonly NameAttribute[];
  readonly subjectKey: KeyObject;
  readonly issuerKey: KeyObject;
  readonly notBefore: Date;
  readonly notAfter: Date;
  readonly serial?: Uint8Array;
  readonly extensions?: readonly ExtensionSpec[];
}

/** Issues a DER certificate. RSA issuers sign with RSASSA-PSS/SHA-384, EC issuers with ECDSA/SHA-384. */
export function issueCertificate(spec: CertificateSpec): Buffer {
  const rsa = spec.issuerKey.asymmetricKeyType === 'rsa' || spec.issuerKey.asymmetricKeyType === 'rsa-pss';
  const algorithm = rsa ? rsaPssSha384Algorithm() : derSequence(derOid(OID_ECDSA_SHA384));
  const serial = spec.serial ?? Buffer.concat([Buffer.from([0x01]), randomBytes(15)]);
  const exts = spec.extensions ?? [];
  const tbs = derSequence(
    derExplicit(0, derInteger(2)),
    derInteger(serial),
    algorithm,
    derName(spec.issuer),
    derSequence(derTime(spec.notBefore), derTime(spec.notAfter)),
    derName(spec.subject),
    spec.subjectKey.export({ type: 'spki', format: 'der' }),
    ...(exts.length > 0
      ? [
          derExplicit(
            3,
            derSequence(
              ...exts.map((e) =>
                derSequence(
                  derOid(e.oid),
                  ...(e.critical ? [derBoolean(true)] : []),
                  derOctetString(e.value),
                ),
              ),
            ),
          ),
        ]
      : []),
  );
  const signature = rsa
    ? sign('sha384', tbs, {
        key: spec.issuerKey,
        padding: cryptoConstants.RSA_PKCS1_PSS_PADDING,
        saltLength: 48,
      })
    : sign('sha384', tbs, spec.issuerKey);
  return derSequence(tbs, algorithm, derBitString(signature));
}

/** basicConstraints CA:TRUE and keyUsage keyCertSign + cRLSign, for issuing certificates. */
export function caExtensions(): ExtensionSpec[] {
  return [
    { oid: '2.5.29.19', critical: true, value: derSequence(derBoolean(true)) },
    // keyUsage BIT STRING: keyCertSign (5) and cRLSign (6) → 0b0000_0110, 1 unused bit.
    { oid: '2.5.29.15', critical: true, value: der(0x03, Buffer.from([0x01, 0x06])) },
  ];
}

export function toPem(derBytes: Uint8Array): string {
  const b64 = Buffer.from(derBytes).toString('base64');
  return `-----BEGIN CERTIFICATE-----\n${b64.replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;
}
