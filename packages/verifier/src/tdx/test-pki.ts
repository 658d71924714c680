// Test DCAP hardware in Intel's shape: a test SGX root, a PCK Platform CA, PCK leaves carrying the
// SGX extensions (FMSPC, TCB components, ...), a TCB signing certificate, a quoting enclave whose
// attestation key the PCK vouches for, signed TCB info and QE identity documents, and quotes. The
// mock TEE uses these as its hardware root; verifiers trust the test root only when configured.
import { createHash, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import type { TestCertificate } from '../snp/test-roots.js';
import {
  caExtensions,
  der,
  derBitString,
  derBoolean,
  derExplicit,
  derInteger,
  derName,
  derOctetString,
  derOid,
  derSequence,
  derTime,
  type ExtensionSpec,
  issueCertificate,
  type NameAttribute,
  OID_CN,
  OID_COUNTRY,
  OID_LOCALITY,
  OID_ORG,
  OID_STATE,
  toPem,
} from '../x509/build.js';
import { OID_SGX_EXTENSIONS, PCK_LEAF_CN, PCK_PLATFORM_CA_CN } from './pck.js';
import {
  encodeSignedPart,
  encodeTdReportBody,
  encodeTdxQuote,
  SGX_REPORT_BODY_SIZE,
  type TdReportBodyFields,
} from './quote.js';

const DAY = 86_400_000;

function testName(cn: string): NameAttribute[] {
  return [
    { oid: OID_CN, value: cn },
    { oid: OID_ORG, value: 'Broker Test Hardware' },
    { oid: OID_LOCALITY, value: 'Nowhere' },
    { oid: OID_STATE, value: 'NA' },
    { oid: OID_COUNTRY, value: 'ZZ' },
  ];
}

export interface TestSgxPki {
  /** The test root: what a verifier is configured to trust (`trustedSgxRoots`). */
  readonly root: TestCertificate;
  readonly pckCa: TestCertificate;
  /** Signs the TCB info and QE identity; its PEM is configured as a collateral signer. */
  readonly tcbSigning: TestCertificate;
}

export interface TestPkiOptions {
  readonly notBefore?: Date;
  readonly notAfter?: Date;
}

const p256 = () => generateKeyPairSync('ec', { namedCurve: 'P-256' });

/** A fresh test root with a PCK Platform CA and a TCB signing certificate under it. */
export function createTestSgxPki(options: TestPkiOptions = {}): TestSgxPki {
  const notBefore = options.notBefore ?? new Date(Date.now() - DAY);
  const notAfter = options.notAfter ?? new Date(notBefore.getTime() + 25 * 365 * DAY);
  const rootKeys = p256();
  const rootName = testName('Broker Test SGX Root CA');
  const rootDer = issueCertificate({
    subject: rootName,
    issuer: rootName,
    subjectKey: rootKeys.publicKey,
    issuerKey: rootKeys.privateKey,
    notBefore,
    notAfter,
    extensions: caExtensions(),
  });
  const child = (cn: string, ca: boolean): TestCertificate => {
    const keys = p256();
    const d = issueCertificate({
      subject: testName(cn),
      issuer: rootName,
      subjectKey: keys.publicKey,
      issuerKey: rootKeys.privateKey,
      notBefore,
      notAfter,
      ...(ca ? { extensions: caExtensions() } : {}),
    });
    return { der: d, pem: toPem(d), privateKey: keys.privateKey };
  };
  return {
    root: { der: rootDer, pem: toPem(rootDer), privateKey: rootKeys.privateKey },
    pckCa: child(PCK_PLATFORM_CA_CN, true),
    tcbSigning: child('Broker Test SGX TCB Signing', false),
  };
}

/** What a PCK certificate certifies. */
export interface TestPlatform {
  readonly fmspc: Uint8Array;
  readonly pceId?: Uint8Array;
  /** SGX TCB component SVNs 1..16. */
  readonly tcbComponents: readonly number[];
  readonly pceSvn: number;
  readonly cpuSvn?: Uint8Array;
  readonly ppid?: Uint8Array;
  /** 16 bytes, little-endian GUID as stored. */
  readonly platformInstanceId?: Uint8Array;
  readonly sgxType?: number;
}

/** The SGX extension value (Platform CA form). `mutate` lets tests break entries. */
export function sgxExtensionValue(p: TestPlatform, mutate?: (entries: Buffer[]) => Buffer[]): Buffer {
  const o = (n: string) => derOid(`${OID_SGX_EXTENSIONS}.${n}`);
  const entry = (n: string, v: Uint8Array) => derSequence(o(n), v);
  if (p.tcbComponents.length !== 16) throw new RangeError('a PCK certifies 16 TCB components');
  const tcb = derSequence(
    ...p.tcbComponents.map((svn, i) => entry(`2.${i + 1}`, derInteger(svn))),
    entry('2.17', derInteger(p.pceSvn)),
    entry('2.18', derOctetString(p.cpuSvn ?? Buffer.from(p.tcbComponents))),
  );
  let entries = [
    entry('1', derOctetString(p.ppid ?? Buffer.alloc(16, 0x11))),
    entry('2', tcb),
    entry('3', derOctetString(p.pceId ?? Buffer.alloc(2))),
    entry('4', derOctetString(p.fmspc)),
    entry('5', der(0x0a, Buffer.from([p.sgxType ?? 1]))),
    entry('6', derOctetString(p.platformInstanceId ?? Buffer.alloc(16, 0x22))),
    entry(
      '7',
      derSequence(
        entry('7.1', derBoolean(false)),
        entry('7.2', derBoolean(true)),
        entry('7.3', derBoolean(true)),
      ),
    ),
  ];
  if (mutate !== undefined) entries = mutate(entries);
  return derSequence(...entries);
}

/** A PCK leaf for a platform, issued by the test PCK Platform CA. */
export function issueTestPck(
  pki: TestSgxPki,
  platform: TestPlatform,
  options: {
    readonly notBefore?: Date;
    readonly notAfter?: Date;
    readonly extensions?: readonly ExtensionSpec[];
  } = {},
): TestCertificate {
  const keys = p256();
  const notBefore = options.notBefore ?? new Date(Date.now() - DAY);
  const notAfter = options.notAfter ?? new Date(notBefore.getTime() + 7 * 365 * DAY);
  const d = issueCertificate({
    subject: testName(PCK_LEAF_CN),
    issuer: testName(PCK_PLATFORM_CA_CN),
    subjectKey: keys.publicKey,
    issuerKey: pki.pckCa.privateKey,
    notBefore,
    notAfter,
    extensions: options.extensions ?? [{ oid: OID_SGX_EXTENSIONS, value: sgxExtensionValue(platform) }],
  });
  return { der: d, pem: toPem(d), privateKey: keys.privateKey };
}

/** The quoting enclave's identity as its SGX report shows it. */
export interface TestQeIdentity {
  readonly mrSigner: Uint8Array;
  readonly isvProdId: number;
  readonly isvSvn: number;
  /** 16 bytes; Intel's TD QE: flags 0x15, xfrm 0xe7. */
  readonly attributes?: Uint8Array;
  readonly miscSelect?: Uint8Array;
}

export const TEST_QE_MRSIGNER = createHash('sha256').update('broker test TD QE signer').digest();
export const TEST_QE: TestQeIdentity = { mrSigner: TEST_QE_MRSIGNER, isvProdId: 2, isvSvn: 4 };

/** A quoting enclave: an attestation key, and the QE report and PCK chain that vouch for it. */
export interface TestQuotingEnclave {
  readonly attestationKey: KeyObject;
  /** x‖y of the attestation key. */
  readonly attestationPublic: Buffer;
  readonly qeReport: Buffer;
  readonly qeReportSignature: Buffer;
  readonly qeAuthData: Buffer;
  /** Leaf, PCK CA, root as PEM, NUL-terminated as the QE writes it. */
  readonly pckChainPem: Buffer;
}

/** Builds a QE: the QE report binds SHA-256(attestation key ‖ auth data) and is signed by the PCK. */
export function createTestQuotingEnclave(
  pki: TestSgxPki,
  pck: TestCertificate,
  identity: TestQeIdentity = TEST_QE,
  options: { readonly attestationKey?: KeyObject; readonly qeAuthData?: Uint8Array } = {},
): TestQuotingEnclave {
  const attestationKey = options.attestationKey ?? p256().privateKey;
  const jwk = attestationKey.export({ format: 'jwk' });
  const attestationPublic = Buffer.concat([
    Buffer.from(jwk.x ?? '', 'base64url'),
    Buffer.from(jwk.y ?? '', 'base64url'),
  ]);
  const qeAuthData = Buffer.from(options.qeAuthData ?? Buffer.from([...Array(32).keys()]));
  const report = Buffer.alloc(SGX_REPORT_BODY_SIZE);
  report.set(identity.miscSelect ?? Buffer.alloc(4), 16);
  report.set(identity.attributes ?? Buffer.from('1500000000000000e700000000000000', 'hex'), 48);
  report.set(createHash('sha256').update('broker test TD QE').digest(), 64);
  report.set(identity.mrSigner, 128);
  report.writeUInt16LE(identity.isvProdId, 256);
  report.writeUInt16LE(identity.isvSvn, 258);
  report.set(createHash('sha256').update(attestationPublic).update(qeAuthData).digest(), 320);
  const qeReportSignature = sign('sha256', report, { key: pck.privateKey, dsaEncoding: 'ieee-p1363' });
  return {
    attestationKey,
    attestationPublic,
    qeReport: report,
    qeReportSignature,
    qeAuthData,
    pckChainPem: Buffer.concat([Buffer.from(pck.pem + pki.pckCa.pem + pki.root.pem), Buffer.from([0])]),
  };
}

/** Signs a v4 (or v5) quote over a TD report body. */
export function signTestQuote(
  qe: TestQuotingEnclave,
  body: TdReportBodyFields,
  options: { readonly version?: 4 | 5; readonly bodyKind?: 'tdx10' | 'tdx15' } = {},
): Buffer {
  const kind = options.bodyKind ?? 'tdx10';
  const signed = encodeSignedPart({
    version: options.version ?? 4,
    bodyKind: kind,
    body: encodeTdReportBody(body, kind),
  });
  const signature = sign('sha256', signed, { key: qe.attestationKey, dsaEncoding: 'ieee-p1363' });
  return encodeTdxQuote(signed, {
    signature,
    attestationKey: qe.attestationPublic,
    qeReport: qe.qeReport,
    qeReportSignature: qe.qeReportSignature,
    qeAuthData: qe.qeAuthData,
    pckChainPem: qe.pckChainPem,
  });
}

/**
 * A signed collateral document `{"<key>":<object>,"signature":hex}`: ECDSA P-256 r‖s over the
 * exact JSON text of the object.
 */
export function signCollateral(key: 'tcbInfo' | 'enclaveIdentity', body: unknown, signer: KeyObject): string {
  const text = JSON.stringify(body);
  const sig = sign('sha256', Buffer.from(text), { key: signer, dsaEncoding: 'ieee-p1363' });
  return `{"${key}":${text},"signature":"${sig.toString('hex')}"}`;
}

const hexUpper = (b: Uint8Array) => Buffer.from(b).toString('hex').toUpperCase();
const iso = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

export interface TestCollateralOptions {
  readonly issueDate?: Date;
  readonly nextUpdate?: Date;
  /** TDX module MRSIGNER_SEAM the TCB info expects (zero: Intel's module). */
  readonly mrSignerSeam?: Uint8Array;
  readonly tcbLevels?: readonly unknown[];
  readonly qeTcbLevels?: readonly unknown[];
}

const comps = (svns: readonly number[]) => svns.map((svn) => ({ svn }));

/**
 * TCB info for `platform` whose first level is exactly its TCB (UpToDate) with a TDX TEE_TCB_SVN
 * of `teeTcbSvn`, followed by an all-zero OutOfDate level.
 */
export function testTcbInfo(
  platform: TestPlatform,
  teeTcbSvn: readonly number[],
  options: TestCollateralOptions = {},
): unknown {
  const issue = options.issueDate ?? new Date(Date.now() - DAY);
  const next = options.nextUpdate ?? new Date(issue.getTime() + 30 * DAY);
  return {
    id: 'TDX',
    version: 3,
    issueDate: iso(issue),
    nextUpdate: iso(next),
    fmspc: hexUpper(platform.fmspc),
    pceId: hexUpper(platform.pceId ?? Buffer.alloc(2)),
    tcbType: 0,
    tcbEvaluationDataNumber: 17,
    tdxModule: {
      mrsigner: hexUpper(options.mrSignerSeam ?? Buffer.alloc(48)),
      attributes: '0000000000000000',
      attributesMask: 'FFFFFFFFFFFFFFFF',
    },
    tdxModuleIdentities: [
      {
        id: 'TDX_01',
        mrsigner: hexUpper(options.mrSignerSeam ?? Buffer.alloc(48)),
        attributes: '0000000000000000',
        attributesMask: 'FFFFFFFFFFFFFFFF',
        tcbLevels: [
          { tcb: { isvsvn: 4 }, tcbDate: '2024-03-13T00:00:00Z', tcbStatus: 'UpToDate' },
          { tcb: { isvsvn: 2 }, tcbDate: '2023-08-09T00:00:00Z', tcbStatus: 'OutOfDate' },
        ],
      },
    ],
    tcbLevels: options.tcbLevels ?? [
      {
        tcb: {
          sgxtcbcomponents: comps(platform.tcbComponents),
          pcesvn: platform.pceSvn,
          tdxtcbcomponents: comps(teeTcbSvn),
        },
        tcbDate: '2024-03-13T00:00:00Z',
        tcbStatus: 'UpToDate',
      },
      {
        tcb: {
          sgxtcbcomponents: comps(Array(16).fill(0)),
          pcesvn: 0,
          tdxtcbcomponents: comps(Array(16).fill(0)),
        },
        tcbDate: '2018-01-04T00:00:00Z',
        tcbStatus: 'OutOfDate',
        advisoryIDs: ['INTEL-SA-00000'],
      },
    ],
  };
}

/** A TD QE identity matching `identity`, UpToDate from its ISVSVN on. */
export function testQeIdentity(
  identity: TestQeIdentity = TEST_QE,
  options: TestCollateralOptions = {},
): unknown {
  const issue = options.issueDate ?? new Date(Date.now() - DAY);
  const next = options.nextUpdate ?? new Date(issue.getTime() + 30 * DAY);
  return {
    id: 'TD_QE',
    version: 2,
    issueDate: iso(issue),
    nextUpdate: iso(next),
    tcbEvaluationDataNumber: 17,
    miscselect: '00000000',
    miscselectMask: 'FFFFFFFF',
    attributes: '11000000000000000000000000000000',
    attributesMask: 'FBFFFFFFFFFFFFFF0000000000000000',
    mrsigner: hexUpper(identity.mrSigner),
    isvprodid: identity.isvProdId,
    tcbLevels: options.qeTcbLevels ?? [
      { tcb: { isvsvn: identity.isvSvn }, tcbDate: '2024-03-13T00:00:00Z', tcbStatus: 'UpToDate' },
      {
        tcb: { isvsvn: 0 },
        tcbDate: '2018-01-04T00:00:00Z',
        tcbStatus: 'OutOfDate',
        advisoryIDs: ['INTEL-SA-00001'],
      },
    ],
  };
}

export interface TestCrlOptions {
  readonly thisUpdate?: Date;
  readonly nextUpdate?: Date;
  readonly crlNumber?: number;
}

/**
 * A CRL by `issuer` (subject CN `issuerCn`, as createTestSgxPki names it) revoking `serials`
 * (hex), ECDSA with SHA-256 as Intel signs them. DER.
 */
export function signTestCrl(
  issuerCn: string,
  issuerKey: KeyObject,
  serials: readonly string[],
  options: TestCrlOptions = {},
): Buffer {
  const thisUpdate = options.thisUpdate ?? new Date(Date.now() - DAY);
  const nextUpdate = options.nextUpdate ?? new Date(thisUpdate.getTime() + 30 * DAY);
  const alg = derSequence(derOid('1.2.840.10045.4.3.2'));
  const entries = serials.map((s) =>
    derSequence(derInteger(Buffer.from(s.length % 2 ? `0${s}` : s, 'hex')), derTime(thisUpdate)),
  );
  const tbs = derSequence(
    derInteger(1),
    alg,
    derName(testName(issuerCn)),
    derTime(thisUpdate),
    derTime(nextUpdate),
    ...(entries.length > 0 ? [derSequence(...entries)] : []),
    derExplicit(
      0,
      derSequence(derSequence(derOid('2.5.29.20'), derOctetString(derInteger(options.crlNumber ?? 1)))),
    ),
  );
  const sig = sign('sha256', tbs, issuerKey);
  return derSequence(tbs, alg, derBitString(sig));
}
