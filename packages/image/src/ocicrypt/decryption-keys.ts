/**
 * `--decryption-key` values as skopeo spells them: `jwe:PRIVATE.pem`
 * (repeatable), or a bare key file (skopeo detects the kind; only keys
 * usable for `jwe` are read here), and `provider:attestation-agent[:…]`
 * (the CoCo key provider: each layer's KEK is read by its `kbs:///` kid
 * with `readKbsResource`). All `jwe` keys form one unwrapper that tries
 * each of them.
 */
import { readFile } from 'node:fs/promises';
import { jweUnwrapper, parseJwePrivateKey } from './jwe.js';
import { ATTESTATION_AGENT_PROTOCOL, attestationAgentUnwrapper } from './keyprovider-packet.js';
import type { KeyUnwrapper } from './unwrap.js';

export class DecryptionKeyArgumentError extends Error {
  override readonly name = 'DecryptionKeyArgumentError';
}

/** The largest key file read (a 16384-bit RSA key in PEM is about 12 KiB). */
const MAX_KEY_FILE_BYTES = 1024 * 1024;

export async function unwrappersFromArguments(
  values: readonly string[],
  readKbsResource?: (uri: string) => Promise<Uint8Array>,
): Promise<KeyUnwrapper[]> {
  const jweKeys = [];
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
    if (protocol !== '' && protocol !== 'jwe') {
      throw new DecryptionKeyArgumentError(
        `--decryption-key ${JSON.stringify(value)}: protocol ${JSON.stringify(protocol)} is not supported here (use jwe:PRIVATE.pem or provider:attestation-agent)`,
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
  return jweKeys.length > 0 ? [jweUnwrapper(jweKeys), ...unwrappers] : unwrappers;
}
