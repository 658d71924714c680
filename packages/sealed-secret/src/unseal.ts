/**
 * Unsealing: a pointer in, the secret out. The caller supplies one thing,
 * `getResource`, which fetches a KBS resource after attestation (the data
 * hub's cached-token client, or a KBS client of the `secret` tool). Verification
 * keys, vault secrets and KEKs all come through it.
 *
 * Steps and wording follow guest-components' `unseal_secret`:
 * `readSealedSecret` (parse, resolve `kid`, verify), then the version check,
 * then the provider.
 */

import { open, realpath } from 'node:fs/promises';
import { isAbsolute } from 'node:path';
import { messageOf } from '@broker/cli';
import { parseKbsUri } from '@broker/protocol';
import { decodeStd, decryptData, unwrapKey } from './envelope.js';
import {
  KeyFetchFailed,
  KeyFileError,
  KmsError,
  SealedSecretError,
  SealedSecretParseFailed,
  SecretVersionError,
  shown,
  UnsealEnvelopeFailed,
  UnsealVaultFailed,
} from './errors.js';
import { MAX_JWK_BYTES } from './jwk.js';
import {
  type EnvelopeSecret,
  SEALED_SECRET_VERSION,
  type SealedSecretPayload,
  type VaultSecret,
} from './payload.js';
import { readSealedSecret } from './pointer.js';

/** Upstream's `SIGNING_CREDENTIALS_PATH`: key files a `kid` may name (`CDH_BASE_DIR/sealed-secret`). */
export const SIGNING_CREDENTIALS_PATH = '/run/confidential-containers/cdh/sealed-secret';

/** Fetches `kbs:///repo/type/tag` after attestation; rejects with an Error whose message is the reason. */
export type GetResource = (uri: string) => Promise<Uint8Array>;

export interface UnsealOptions {
  readonly getResource: GetResource;
  /** `skip_sealed_secret_verification` (default false). */
  readonly skipVerification?: boolean;
  /** Folder of key files for a `kid` that is not a KBS URI (default `SIGNING_CREDENTIALS_PATH`; tests). */
  readonly signingKeyDir?: string;
}

/**
 * True when upstream takes `kid` for a resource URI (`ResourceUri::try_from`
 * succeeds): a URL with scheme `kbs` or `kbs+<plugin>` and a path. Anything
 * else names a key file.
 */
export function isKbsUri(kid: string): boolean {
  let url: URL;
  try {
    url = new URL(kid);
  } catch {
    return false;
  }
  const scheme = url.protocol.slice(0, -1);
  return (scheme === 'kbs' || (scheme.startsWith('kbs+') && scheme.length > 4)) && url.pathname !== '';
}

/** A KBS resource through `getResource`; an illegal URI fails before any request, as upstream's getter. */
async function fetchKbsResource(uri: string, getResource: GetResource): Promise<Uint8Array> {
  let legal = true;
  try {
    parseKbsUri(uri);
  } catch {
    legal = false;
  }
  if (!legal) throw KmsError.kbsClient(`illegal kbs resource uri: ${shown(uri)}`);
  try {
    return await getResource(uri);
  } catch (cause) {
    throw KmsError.kbsClient(`get resource failed: ${messageOf(cause)}`, { cause });
  }
}

/** Reads a regular file of at most `max` bytes. */
async function readBounded(path: string, max: number): Promise<Buffer> {
  const handle = await open(path, 'r');
  try {
    const st = await handle.stat();
    if (!st.isFile())
      throw new SealedSecretError(`${path} is not a regular file`, { code: 'KEY_FILE_UNREADABLE' });
    if (st.size > max)
      throw new SealedSecretError(`${path} is larger than ${max} bytes`, { code: 'KEY_FILE_UNREADABLE' });
    const buf = Buffer.alloc(max + 1);
    let n = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, n, buf.length - n, null);
      if (bytesRead === 0) break;
      n += bytesRead;
      if (n > max)
        throw new SealedSecretError(`${path} is larger than ${max} bytes`, { code: 'KEY_FILE_UNREADABLE' });
    }
    return buf.subarray(0, n);
  } finally {
    await handle.close();
  }
}

/**
 * The verification key bytes for `kid` (upstream `get_kid`): a KBS URI is
 * fetched; anything else is a file below `signingKeyDir`. The file path is
 * `<dir>/<kid>` (an absolute `kid` replaces the folder, as Rust's
 * `Path::join`), canonicalized with symlinks resolved before `..`, and must
 * stay inside the canonical folder.
 */
export async function resolveSigningKey(
  kid: string,
  options: Pick<UnsealOptions, 'getResource' | 'signingKeyDir'>,
): Promise<Uint8Array> {
  if (isKbsUri(kid)) {
    try {
      return await fetchKbsResource(kid, options.getResource);
    } catch (cause) {
      throw new KeyFetchFailed(messageOf(cause), { cause });
    }
  }
  let base: string;
  try {
    base = await realpath(options.signingKeyDir ?? SIGNING_CREDENTIALS_PATH);
  } catch {
    throw new SealedSecretParseFailed('KID is invalid. Must be a KBS URI or a credential path.');
  }
  const joined = isAbsolute(kid) ? kid : `${base}/${kid}`;
  let path: string;
  try {
    path = await realpath(joined);
  } catch (cause) {
    throw new KeyFileError(messageOf(cause), { cause });
  }
  if (path !== base && !path.startsWith(`${base === '/' ? '' : base}/`)) {
    throw new SealedSecretParseFailed('Invalid KID Key Path');
  }
  try {
    return await readBounded(path, MAX_JWK_BYTES);
  } catch (cause) {
    throw new KeyFileError(messageOf(cause), { cause });
  }
}

/** Upstream's provider names are matched without regard to ASCII case (strum). */
function isProvider(payload: SealedSecretPayload, name: string): boolean {
  return payload.provider.toLowerCase() === name;
}

async function unsealVault(secret: VaultSecret, getResource: GetResource): Promise<Uint8Array> {
  if (!isProvider(secret, 'kbs')) {
    const e = KmsError.unsupportedProvider(
      secret.provider,
      'vault secrets are unsealed through the KBS only; aliyun and aws are not built in',
    );
    throw new UnsealVaultFailed(`kms interface when create kms provider: ${e.message}`, { cause: e });
  }
  try {
    return await fetchKbsResource(secret.name, getResource);
  } catch (cause) {
    throw new UnsealVaultFailed(`kms interface when get secret from provider: ${messageOf(cause)}`, {
      cause,
    });
  }
}

function base64Field(value: string, context: string): Buffer {
  const bytes = decodeStd(value);
  if (bytes === null) {
    throw new UnsealEnvelopeFailed(`base64 decoding failed when ${context}: not canonical standard base64`);
  }
  return bytes;
}

async function unsealEnvelope(secret: EnvelopeSecret, getResource: GetResource): Promise<Uint8Array> {
  const wrapped = base64Field(secret.encrypted_key, 'decode `encrypted_key`');
  if (!isProvider(secret, 'kbs')) {
    const e = KmsError.unsupportedProvider(
      secret.provider,
      'envelope keys are unwrapped by the `kbs` key provider only; aliyun, aws and ehsm are not built in',
    );
    throw new UnsealEnvelopeFailed(`kms interface when create KMS provider: ${e.message}`, { cause: e });
  }
  let dek: Buffer;
  try {
    // The KEK buffer belongs to the caller (it may be cached): it is not wiped here.
    dek = unwrapKey(await fetchKbsResource(secret.key_id, getResource), wrapped);
  } catch (cause) {
    throw new UnsealEnvelopeFailed(`kms interface when decrypt encryption key: ${messageOf(cause)}`, {
      cause,
    });
  }
  try {
    const iv = base64Field(secret.iv, 'decode iv');
    const data = base64Field(secret.encrypted_data, 'decode encrypted_data');
    try {
      return decryptData(dek, data, iv, secret.wrap_type);
    } catch (cause) {
      throw new UnsealEnvelopeFailed(`decrypt envelope: ${messageOf(cause)}`, { cause });
    }
  } finally {
    dek.fill(0);
  }
}

/** Unseals a verified (or skip-mode) payload: version `0.1.0`, then its provider. */
export async function unsealPayload(
  payload: SealedSecretPayload,
  getResource: GetResource,
): Promise<Uint8Array> {
  if (payload.version !== SEALED_SECRET_VERSION) throw new SecretVersionError();
  return payload.type === 'vault' ? unsealVault(payload, getResource) : unsealEnvelope(payload, getResource);
}

/**
 * A pointer (`sealed.…`, text or bytes) to its plaintext: upstream's
 * `unseal_secret`. Throws a `SealedSecretError` whose message starts with
 * upstream's Display text.
 */
export async function unsealSecret(input: string | Uint8Array, options: UnsealOptions): Promise<Uint8Array> {
  const payload = await readSealedSecret(input, {
    skipVerification: options.skipVerification === true,
    resolveKey: (kid) => resolveSigningKey(kid, options),
  });
  return unsealPayload(payload, options.getResource);
}
