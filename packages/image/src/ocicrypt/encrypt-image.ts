/**
 * `image-policy encrypt`: copies an image from one registry reference to
 * another with every layer encrypted as ocicrypt does, for the recipients
 * given as skopeo's `--encryption-key` values:
 *
 * - `jwe:PUBLIC.pem` (RSA or EC public key; PEM, DER or JWK);
 * - `pgp:KEYRING` (a file as `gpg --export` writes it, every key in it a
 *   recipient; a value with a `/` is always a file) or `pgp:NAME` (no such
 *   file: as skopeo, `gpg --export NAME` from the user's keyring); all `pgp`
 *   recipients share one message;
 * - `pkcs7:CERT.pem` (an X.509 certificate with an RSA key, PEM or DER; all
 *   `pkcs7` recipients share one EnvelopedData);
 * - `provider:attestation-agent:keyid=kbs:///r/t/g::keypath=KEK` (the CoCo
 *   key provider: the private options wrapped with the 32-byte KEK in the
 *   file, under the kid the data hub will fetch it by from the KBS; the KEK
 *   must be stored there under the same path, e.g. `kbs-client config
 *   set-resource`). coco-keyprovider's parameter spelling; the kid must be a
 *   `kbs:///` URI, as the data hub requires.
 *
 * The result is an OCI manifest (a Docker v2 source is converted, as skopeo
 * does when it encrypts); the config and its diff_ids are copied unchanged.
 * From an index, the platform's manifest is encrypted and pushed alone.
 * Each layer streams from the source registry through the cipher into a
 * spool file (0600, in a fresh folder under the system's temporary folder,
 * removed at the end), which is then uploaded: memory stays bounded whatever
 * the layer's size, and the disk holds one encrypted layer at a time.
 */

import { execFile } from 'node:child_process';
import { createPublicKey, type KeyObject } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { digestOf } from '../digest.js';
import { ImageError } from '../errors.js';
import {
  currentPlatform,
  type Descriptor,
  MEDIA_TYPE,
  type Platform,
  parseManifest,
  selectPlatformManifest,
} from '../manifest.js';
import type { DockerReference } from '../reference.js';
import type { RegistryClient } from '../registry/client.js';
import { DecryptionKeyArgumentError } from './decryption-keys.js';
import { jweWrapper, type KeyWrapper } from './encrypt.js';
import { encryptLayerStream } from './encrypt-stream.js';
import { attestationAgentWrapper, parseAnnotationPacket } from './keyprovider-packet.js';
import { ENCRYPTED_SUFFIX } from './layer-info.js';
import { pgpWrapper, readPgpPublicKeys } from './pgp.js';
import { parsePkcs7Certificate, pkcs7Wrapper } from './pkcs7.js';

const MAX_KEY_FILE_BYTES = 1024 * 1024;

/** Plain layer media types and their OCI names (Docker's gzip layer becomes OCI's). */
const OCI_LAYER_TYPE: Readonly<Record<string, string>> = {
  [MEDIA_TYPE.ociLayer]: MEDIA_TYPE.ociLayer,
  [MEDIA_TYPE.ociLayerGzip]: MEDIA_TYPE.ociLayerGzip,
  [MEDIA_TYPE.ociLayerZstd]: MEDIA_TYPE.ociLayerZstd,
  [MEDIA_TYPE.dockerLayerGzip]: MEDIA_TYPE.ociLayerGzip,
};

async function keyFile(file: string, what: string): Promise<Buffer> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (e) {
    throw new DecryptionKeyArgumentError(
      `--encryption-key: cannot read ${what} ${file}: ${(e as Error).message}`,
    );
  }
  if (bytes.byteLength > MAX_KEY_FILE_BYTES) {
    throw new DecryptionKeyArgumentError(
      `--encryption-key: ${file} is larger than ${MAX_KEY_FILE_BYTES} bytes`,
    );
  }
  return bytes;
}

function publicKeyOf(bytes: Buffer, file: string): KeyObject {
  const text = bytes.toString('utf8');
  try {
    const key = text.includes('-----BEGIN')
      ? createPublicKey(text)
      : text.trimStart().startsWith('{')
        ? createPublicKey({ key: JSON.parse(text) as import('node:crypto').JsonWebKey, format: 'jwk' })
        : createPublicKey({ key: bytes, format: 'der', type: 'spki' });
    if (key.asymmetricKeyType !== 'rsa' && key.asymmetricKeyType !== 'ec') {
      throw new ImageError(`a ${key.asymmetricKeyType} key cannot wrap ocicrypt's JWE (RSA or EC only)`, {
        code: 'KEY_UNUSABLE',
      });
    }
    return key;
  } catch (e) {
    throw new DecryptionKeyArgumentError(
      `--encryption-key: ${file}: not a usable public key: ${(e as Error).message}`,
    );
  }
}

/** The recipients of `--encryption-key` values. Throws `DecryptionKeyArgumentError`. */
export async function wrappersFromArguments(values: readonly string[]): Promise<KeyWrapper[]> {
  const wrappers: KeyWrapper[] = [];
  const pgpKeys: Awaited<ReturnType<typeof readPgpPublicKeys>> = [];
  const certs: ReturnType<typeof parsePkcs7Certificate>[] = [];
  for (const value of values) {
    if (value.startsWith('pkcs7:')) {
      const file = value.slice(6);
      try {
        certs.push(parsePkcs7Certificate(await keyFile(file, 'certificate'), file));
      } catch (e) {
        if (e instanceof DecryptionKeyArgumentError) throw e;
        throw new DecryptionKeyArgumentError(`--encryption-key: ${(e as Error).message}`);
      }
      continue;
    }
    if (value.startsWith('pgp:')) {
      const name = value.slice(4);
      if (name === '')
        throw new DecryptionKeyArgumentError('--encryption-key pgp: needs a keyring file or a name');
      const bytes =
        name.includes('/') || existsSync(name)
          ? await keyFile(name, 'OpenPGP keyring')
          : await gpgExport(name);
      try {
        pgpKeys.push(...(await readPgpPublicKeys(bytes, name)));
      } catch (e) {
        throw new DecryptionKeyArgumentError(`--encryption-key: ${(e as Error).message}`);
      }
      continue;
    }
    if (value.startsWith('jwe:')) {
      const file = value.slice(4);
      wrappers.push(jweWrapper(publicKeyOf(await keyFile(file, 'public key'), file)));
      continue;
    }
    if (value.startsWith('provider:attestation-agent:')) {
      const params = new Map<string, string>();
      for (const pair of value.slice('provider:attestation-agent:'.length).split('::')) {
        const eq = pair.indexOf('=');
        if (eq > 0) params.set(pair.slice(0, eq), pair.slice(eq + 1));
      }
      const kid = params.get('keyid');
      const keypath = params.get('keypath');
      if (kid === undefined || keypath === undefined) {
        throw new DecryptionKeyArgumentError(
          `--encryption-key ${JSON.stringify(value)}: needs keyid=kbs:///… and keypath=FILE`,
        );
      }
      const kek = await keyFile(keypath, 'KEK');
      if (kek.byteLength !== 32) {
        throw new DecryptionKeyArgumentError(
          `--encryption-key: the KEK ${keypath} has ${kek.byteLength} bytes, expected 32`,
        );
      }
      const wrapper = attestationAgentWrapper(kid, kek);
      try {
        // The data hub refuses a kid that is not a kbs:/// URI: refuse it here, before anything is pushed.
        parseAnnotationPacket(await wrapper.wrap(Buffer.from('{}')));
      } catch (e) {
        throw new DecryptionKeyArgumentError(`--encryption-key: ${(e as Error).message}`);
      }
      wrappers.push(wrapper);
      continue;
    }
    throw new DecryptionKeyArgumentError(
      `--encryption-key ${JSON.stringify(value)}: use jwe:PUBLIC.pem, pgp:KEYRING, pkcs7:CERT.pem or provider:attestation-agent:keyid=kbs:///…::keypath=FILE`,
    );
  }
  if (pgpKeys.length > 0) wrappers.push(pgpWrapper(pgpKeys));
  if (certs.length > 0) wrappers.push(pkcs7Wrapper(certs));
  return wrappers;
}

/** `gpg --export NAME` from the user's keyring (GNUPGHOME), as ocicrypt reads `pgp:NAME` recipients. */
function gpgExport(name: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    execFile(
      'gpg',
      ['--batch', '--no-tty', '--export', '--', name],
      { encoding: 'buffer', maxBuffer: MAX_KEY_FILE_BYTES },
      (error, stdout, stderr) => {
        if (error !== null || stdout.byteLength === 0) {
          const why =
            error !== null ? stderr.toString().trim() || error.message : 'no such key in the keyring';
          reject(
            new DecryptionKeyArgumentError(
              `--encryption-key pgp:${name}: not a file, and gpg --export found no key: ${why}`,
            ),
          );
          return;
        }
        resolve(stdout);
      },
    );
  });
}

/** Encrypts `src` into `dest` (same or another registry); resolves with the new manifest's digest. */
export async function encryptRegistryImage(
  client: RegistryClient,
  src: DockerReference,
  dest: DockerReference,
  wrappers: readonly KeyWrapper[],
  options: {
    readonly platform?: Platform;
    /** Where the spool folder is made (default: the system's temporary folder). */
    readonly spoolParent?: string;
  } = {},
): Promise<string> {
  if (wrappers.length === 0)
    throw new ImageError('no --encryption-key given', { code: 'ENCRYPT_REQUEST_INVALID' });
  if (dest.digest !== undefined)
    throw new ImageError('the destination must be a tag: encrypting changes the manifest digest', {
      code: 'ENCRYPT_REQUEST_INVALID',
    });
  const from = { domain: src.domain, path: src.path };
  const to = { domain: dest.domain, path: dest.path };
  let top = await client.getManifest(from, src.digest ?? src.tag ?? 'latest');
  let parsed = parseManifest(top.bytes, top.contentType);
  if (parsed.kind === 'index') {
    const chosen = selectPlatformManifest(parsed, options.platform ?? currentPlatform());
    top = await client.getManifest(from, chosen.digest);
    parsed = parseManifest(top.bytes, top.contentType);
  }
  if (parsed.kind !== 'manifest')
    throw new ImageError('expected an image manifest', { code: 'ENCRYPT_REQUEST_INVALID' });
  const config = await client.getBlobBytes(from, parsed.config, 4 * 1024 * 1024);
  await client.pushBlob(to, config);
  const layers: Descriptor[] = [];
  const spool = await mkdtemp(join(options.spoolParent ?? tmpdir(), 'image-encrypt-'));
  try {
    for (const [n, layer] of parsed.layers.entries()) {
      if (layer.mediaType.endsWith(ENCRYPTED_SUFFIX))
        throw new ImageError(`layer ${layer.digest} is already encrypted`, {
          code: 'ENCRYPT_REQUEST_INVALID',
        });
      const mediaType = OCI_LAYER_TYPE[layer.mediaType];
      if (mediaType === undefined)
        throw new ImageError(`layer ${layer.digest}: cannot encrypt media type ${layer.mediaType}`, {
          code: 'ENCRYPT_REQUEST_INVALID',
        });
      const file = join(spool, `${n}.blob`);
      // getBlob's stream fails unless the plain blob has the descriptor's size and digest.
      const encrypted = await encryptLayerStream(
        await client.getBlob(from, layer),
        layer.digest,
        wrappers,
        file,
      );
      await client.pushBlob(to, {
        digest: encrypted.digest,
        size: encrypted.size,
        open: () => createReadStream(file),
      });
      await rm(file, { force: true });
      layers.push({
        mediaType: `${mediaType}${ENCRYPTED_SUFFIX}`,
        digest: encrypted.digest,
        size: encrypted.size,
        annotations: encrypted.annotations,
      });
    }
  } finally {
    await rm(spool, { recursive: true, force: true });
  }
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA_TYPE.ociManifest,
      config: { mediaType: MEDIA_TYPE.ociConfig, digest: parsed.config.digest, size: parsed.config.size },
      layers,
      ...(parsed.annotations !== undefined ? { annotations: parsed.annotations } : {}),
    }),
  );
  await client.putManifest(to, dest.digest ?? dest.tag ?? 'latest', manifest, MEDIA_TYPE.ociManifest);
  return digestOf(manifest);
}
