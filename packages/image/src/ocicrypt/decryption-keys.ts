/**
 * `--decryption-key` values as skopeo spells them: `jwe:PRIVATE.pem`
 * (repeatable), `pgp:SECRET.gpg` and `pkcs7:PRIVATE.pem` (our spellings;
 * skopeo takes the bare file), or a bare key file (skopeo detects the kind:
 * a PEM, DER or JWK key is for `jwe`, and an RSA one for `pkcs7` too, as
 * ocicrypt shares its private keys between the two; an OpenPGP secret key
 * is for `pgp`; a certificate, which skopeo needs to pick the `pkcs7`
 * recipient, is accepted and not needed: every key is tried), and
 * `provider:attestation-agent[:…]` (the CoCo key provider: each layer's KEK
 * is read by its `kbs:///` kid with `readKbsResource`). All keys of one
 * protocol form one unwrapper that tries each of them.
 */

import type { KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { PrivateKey } from 'openpgp';
import { ImageError, type ImageErrorCode } from '../errors.js';
import { jweUnwrapper, parseJwePrivateKey } from './jwe.js';
import { ATTESTATION_AGENT_PROTOCOL, attestationAgentUnwrapper } from './keyprovider-packet.js';
import { pgpUnwrapper, readPgpPrivateKeys } from './pgp.js';
import { pkcs7Unwrapper } from './pkcs7.js';
import type { KeyUnwrapper } from './unwrap.js';

export class DecryptionKeyArgumentError extends ImageError {
  override readonly code: ImageErrorCode = 'DECRYPTION_KEY_ARGUMENT_INVALID';
  override readonly name: string = 'DecryptionKeyArgumentError';
}

/** The largest key file read (a 16384-bit RSA key in PEM is about 12 KiB). */
const MAX_KEY_FILE_BYTES = 1024 * 1024;

export async function unwrappersFromArguments(
  values: readonly string[],
  readKbsResource?: (uri: string) => Promise<Uint8Array>,
): Promise<KeyUnwrapper[]> {
  const jweKeys: KeyObject[] = [];
  const pgpKeys: PrivateKey[] = [];
  const pkcs7Keys: KeyObject[] = [];
  const unwrappers: KeyUnwrapper[] = [];
  for (const value of values) {
    const colon = value.indexOf(':');
    const protocol = colon > 0 ? value.slice(0, colon) : '';
    if (protocol === 'provider') {
      const name = value.slice(colon + 1).split(':')[0];
      if (name !== 'attestation-agent') {
        throw new DecryptionKeyArgumentError(
          `--decryption-key ${JSON.stringify(value)}: unknown key provider ${JSON.stringify(name)} (only attestation-agent)`,
        );
      }
      if (readKbsResource === undefined) {
        throw new DecryptionKeyArgumentError(`--decryption-key ${value}: needs a KBS to read the KEKs from`);
      }
      if (!unwrappers.some((u) => u.protocol === ATTESTATION_AGENT_PROTOCOL)) {
        unwrappers.push(attestationAgentUnwrapper(readKbsResource));
      }
      continue;
    }
    if (protocol !== '' && protocol !== 'jwe' && protocol !== 'pgp' && protocol !== 'pkcs7') {
      throw new DecryptionKeyArgumentError(
        `--decryption-key ${JSON.stringify(value)}: protocol ${JSON.stringify(protocol)} is not supported here (use jwe:PRIVATE.pem, pgp:SECRET.gpg, pkcs7:PRIVATE.pem or provider:attestation-agent)`,
      );
    }
    const file = protocol === '' ? value : value.slice(colon + 1);
    if (file === '')
      throw new DecryptionKeyArgumentError(`--decryption-key ${JSON.stringify(value)}: no key file`);
    let bytes: Buffer;
    try {
      bytes = await readFile(file);
    } catch (e) {
      throw new DecryptionKeyArgumentError(`--decryption-key: cannot read ${file}: ${(e as Error).message}`);
    }
    if (bytes.byteLength > MAX_KEY_FILE_BYTES) {
      throw new DecryptionKeyArgumentError(
        `--decryption-key: ${file} is larger than ${MAX_KEY_FILE_BYTES} bytes`,
      );
    }
    if (protocol === 'pgp') {
      try {
        pgpKeys.push(...(await readPgpPrivateKeys(bytes, file)));
      } catch (e) {
        throw new DecryptionKeyArgumentError(`--decryption-key: ${(e as Error).message}`);
      }
      continue;
    }
    if (protocol === '' && bytes.toString('latin1').includes('-----BEGIN CERTIFICATE')) continue;
    try {
      const key = parseJwePrivateKey(bytes, file);
      if (protocol === 'pkcs7' && key.asymmetricKeyType !== 'rsa') {
        throw new ImageError(`${file}: a ${key.asymmetricKeyType} key cannot open pkcs7 (RSA only)`, {
          code: 'KEY_UNUSABLE',
        });
      }
      if (protocol !== 'pkcs7') jweKeys.push(key);
      if (key.asymmetricKeyType === 'rsa') pkcs7Keys.push(key);
    } catch (e) {
      // A bare file may be an OpenPGP secret key, as skopeo detects.
      if (protocol === '' && isOpenPgpKey(bytes)) {
        try {
          pgpKeys.push(...(await readPgpPrivateKeys(bytes, file)));
          continue;
        } catch (pgpError) {
          throw new DecryptionKeyArgumentError(`--decryption-key: ${(pgpError as Error).message}`);
        }
      }
      throw new DecryptionKeyArgumentError(`--decryption-key: ${(e as Error).message}`);
    }
  }
  return [
    ...(jweKeys.length > 0 ? [jweUnwrapper(jweKeys)] : []),
    ...(pgpKeys.length > 0 ? [pgpUnwrapper(pgpKeys)] : []),
    ...(pkcs7Keys.length > 0 ? [pkcs7Unwrapper(pkcs7Keys)] : []),
    ...unwrappers,
  ];
}

/** An armored OpenPGP block, or a binary secret-key packet first (tag 5, old or new packet format). */
function isOpenPgpKey(bytes: Uint8Array): boolean {
  if (Buffer.from(bytes.subarray(0, 64)).toString('latin1').includes('-----BEGIN PGP')) return true;
  const first = bytes[0] ?? 0;
  return first === 0xc5 || (first & 0xfc) === 0x94;
}
