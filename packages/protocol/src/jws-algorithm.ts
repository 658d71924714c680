// The JWS algorithm an admin or write-credential private key signs with. Kept to the algorithms the
// KBS's and the services' JWT verifiers accept (EdDSA, ES256, ES384, RS256), so that a token minted
// with a key the verifier cannot check is refused where the key is read, not at the far end.
import type { KeyObject } from 'node:crypto';

export type AdminJwsAlgorithm = 'EdDSA' | 'ES256' | 'ES384' | 'RS256';

/** The algorithm `key` signs with, or undefined for a key type or curve no verifier here accepts. */
export function jwsAlgorithmOf(key: KeyObject): AdminJwsAlgorithm | undefined {
  switch (key.asymmetricKeyType) {
    case 'ed25519':
      return 'EdDSA';
    case 'rsa':
      return 'RS256';
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      if (curve === 'prime256v1') return 'ES256';
      if (curve === 'secp384r1') return 'ES384';
      return undefined;
    }
    default:
      return undefined;
  }
}

/** What `jwsAlgorithmOf` refused, in words: `an EC key on secp521r1`, `a dsa key`. */
export function describeKeyKind(key: KeyObject): string {
  if (key.asymmetricKeyType === 'ec')
    return `an EC key on ${key.asymmetricKeyDetails?.namedCurve ?? 'an unnamed curve'}`;
  return `a ${key.asymmetricKeyType ?? 'unknown'} key`;
}
