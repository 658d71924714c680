// PEM certificate checks shared by rendering and initdata validation: the certificate a client is told to
// trust must parse, be in date, and name the host the client will connect to.
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { CertificateError } from './errors.js';

/** Certificates in one PEM bundle, at most this many. */
const MAX_CERTS = 16;
export const MAX_PEM_BYTES = 256 * 1024;

const CERT_BLOCK = /-----BEGIN CERTIFICATE-----\r?\n[\s\S]*?-----END CERTIFICATE-----/g;

/** Every certificate of a PEM bundle, in order; refuses text that has none or has garbage blocks. */
export function parseCertificates(pem: string, what: string): X509Certificate[] {
  if (pem.length > MAX_PEM_BYTES)
    throw new CertificateError(`${what}: PEM is larger than ${MAX_PEM_BYTES} bytes`);
  const blocks = pem.match(CERT_BLOCK) ?? [];
  if (blocks.length === 0) throw new CertificateError(`${what}: no PEM CERTIFICATE block found`);
  if (blocks.length > MAX_CERTS) throw new CertificateError(`${what}: more than ${MAX_CERTS} certificates`);
  const rest = pem.replace(CERT_BLOCK, '').trim();
  if (rest.length > 0) throw new CertificateError(`${what}: text outside the CERTIFICATE blocks`);
  return blocks.map((b, i) => {
    try {
      return new X509Certificate(b);
    } catch (e) {
      throw new CertificateError(`${what}: certificate ${i + 1} does not parse: ${(e as Error).message}`, {
        cause: e,
      });
    }
  });
}

/** True when the certificate's subject alternative names cover `host` (DNS name or IP literal). */
export function certificateCoversHost(cert: X509Certificate, host: string): boolean {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (isIP(bare) !== 0) return cert.checkIP(bare) !== undefined;
  // The spec requires the host in the SAN; a CN-only certificate is not accepted by modern clients.
  return cert.checkHost(bare, { subject: 'never' }) !== undefined;
}

/** The subject alternative names, for messages. */
export function subjectAltNames(cert: X509Certificate): string {
  return cert.subjectAltName ?? '(none)';
}

/** Checks the leaf of `pem` is valid at `now` and names `host`; returns the parsed chain. */
export function checkServerCertificate(
  pem: string,
  host: string,
  what: string,
  now = new Date(),
): X509Certificate[] {
  const certs = parseCertificates(pem, what);
  const leaf = certs[0] as X509Certificate;
  const from = new Date(leaf.validFrom);
  const to = new Date(leaf.validTo);
  if (now < from)
    throw new CertificateError(`${what}: certificate is not valid before ${from.toISOString()}`);
  if (now > to) throw new CertificateError(`${what}: certificate expired at ${to.toISOString()}`);
  if (!certificateCoversHost(leaf, host)) {
    throw new CertificateError(
      `${what}: certificate subject alternative names (${subjectAltNames(leaf)}) do not cover ${host}; clients will refuse the connection`,
    );
  }
  return certs;
}

/** A private key PEM (PKCS#8, PKCS#1 or SEC1); refuses anything else. */
export function parsePrivateKey(pem: string, what: string): KeyObject {
  if (pem.length > MAX_PEM_BYTES)
    throw new CertificateError(`${what}: PEM is larger than ${MAX_PEM_BYTES} bytes`);
  if (!/-----BEGIN (RSA |EC )?PRIVATE KEY-----/.test(pem)) {
    throw new CertificateError(`${what}: no PEM PRIVATE KEY block found`);
  }
  try {
    return createPrivateKey(pem);
  } catch (e) {
    throw new CertificateError(`${what}: private key does not parse: ${(e as Error).message}`, { cause: e });
  }
}

/** The leaf certificate's public key must be the private key's. */
export function checkKeyMatchesCertificate(cert: X509Certificate, key: KeyObject, what: string): void {
  if (!cert.checkPrivateKey(key)) {
    throw new CertificateError(`${what}: the private key does not belong to the certificate`);
  }
}
