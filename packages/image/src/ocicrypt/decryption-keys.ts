/**
 * `--decryption-key` values as skopeo spells them: `jwe:PRIVATE.pem`
 * (repeatable), or a bare key file (skopeo detects the kind; only keys
 * usable for `jwe` are read here). All `jwe` keys form one unwrapper that
 * tries each of them.
 */
import { readFile } from 'node:fs/promises';
import { jweUnwrapper, parseJwePrivateKey } from './jwe.js';
import type { KeyUnwrapper } from './unwrap.js';

export class DecryptionKeyArgumentError extends Error {
  override readonly name = 'DecryptionKeyArgumentError';
}

/** The largest key file read (a 16384-bit RSA key in PEM is about 12 KiB). */
const MAX_KEY_FILE_BYTES = 1024 * 1024;

export async function unwrappersFromArguments(values: readonly string[]): Promise<KeyUnwrapper[]> {
  const jweKeys = [];
  for (const value of values) {
    const colon = value.indexOf(':');
    const protocol = colon > 0 ? value.slice(0, colon) : '';
    if (protocol !== '' && protocol !== 'jwe') {
      throw new DecryptionKeyArgumentError(
        `--decryption-key ${JSON.stringify(value)}: protocol ${JSON.stringify(protocol)} is not supported here (use jwe:PRIVATE.pem)`,
      );
    }
    const file = protocol === 'jwe' ? value.slice(colon + 1) : value;
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
    try {
      jweKeys.push(parseJwePrivateKey(bytes, file));
    } catch (e) {
      throw new DecryptionKeyArgumentError(`--decryption-key: ${(e as Error).message}`);
    }
  }
  return jweKeys.length > 0 ? [jweUnwrapper(jweKeys)] : [];
}
