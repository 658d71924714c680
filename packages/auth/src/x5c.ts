// Endorsement of a header JWK by its `x5c` chain (trustee kbs/src/crypto/jwt.rs verify_jwk_endorsement):
// the leaf certificate must hold the JWK's key, and a path from the leaf through the other x5c
// certificates (in any order) must reach one of the trusted certificates.
import { type KeyObject, X509Certificate } from 'node:crypto';
import type { AuthErrorCode } from './errors.js';
import { JwtVerificationError } from './jws.js';

const MAX_CHAIN_CERTS = 10;
const MAX_CERT_B64_LENGTH = 64 * 1024;

export class X5cError extends JwtVerificationError {
  override readonly name: string = 'X5cError';
  static override readonly defaultCode: AuthErrorCode = 'X5C_INVALID';
}

/** Parses PEM text holding one or more certificates. */
export function certificatesFromPem(pem: string, source: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new X5cError(`no certificates found in ${source}`);
  return blocks.map((b, i) => {
    try {
      return new X509Certificate(b);
    } catch (e) {
      throw new X5cError(`certificate #${i + 1} in ${source} is invalid: ${(e as Error).message}`);
    }
  });
}

function decodeX5cEntry(entry: unknown, index: number): X509Certificate {
  if (typeof entry !== 'string' || entry.length > MAX_CERT_B64_LENGTH) {
    throw new X5cError(`x5c[${index}] is not a base64 certificate`);
  }
  // trustee strips newlines, then accepts standard or URL-safe base64.
  const text = entry.replaceAll('\n', '').trim();
  const der = /^[A-Za-z0-9+/]*={0,2}$/.test(text)
    ? Buffer.from(text, 'base64')
    : /^[A-Za-z0-9_-]*$/.test(text)
      ? Buffer.from(text, 'base64url')
      : undefined;
  if (der === undefined || der.length === 0) throw new X5cError(`x5c[${index}] is not base64`);
  try {
    return new X509Certificate(der);
  } catch {
    throw new X5cError(`x5c[${index}] is not an X.509 certificate`);
  }
}

function validAt(c: X509Certificate, now: Date): boolean {
  return c.validFromDate <= now && now <= c.validToDate;
}

function issuedBy(child: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return child.checkIssued(issuer) && child.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

function spki(key: KeyObject): Buffer {
  return key.export({ type: 'spki', format: 'der' });
}

/**
 * Throws X5cError unless `x5c` endorses `jwkKey` under `trusted`. Checks the validity period of every
 * certificate on the path and the CA flag of every issuer.
 */
export function verifyX5cEndorsement(
  jwkKey: KeyObject,
  x5c: unknown,
  trusted: readonly X509Certificate[],
  now: Date = new Date(),
): void {
  if (x5c === undefined) throw new X5cError('No x5c extension inside JWK. Invalid public key.');
  if (!Array.isArray(x5c) || x5c.length === 0)
    throw new X5cError('Empty x5c extension inside JWK. Invalid public key.');
  if (x5c.length > MAX_CHAIN_CERTS) throw new X5cError(`x5c has more than ${MAX_CHAIN_CERTS} certificates`);
  const chain = x5c.map(decodeX5cEntry);
  const leaf = chain[0] as X509Certificate;
  if (!spki(leaf.publicKey).equals(spki(jwkKey))) throw new X5cError('jwk does not match x5c');
  if (!validAt(leaf, now)) throw new X5cError('x5c leaf certificate is not valid at this time');

  const anchors = trusted.filter((t) => validAt(t, now));
  // A pinned leaf is trusted as it is.
  if (anchors.some((t) => t.raw.equals(leaf.raw))) return;

  const reaches = (cert: X509Certificate, pool: readonly X509Certificate[], depth: number): boolean => {
    if (depth > MAX_CHAIN_CERTS) return false;
    for (const a of anchors) if (a.ca && issuedBy(cert, a)) return true;
    for (let i = 0; i < pool.length; i++) {
      const c = pool[i] as X509Certificate;
      if (!c.ca || !validAt(c, now) || !issuedBy(cert, c)) continue;
      if (reaches(c, [...pool.slice(0, i), ...pool.slice(i + 1)], depth + 1)) return true;
    }
    return false;
  };
  if (!reaches(leaf, chain.slice(1), 0)) throw new X5cError('JWK cannot be validated by trust anchor');
}
