// A simulated Hopper GPU for tests and the mock TEE: its own device root, an intermediate and an
// attestation certificate whose TcbInfo ends with the device FWID, and GET_MEASUREMENTS reports
// signed like a real GSP's. Its root is not NVIDIA's, so a verifier trusts it only when told to.
import { createHash, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
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
import { OID_TCG_DICE_TCB_INFO } from './chain.js';
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

export interface TestDevice {
  readonly rootPem: string;
  /** Attestation certificate, intermediate, root: the order a GPU sends. */
  readonly chainPem: string;
  /** Hex FWID in the attestation certificate and in every report. */
  readonly fwid: string;
  readonly attestationKey: KeyObject;
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
    const signature = sign('sha384', unsigned, { key: leaf.privateKey, dsaEncoding: 'ieee-p1363' });
    return Buffer.concat([unsigned, signature]);
  };
  return {
    rootPem: toPem(rootDer),
    chainPem,
    fwid: fwid.toString('hex'),
    attestationKey: leaf.privateKey,
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
