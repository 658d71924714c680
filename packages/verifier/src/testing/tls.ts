// A throwaway TLS identity for the mock collateral services: a CA and a server certificate for
// 127.0.0.1 and localhost, which a client trusts by the CA (`ca` option in process, or
// NODE_EXTRA_CA_CERTS for a child process such as the KBS).
import { generateKeyPairSync } from 'node:crypto';
import {
  caExtensions,
  der,
  derOid,
  derSequence,
  issueCertificate,
  type NameAttribute,
  OID_CN,
  toPem,
} from '../x509/build.js';

export interface TestTlsIdentity {
  /** The CA to trust (PEM). */
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
}

const DAY = 86_400_000;

export function createTestTlsIdentity(): TestTlsIdentity {
  const name = (cn: string): NameAttribute[] => [{ oid: OID_CN, value: cn }];
  const ca = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const leaf = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const notBefore = new Date(Date.now() - DAY);
  const notAfter = new Date(Date.now() + 30 * DAY);
  const caDer = issueCertificate({
    subject: name('Broker test collateral service CA'),
    issuer: name('Broker test collateral service CA'),
    subjectKey: ca.publicKey,
    issuerKey: ca.privateKey,
    notBefore,
    notAfter,
    extensions: caExtensions(),
  });
  // subjectAltName: iPAddress 127.0.0.1 and dNSName localhost.
  const san = derSequence(der(0x87, Buffer.from([127, 0, 0, 1])), der(0x82, Buffer.from('localhost')));
  const leafDer = issueCertificate({
    subject: name('localhost'),
    issuer: name('Broker test collateral service CA'),
    subjectKey: leaf.publicKey,
    issuerKey: ca.privateKey,
    notBefore,
    notAfter,
    extensions: [
      { oid: '2.5.29.17', value: san },
      { oid: '2.5.29.37', value: derSequence(derOid('1.3.6.1.5.5.7.3.1')) },
    ],
  });
  return {
    caPem: toPem(caDer),
    certPem: toPem(leafDer),
    keyPem: leaf.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  };
}
