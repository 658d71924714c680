/**
 * The TEE key pair: its public half goes to the KBS inside the attested
 * runtime data, and the KBS encrypts resources to it. Algorithms and PEM
 * forms follow guest-components' `TeeKeyPair`: EC P-256 (default) or P-521
 * for ECDH-ES+A256KW, RSA-2048 for RSA-OAEP-256; PEM out is PKCS#8 for EC and
 * PKCS#1 for RSA (the form the attestation agent returns as `tee_keypair`).
 */
import type { KeyObject } from 'node:crypto';
import {
  generateTeeKeyPair,
  JweNotSupported,
  type TeePubKey,
  teePrivateKeyFromPem,
  teePubKeyFromPrivateKey,
} from '@broker/protocol';
import { InvalidTeeKey } from './errors.js';

/** `tee_key_algorithm` values of aa.toml (upstream `TeeKeyAlgorithm`). */
export type TeeKeyAlgorithm = 'ECDH-ES+A256KW-P256' | 'ECDH-ES+A256KW-P521' | 'RSA-OAEP-256';

export const TEE_KEY_ALGORITHMS: readonly TeeKeyAlgorithm[] = Object.freeze([
  'ECDH-ES+A256KW-P256',
  'ECDH-ES+A256KW-P521',
  'RSA-OAEP-256',
] as const);

export const DEFAULT_TEE_KEY_ALGORITHM: TeeKeyAlgorithm = 'ECDH-ES+A256KW-P256';

const MIN_RSA_BITS = 2048;
/** Enough for an 8192-bit RSA PEM; keeps a hostile file from being parsed at any size. */
export const MAX_TEE_KEY_PEM_LENGTH = 16 * 1024;

export function parseTeeKeyAlgorithm(s: string): TeeKeyAlgorithm {
  if ((TEE_KEY_ALGORITHMS as readonly string[]).includes(s)) return s as TeeKeyAlgorithm;
  throw new InvalidTeeKey(
    `unknown TEE key algorithm ${JSON.stringify(s)}; expected one of ${TEE_KEY_ALGORITHMS.join(', ')}`,
  );
}

export class TeeKeyPair {
  readonly privateKey: KeyObject;
  /** The `tee-pubkey` JWK sent to the KBS. */
  readonly publicJwk: TeePubKey;

  private constructor(privateKey: KeyObject, publicJwk: TeePubKey) {
    this.privateKey = privateKey;
    this.publicJwk = publicJwk;
  }

  static generate(algorithm: TeeKeyAlgorithm = DEFAULT_TEE_KEY_ALGORITHM): TeeKeyPair {
    if (!(TEE_KEY_ALGORITHMS as readonly string[]).includes(algorithm)) {
      throw new InvalidTeeKey(`unknown TEE key algorithm ${JSON.stringify(algorithm)}`);
    }
    const { privateKey, publicJwk } = generateTeeKeyPair(algorithm);
    return new TeeKeyPair(privateKey, publicJwk);
  }

  /**
   * An unencrypted PEM private key: RSA of at least 2048 bits (upstream reads
   * PKCS#1; PKCS#8 works too) or EC on P-256/P-521 (PKCS#8).
   */
  static fromPem(pem: string): TeeKeyPair {
    if (pem.length > MAX_TEE_KEY_PEM_LENGTH) {
      throw new InvalidTeeKey(`TEE key PEM longer than ${MAX_TEE_KEY_PEM_LENGTH} characters`);
    }
    let key: KeyObject;
    try {
      key = teePrivateKeyFromPem(pem);
    } catch (cause) {
      if (cause instanceof JweNotSupported) throw new InvalidTeeKey(cause.message, { cause });
      throw new InvalidTeeKey('private key is not RSA (PKCS#1) nor EC P256/P521 (PKCS#8)', { cause });
    }
    if (key.asymmetricKeyType === 'rsa') {
      const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
      if (bits < MIN_RSA_BITS)
        throw new InvalidTeeKey(`RSA TEE key must have at least ${MIN_RSA_BITS} bits, has ${bits}`);
    }
    let publicJwk: TeePubKey;
    try {
      publicJwk = teePubKeyFromPrivateKey(key);
    } catch (cause) {
      throw new InvalidTeeKey(`unusable TEE key: ${cause instanceof Error ? cause.message : String(cause)}`, {
        cause,
      });
    }
    return new TeeKeyPair(key, publicJwk);
  }

  /** PKCS#8 PEM for EC keys, PKCS#1 PEM for RSA keys, as guest-components writes them. */
  toPem(): string {
    const type = this.privateKey.asymmetricKeyType === 'rsa' ? 'pkcs1' : 'pkcs8';
    return this.privateKey.export({ format: 'pem', type }).toString();
  }
}
