/**
 * ocicrypt's `jwe` key protocol: each wrapped key is a JWE in JSON
 * serialization (flattened for one recipient, general for several) whose
 * plaintext is the layer's private options. ocicrypt wraps with `RSA-OAEP`
 * (SHA-1) for RSA keys and `ECDH-ES+A256KW` for EC keys, content `A256GCM`;
 * Go also honours `RSA-OAEP-256` and `ECDH-ES+A128KW`/`A192KW`. The JOSE
 * work is `jose`'s; only those algorithms are allowed.
 */

import { createPrivateKey, type KeyObject } from 'node:crypto';
import { flattenedDecrypt, generalDecrypt } from 'jose';
import { ImageError } from '../errors.js';
import type { KeyUnwrapper } from './unwrap.js';

const KEY_ALGORITHMS = ['RSA-OAEP', 'RSA-OAEP-256', 'ECDH-ES+A128KW', 'ECDH-ES+A192KW', 'ECDH-ES+A256KW'];
const CONTENT_ALGORITHMS = ['A128GCM', 'A192GCM', 'A256GCM'];

/**
 * A private key as skopeo's `--decryption-key jwe:FILE` reads it: PEM
 * (PKCS#8, PKCS#1, SEC1), DER, or a JWK. Password-protected keys are refused.
 */
export function parseJwePrivateKey(bytes: Uint8Array, name = 'key'): KeyObject {
  const text = Buffer.from(bytes).toString('utf8');
  const attempts: (() => KeyObject)[] = text.includes('-----BEGIN')
    ? [() => createPrivateKey({ key: text, format: 'pem' })]
    : text.trimStart().startsWith('{')
      ? [() => createPrivateKey({ key: JSON.parse(text) as import('node:crypto').JsonWebKey, format: 'jwk' })]
      : (['pkcs8', 'pkcs1', 'sec1'] as const).map(
          (type) => () => createPrivateKey({ key: Buffer.from(bytes), format: 'der', type }),
        );
  let last: unknown;
  for (const attempt of attempts) {
    try {
      const key = attempt();
      if (key.asymmetricKeyType !== 'rsa' && key.asymmetricKeyType !== 'ec') {
        throw new ImageError(`a ${key.asymmetricKeyType} key cannot unwrap ocicrypt's JWE (RSA or EC only)`, {
          code: 'KEY_UNUSABLE',
        });
      }
      return key;
    } catch (e) {
      last = e;
    }
  }
  throw new ImageError(`${name}: not a usable RSA or EC private key: ${(last as Error).message}`, {
    code: 'KEY_UNUSABLE',
  });
}

/** Unwraps `jwe` keys with any of `keys`. */
export function jweUnwrapper(keys: readonly KeyObject[]): KeyUnwrapper {
  return {
    protocol: 'jwe',
    async unwrap(blob) {
      let jwe: unknown;
      try {
        jwe = JSON.parse(Buffer.from(blob).toString('utf8'));
      } catch (e) {
        throw new ImageError(`the JWE is not JSON: ${(e as Error).message}`, { code: 'KEY_PACKET_INVALID' });
      }
      if (typeof jwe !== 'object' || jwe === null || Array.isArray(jwe))
        throw new ImageError('the JWE is not a JSON object', { code: 'KEY_PACKET_INVALID' });
      const options = {
        keyManagementAlgorithms: KEY_ALGORITHMS,
        contentEncryptionAlgorithms: CONTENT_ALGORITHMS,
      };
      const reasons: string[] = [];
      for (const key of keys) {
        try {
          const result =
            'recipients' in jwe
              ? await generalDecrypt(jwe as Parameters<typeof generalDecrypt>[0], key, options)
              : await flattenedDecrypt(jwe as Parameters<typeof flattenedDecrypt>[0], key, options);
          return result.plaintext;
        } catch (e) {
          reasons.push((e as Error).message);
        }
      }
      return { failed: reasons.length > 0 ? reasons.join('; ') : 'no jwe private key given' };
    },
  };
}
