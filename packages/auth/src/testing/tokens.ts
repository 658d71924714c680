// Test-only token minting with node:crypto, including forms a real signer would never produce.
import { createPublicKey, type KeyObject, sign } from 'node:crypto';

export function b64url(v: unknown): string {
  return Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
}

export function publicJwk(key: KeyObject): Record<string, unknown> {
  const { kty, crv, x, y, n, e } = createPublicKey(key).export({ format: 'jwk' });
  return kty === 'EC' ? { kty, crv, x, y } : kty === 'RSA' ? { kty, n, e } : { kty, crv, x };
}

/** Signs `payload` under `header` with `key`; the hash and encoding follow `header.alg`. */
export function signJwt(
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  key: KeyObject,
): string {
  const input = `${b64url(header)}.${b64url(payload)}`;
  const alg = String(header.alg);
  let sig: Buffer;
  if (alg === 'EdDSA') sig = sign(null, Buffer.from(input), key);
  else if (alg.startsWith('ES')) {
    sig = sign(alg === 'ES384' ? 'sha384' : 'sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
  } else sig = sign(`sha${alg.slice(2)}`, Buffer.from(input), key);
  return `${input}.${sig.toString('base64url')}`;
}
