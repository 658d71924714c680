import type { X509Certificate } from 'node:crypto';

/** SPKI PEM of a certificate's public key (what the admin identity provider's public_key_uri holds). */
export function pemPublicKeyOfCertificate(cert: X509Certificate): string {
  return cert.publicKey.export({ format: 'pem', type: 'spki' }) as string;
}
