// The credential the KBS presents to a remote attestation service (`coco_as_grpc`) that authenticates
// writes: a short-lived admin JWT, signed per write with `[attestation_service] admin_private_key`, of
// the form the standalone service's `--admin-public-key` checks (role `admin`, `iat`, `exp`), as
// `kbs-client config --auth-private-key` and `rvps-tool --auth-private-key` sign them.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { describeKeyKind, jwsAlgorithmOf } from '@broker/protocol';
import { SignJWT } from 'jose';

/** Lifetime of each token: it is used at once, for one call. */
export const WRITE_TOKEN_LIFETIME_SECONDS = 300;
const MAX_KEY_PEM_BYTES = 16 * 1024;

/** The JWS algorithm a private key signs with. */
function algorithmOf(key: KeyObject): string {
  const alg = jwsAlgorithmOf(key);
  if (alg !== undefined) return alg;
  throw new RangeError(`an admin key must be Ed25519, EC (P-256, P-384) or RSA, not ${describeKeyKind(key)}`);
}

/**
 * A signer of admin tokens from an unencrypted PEM private key. Throws RangeError when the key cannot be
 * read or cannot sign a JWT the service accepts, so that a wrong key stops the KBS at start.
 */
export function adminTokenSigner(pem: Buffer | string, now: () => number = Date.now): () => Promise<string> {
  if (pem.length > MAX_KEY_PEM_BYTES) {
    throw new RangeError(`the admin key is longer than ${MAX_KEY_PEM_BYTES} bytes`);
  }
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (cause) {
    throw new RangeError('the admin key is not an unencrypted PEM private key', { cause });
  }
  const alg = algorithmOf(key);
  return () => {
    const iat = Math.floor(now() / 1000);
    return new SignJWT({ role: 'admin', iat, exp: iat + WRITE_TOKEN_LIFETIME_SECONDS })
      .setProtectedHeader({ alg, typ: 'JWT' })
      .sign(key);
  };
}
