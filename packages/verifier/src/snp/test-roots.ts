// Test hardware roots in AMD's shape: an ARK, an ASK and an ASVK (RSASSA-PSS/SHA-384) and
// P-384 VCEKs/VLEKs carrying AMD's TCB and hardware-ID extensions, plus report signing. The mock
// TEE uses these as its hardware root; a verifier trusts them only when they are configured.
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import {
  caExtensions,
  derInteger,
  derOctetString,
  type ExtensionSpec,
  issueCertificate,
  type NameAttribute,
  OID_CN,
  OID_COUNTRY,
  OID_LOCALITY,
  OID_ORG,
  OID_ORG_UNIT,
  OID_STATE,
  toPem,
} from '../x509/build.js';
import {
  OID_BL_SPL,
  OID_FMC_SPL,
  OID_HWID,
  OID_SNP_SPL,
  OID_TEE_SPL,
  OID_UCODE_SPL,
  type VekKind,
} from './certs.js';
import { SNP_REPORT_SIZE, SNP_SIGNED_LENGTH, type TcbVersion } from './report.js';
import { signatureFromP1363 } from './signature.js';

export interface TestCertificate {
  readonly der: Buffer;
  readonly pem: string;
  readonly privateKey: KeyObject;
}

export interface TestAmdRoots {
  readonly product: string;
  readonly ark: TestCertificate;
  readonly ask: TestCertificate;
  readonly asvk: TestCertificate;
  /** ARK, ASK and ASVK as one PEM bundle: what a verifier is configured to trust. */
  readonly bundlePem: string;
}

export interface TestRootOptions {
  /** Product name in the subjects (`ARK-<product>`); default `Test`. */
  readonly product?: string;
  readonly notBefore?: Date;
  readonly notAfter?: Date;
  /** RSA modulus size of the ARK, ASK and ASVK; AMD uses 4096, the default 2048 is quicker. */
  readonly rsaBits?: number;
}

const DAY = 86_400_000;

function amdName(cn: string): NameAttribute[] {
  return [
    { oid: OID_ORG_UNIT, value: 'Engineering' },
    { oid: OID_COUNTRY, value: 'US' },
    { oid: OID_LOCALITY, value: 'Santa Clara' },
    { oid: OID_STATE, value: 'CA' },
    { oid: OID_ORG, value: 'Advanced Micro Devices' },
    { oid: OID_CN, value: cn },
  ];
}

/** A fresh ARK with an ASK and an ASVK signed by it. */
export function createTestAmdRoots(options: TestRootOptions = {}): TestAmdRoots {
  const product = options.product ?? 'Test';
  const notBefore = options.notBefore ?? new Date(Date.now() - DAY);
  const notAfter = options.notAfter ?? new Date(notBefore.getTime() + 25 * 365 * DAY);
  const rsa = () => generateKeyPairSync('rsa', { modulusLength: options.rsaBits ?? 2048 });
  const arkKeys = rsa();
  const arkName = amdName(`ARK-${product}`);
  const arkDer = issueCertificate({
    subject: arkName,
    issuer: arkName,
    subjectKey: arkKeys.publicKey,
    issuerKey: arkKeys.privateKey,
    notBefore,
    notAfter,
    extensions: caExtensions(),
  });
  const intermediate = (cn: string): TestCertificate => {
    const keys = rsa();
    const d = issueCertificate({
      subject: amdName(cn),
      issuer: arkName,
      subjectKey: keys.publicKey,
      issuerKey: arkKeys.privateKey,
      notBefore,
      notAfter,
      extensions: caExtensions(),
    });
    return { der: d, pem: toPem(d), privateKey: keys.privateKey };
  };
  const ark = { der: arkDer, pem: toPem(arkDer), privateKey: arkKeys.privateKey };
  const ask = intermediate(`SEV-${product}`);
  const asvk = intermediate(`SEV-VLEK-${product}`);
  return { product, ark, ask, asvk, bundlePem: ark.pem + ask.pem + asvk.pem };
}

export interface TestVekOptions {
  readonly kind?: VekKind;
  /** The TCB the key is derived for; `fmc` is written only when given (Turin). */
  readonly tcb: TcbVersion;
  /** The chip's ID (VCEK only): 64 bytes, or 8 on Turin. */
  readonly hwid?: Uint8Array;
  /** Newer VCEKs wrap the hardware ID in a DER OCTET STRING; older ones hold the raw bytes. */
  readonly hwidEncoding?: 'raw' | 'octet-string';
  readonly notBefore?: Date;
  readonly notAfter?: Date;
  /** Key pair to certify; a new P-384 pair by default. */
  readonly keyPair?: { readonly publicKey: KeyObject; readonly privateKey: KeyObject };
  /** Replaces the AMD extensions, for tests of broken certificates. */
  readonly extensions?: readonly ExtensionSpec[];
}

/** AMD's VCEK/VLEK extensions for a TCB and hardware ID. */
export function vekExtensions(
  tcb: TcbVersion,
  hwid?: Uint8Array,
  hwidEncoding: 'raw' | 'octet-string' = 'octet-string',
): ExtensionSpec[] {
  const exts: ExtensionSpec[] = [
    { oid: OID_BL_SPL, value: derInteger(tcb.bootloader) },
    { oid: OID_TEE_SPL, value: derInteger(tcb.tee) },
    { oid: OID_SNP_SPL, value: derInteger(tcb.snp) },
    { oid: OID_UCODE_SPL, value: derInteger(tcb.microcode) },
  ];
  if (tcb.fmc !== undefined) exts.push({ oid: OID_FMC_SPL, value: derInteger(tcb.fmc) });
  if (hwid !== undefined) {
    exts.push({ oid: OID_HWID, value: hwidEncoding === 'raw' ? Buffer.from(hwid) : derOctetString(hwid) });
  }
  return exts;
}

/** A VCEK (issued by the ASK) or VLEK (issued by the ASVK). */
export function issueTestVek(roots: TestAmdRoots, options: TestVekOptions): TestCertificate {
  const kind = options.kind ?? 'vcek';
  const issuer = kind === 'vcek' ? roots.ask : roots.asvk;
  const keys = options.keyPair ?? generateKeyPairSync('ec', { namedCurve: 'P-384' });
  const notBefore = options.notBefore ?? new Date(Date.now() - DAY);
  const notAfter = options.notAfter ?? new Date(notBefore.getTime() + 7 * 365 * DAY);
  // The issuer Name repeats the intermediate's subject, as createTestAmdRoots wrote it.
  const issuerName = amdName(kind === 'vcek' ? `SEV-${roots.product}` : `SEV-VLEK-${roots.product}`);
  const d = issueCertificate({
    subject: amdName(kind === 'vcek' ? 'SEV-VCEK' : 'SEV-VLEK'),
    issuer: issuerName,
    subjectKey: keys.publicKey,
    issuerKey: issuer.privateKey,
    notBefore,
    notAfter,
    extensions: options.extensions ?? vekExtensions(options.tcb, options.hwid, options.hwidEncoding),
  });
  return { der: d, pem: toPem(d), privateKey: keys.privateKey };
}

/**
 * Signs a report: ECDSA P-384/SHA-384 over bytes 0..0x2A0, written into the signature field in
 * the firmware's little-endian form. Returns a new buffer.
 */
export function signSnpReport(report: Uint8Array, vekPrivateKey: KeyObject): Buffer {
  if (report.length !== SNP_REPORT_SIZE) throw new RangeError(`SNP report must be ${SNP_REPORT_SIZE} bytes`);
  const out = Buffer.from(report);
  const p1363 = sign('sha384', out.subarray(0, SNP_SIGNED_LENGTH), {
    key: vekPrivateKey,
    dsaEncoding: 'ieee-p1363',
  });
  const { r, s } = signatureFromP1363(p1363);
  out.fill(0, SNP_SIGNED_LENGTH);
  r.copy(out, SNP_SIGNED_LENGTH);
  s.copy(out, SNP_SIGNED_LENGTH + 72);
  return out;
}
