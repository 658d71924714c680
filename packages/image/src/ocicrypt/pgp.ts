/**
 * ocicrypt's `pgp` key protocol: the wrapped key is one OpenPGP message
 * encrypted to every recipient (public-key encrypted session key packets,
 * then integrity-protected data holding a literal data packet whose content
 * is the layer's private options), as Go's x/crypto/openpgp `Encrypt`
 * writes it for skopeo's `--encryption-key pgp:NAME`. The OpenPGP work is
 * `openpgp`'s: we only choose the keys and refuse what ocicrypt never
 * writes (unauthenticated encryption, compression that expands past the
 * options' size limit).
 */

import type * as openpgp from 'openpgp';
import { ImageError } from '../errors.js';
import { type OpenpgpModule, openpgpModule } from '../openpgp-module.js';
import type { KeyWrapper } from './encrypt.js';
import { MAX_OPTIONS_BYTES } from './options.js';
import type { KeyUnwrapper } from './unwrap.js';

export const PGP_PROTOCOL = 'pgp';

function pgpConfig(pgp: OpenpgpModule): openpgp.Config {
  // No unauthenticated (SED) messages, which is openpgp's default too; compressed content is capped.
  return {
    ...pgp.config,
    allowUnauthenticatedMessages: false,
    maxDecompressedMessageSize: MAX_OPTIONS_BYTES,
  };
}

function isArmored(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.subarray(0, 64)).toString('latin1').includes('-----BEGIN PGP');
}

/** Public keys of a keyring as `gpg --export` writes it (binary or armored); secret keys give their public part. */
export async function readPgpPublicKeys(bytes: Uint8Array, name = 'keyring'): Promise<openpgp.PublicKey[]> {
  const pgp = await openpgpModule();
  let keys: openpgp.Key[];
  try {
    keys = isArmored(bytes)
      ? await pgp.readKeys({ armoredKeys: Buffer.from(bytes).toString('utf8') })
      : await pgp.readKeys({ binaryKeys: bytes });
  } catch (e) {
    throw new ImageError(`${name}: not an OpenPGP keyring: ${(e as Error).message}`, {
      code: 'KEY_UNUSABLE',
    });
  }
  if (keys.length === 0) throw new ImageError(`${name}: no OpenPGP key in it`, { code: 'KEY_UNUSABLE' });
  return keys.map((k) => (k.isPrivate() ? k.toPublic() : (k as openpgp.PublicKey)));
}

/**
 * Secret keys as `gpg --export-secret-keys` writes them. Passphrase-protected ones are opened with
 * `passphrase` when it is given, else refused.
 */
export async function readPgpPrivateKeys(
  bytes: Uint8Array,
  name = 'key',
  passphrase?: string,
): Promise<openpgp.PrivateKey[]> {
  const pgp = await openpgpModule();
  let keys: openpgp.PrivateKey[];
  try {
    keys = isArmored(bytes)
      ? await pgp.readPrivateKeys({ armoredKeys: Buffer.from(bytes).toString('utf8') })
      : await pgp.readPrivateKeys({ binaryKeys: bytes });
  } catch (e) {
    throw new ImageError(`${name}: not an OpenPGP secret key: ${(e as Error).message}`, {
      code: 'KEY_UNUSABLE',
    });
  }
  if (keys.length === 0)
    throw new ImageError(`${name}: no OpenPGP secret key in it`, { code: 'KEY_UNUSABLE' });
  const opened: openpgp.PrivateKey[] = [];
  for (const key of keys) {
    const id = key.getKeyID().toHex().toUpperCase();
    if (key.isDecrypted()) opened.push(key);
    else if (passphrase === undefined)
      throw new ImageError(
        `${name}: the OpenPGP secret key ${id} is passphrase-protected (no passphrase given)`,
        { code: 'KEY_UNUSABLE' },
      );
    else {
      try {
        opened.push(await pgp.decryptKey({ privateKey: key, passphrase }));
      } catch (e) {
        throw new ImageError(`${name}: the OpenPGP secret key ${id} does not open: ${(e as Error).message}`, {
          code: 'KEY_UNUSABLE',
        });
      }
    }
  }
  return opened;
}

/** Wraps the private options in one OpenPGP message to all `keys` (each needs a valid encryption key). */
export function pgpWrapper(keys: readonly openpgp.PublicKey[]): KeyWrapper {
  return {
    protocol: PGP_PROTOCOL,
    async wrap(privateOptions) {
      const pgp = await openpgpModule();
      const message = await pgp.createMessage({ binary: privateOptions, format: 'binary' });
      return pgp.encrypt({ message, encryptionKeys: [...keys], format: 'binary' });
    },
  };
}

/** Unwraps `pgp` keys with any of `keys`. */
export function pgpUnwrapper(keys: readonly openpgp.PrivateKey[]): KeyUnwrapper {
  return {
    protocol: PGP_PROTOCOL,
    async unwrap(blob) {
      const pgp = await openpgpModule();
      const config = pgpConfig(pgp);
      let message: openpgp.Message<Uint8Array>;
      try {
        message = await pgp.readMessage({ binaryMessage: blob, config });
      } catch (e) {
        throw new ImageError(`the pgp packet is not an OpenPGP message: ${(e as Error).message}`, {
          code: 'KEY_PACKET_INVALID',
        });
      }
      try {
        const { data } = await pgp.decrypt({
          message,
          decryptionKeys: [...keys],
          format: 'binary',
          config,
        });
        return data;
      } catch (e) {
        return { failed: (e as Error).message };
      }
    },
  };
}
