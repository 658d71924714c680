// A simulated Hopper GPU for tests and the mock TEE: its own device root, an intermediate and an
// attestation certificate whose TcbInfo ends with the device FWID, and GET_MEASUREMENTS reports
// signed like a real GSP's. Its root is not NVIDIA's, so a verifier trusts it only when told to.
import {
  createHash,
  createPrivateKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
  type X509Certificate,
} from 'node:crypto';
import {
  caExtensions,
  der,
  derOctetString,
  derOid,
  derSequence,
  issueCertificate,
  OID_CN,
  OID_ORG,
  toPem,
} from '../x509/build.js';
import { certificateFwid, OID_TCG_DICE_TCB_INFO, parsePemChain } from './chain.js';
import { encodeUnsignedReport, type ReportSpec } from './spdm.js';

const OID_SHA384 = '2.16.840.1.101.3.4.2.2';

export interface TestDeviceOptions {
  readonly driverVersion?: string;
  /** 8 bytes as the GSP sends them (`00 9f 00 96 01 00 00 00` is 96.00.9f.00.01). */
  readonly vbios?: Uint8Array;
  /** Measurement block values (48-byte SHA-384 digests), numbered from 1. */
  readonly measurements?: readonly Uint8Array[];
  readonly notBefore?: Date;
  readonly notAfter?: Date;
}

/** What a simulated device is made of, as kept across restarts (the mock TEE's state folder). */
export interface TestDeviceParts {
  /** Attestation certificate, intermediate, root (PEM). */
  readonly chainPem: string;
  /** The attestation key (PKCS#8 PEM). */
  readonly attestationKeyPem: string;
}

export interface TestDevice {
  readonly rootPem: string;
  /** Attestation certificate, intermediate, root: the order a GPU sends. */
  readonly chainPem: string;
  /** Hex FWID in the attestation certificate and in every report. */
  readonly fwid: string;
  readonly attestationKey: KeyObject;
  /** The chain and key, to restore the same device later with `testDeviceFromParts`. */
  readonly parts: TestDeviceParts;
  /** A signed report (request and response) whose request carries `nonce` (32 bytes). */
  report(nonce: Uint8Array, spec?: Partial<ReportSpec>): Buffer;
  /** `{"device_evidence_list":[…]}` with one Hopper device, as the attestation agent sends it. */
  evidence(nonce: Uint8Array, uuid?: string): { device_evidence_list: Record<string, string>[] };
}

function p384(): { privateKey: KeyObject; publicKey: KeyObject } {
  return generateKeyPairSync('ec', { namedCurve: 'P-384' });
}

/** A DICE TcbInfo with only `fwids [6]`: its value ends with the SHA-384 FWID, as NVIDIA's does. */
function tcbInfo(fwid: Buffer): Buffer {
  return derSequence(der(0xa6, derSequence(derOid(OID_SHA384), derOctetString(fwid))));
}

export function createTestDevice(opts: TestDeviceOptions = {}): TestDevice {
  const notBefore = opts.notBefore ?? new Date('2020-01-01T00:00:00Z');
  const notAfter = opts.notAfter ?? new Date('9999-12-31T23:59:59Z');
  const root = p384();
  const ica = p384();
  const leaf = p384();
  const rootName = [
    { oid: OID_CN, value: 'Simulated Device Identity CA' },
    { oid: OID_ORG, value: 'broker test' },
  ];
  const icaName = [{ oid: OID_CN, value: 'Simulated GH100 Identity' }];
  const fwid = createHash('sha384')
    .update(root.publicKey.export({ type: 'spki', format: 'der' }))
    .digest();
  const rootDer = issueCertificate({
    subject: rootName,
    issuer: rootName,
    subjectKey: root.publicKey,
    issuerKey: root.privateKey,
    notBefore,
    notAfter,
    extensions: caExtensions(),
  });
  const icaDer = issueCertificate({
    subject: icaName,
    issuer: rootName,
    subjectKey: ica.publicKey,
    issuerKey: root.privateKey,
    notBefore,
    notAfter,
    extensions: caExtensions(),
  });
  const leafDer = issueCertificate({
    subject: [{ oid: OID_CN, value: 'Simulated GH100 GSP FMC LF' }],
    issuer: icaName,
    subjectKey: leaf.publicKey,
    issuerKey: ica.privateKey,
    notBefore,
    notAfter,
    extensions: [{ oid: OID_TCG_DICE_TCB_INFO, value: tcbInfo(fwid) }],
  });
  const chainPem = [leafDer, icaDer, rootDer].map(toPem).join('');
  return testDeviceFromParts(
    { chainPem, attestationKeyPem: leaf.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string },
    opts,
  );
}

/**
 * The device whose chain and attestation key are `parts` (see `TestDevice.parts`): its reports are
 * signed by that key and carry the FWID of the chain's attestation certificate.
 */
export function testDeviceFromParts(
  parts: TestDeviceParts,
  opts: Pick<TestDeviceOptions, 'driverVersion' | 'vbios' | 'measurements'> = {},
): TestDevice {
  const chain = parsePemChain(parts.chainPem);
  const root = chain[chain.length - 1];
  if (chain.length < 2 || root === undefined) {
    throw new RangeError('a test device chain has at least an attestation certificate and a root');
  }
  const fwid = Buffer.from(certificateFwid(chain[0]!), 'hex');
  const attestationKey = createPrivateKey(parts.attestationKeyPem);
  const chainPem = chain.map((c: X509Certificate) => toPem(c.raw)).join('');
  const driver = Buffer.from(`${opts.driverVersion ?? '550.90.07'}\0`);
  const vbios = Buffer.from(opts.vbios ?? [0x00, 0x9f, 0x00, 0x96, 0x01, 0x00, 0x00, 0x00]);
  const measurements =
    opts.measurements ?? [1, 2, 3].map((i) => createHash('sha384').update(`simulated block ${i}`).digest());

  const report = (nonce: Uint8Array, spec: Partial<ReportSpec> = {}): Buffer => {
    const unsigned = encodeUnsignedReport({
      nonce,
      blocks: measurements.map((value, i) => ({ index: i + 1, value })),
      opaque: [
        [3, driver],
        [6, vbios],
        [20, fwid],
        [21, Buffer.from('U\0')],
      ],
      ...spec,
    });
    const signature = sign('sha384', unsigned, { key: attestationKey, dsaEncoding: 'ieee-p1363' });
    return Buffer.concat([unsigned, signature]);
  };
  return {
    rootPem: toPem(root.raw),
    chainPem,
    fwid: fwid.toString('hex'),
    attestationKey,
    parts: { chainPem, attestationKeyPem: parts.attestationKeyPem },
    report,
    evidence: (nonce, uuid = 'GPU-00000000-0000-0000-0000-000000000001') => ({
      device_evidence_list: [
        {
          arch: 'HOPPER',
          uuid,
          evidence: report(nonce).toString('hex'),
          certificate: Buffer.from(chainPem).toString('base64'),
        },
      ],
    }),
  };
}
