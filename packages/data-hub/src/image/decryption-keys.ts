/**
 * `[image] decryption_keys` (our addition: upstream's CDH takes no layer keys, and image-rs only
 * the `provider:attestation-agent` key provider): private keys for ocicrypt's `jwe`, `pgp` and
 * `pkcs7` key protocols, each entry `PROTOCOL:SOURCE[:PASSWORD]`.
 *
 * - SOURCE is a local file, or a KBS resource (`kbs:///r/t/g`, `kbs://host:port/r/t/g`,
 *   `kbs+plugin://…`) fetched through the hub's KBS path and never cached on disk.
 * - PASSWORD takes ocicrypt's `--decryption-key FILE:PASSWORD` forms: `pass=SECRET`,
 *   `file=PATH` (the file's bytes as they are), or the bare secret. `fd=N` is refused: a
 *   daemon's configuration has no descriptor to hand over. As in ocicrypt, a path ends at its
 *   first `:`.
 * - `jwe`: an RSA or EC private key (PEM, DER or JWK). `pkcs7`: an RSA private key, and
 *   optionally its certificate, as a separate entry or in the same PEM file. ocicrypt needs the
 *   certificate to pick the CMS recipient; our unwrapper tries each key on each recipient, so
 *   a certificate is only checked: it must belong to one of the configured pkcs7 keys.
 *   `pgp`: an OpenPGP secret key or keyring as `gpg --export-secret-keys` writes it (binary or
 *   armored), opened with PASSWORD when it is protected.
 *
 * Errors name the entry with its password replaced by `***`; secrets are never in a message.
 */

import { createPrivateKey, createPublicKey, type KeyObject, X509Certificate } from 'node:crypto';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import {
  jweUnwrapper,
  type KeyUnwrapper,
  parseJwePrivateKey,
  pgpUnwrapper,
  pkcs7Unwrapper,
  readPgpPrivateKeys,
} from '@broker/image';
import { DataHubError } from '../errors.js';

/** The largest key or password file read (a 16384-bit RSA key in PEM is about 12 KiB). */
export const MAX_KEY_BYTES = 1024 * 1024;

const PROTOCOLS = ['jwe', 'pgp', 'pkcs7'] as const;
type Protocol = (typeof PROTOCOLS)[number];

export class DecryptionKeyError extends DataHubError {
  override readonly name: string = 'DecryptionKeyError';
  override readonly code = 'DECRYPTION_KEY_INVALID';
}

/** One parsed entry. */
export interface DecryptionKeyEntry {
  readonly protocol: Protocol;
  /** A local path or a `kbs://` / `kbs+…://` URI. */
  readonly source: string;
  /** ocicrypt's password spelling, still to be resolved (`pass=`, `file=`, bare). */
  readonly password?: string;
  /** The entry as error messages show it: the password as `***`. */
  readonly shown: string;
}

/** How messages name an entry; long ones are cut (a message names the entry, it does not carry it). */
function entryName(shown: string): string {
  return `decryption_keys entry ${JSON.stringify(shown.length > 300 ? `${shown.slice(0, 300)}…` : shown)}`;
}

const KBS_SOURCE = /^(kbs(?:\+[A-Za-z0-9_.-]+)?:\/\/[^/]*\/[^:]*)(?::([\s\S]*))?$/;

export function parseDecryptionKeyEntry(entry: string): DecryptionKeyEntry {
  const colon = entry.indexOf(':');
  const protocol = entry.slice(0, Math.max(colon, 0));
  const rest = entry.slice(colon + 1);
  if (colon <= 0 || !(PROTOCOLS as readonly string[]).includes(protocol)) {
    // Nothing after the protocol is shown: it may hold a password.
    throw new DecryptionKeyError(
      `${entryName(colon < 0 ? entry : `${entry.slice(0, colon)}:…`)}: not PROTOCOL:SOURCE[:PASSWORD] with PROTOCOL jwe, pgp or pkcs7`,
    );
  }
  const kbs = KBS_SOURCE.exec(rest);
  const source = kbs !== null ? (kbs[1] ?? '') : (rest.split(':')[0] ?? '');
  const password = kbs !== null ? kbs[2] : rest.includes(':') ? rest.slice(rest.indexOf(':') + 1) : undefined;
  const shown = `${protocol}:${source}${password !== undefined ? ':***' : ''}`;
  if (source === '') throw new DecryptionKeyError(`${entryName(shown)}: no key file or kbs:// URI`);
  // `pgp:pass=SECRET`: the source was left out, and the password would be shown as a path.
  if (kbs === null && /^(?:pass|file|fd)=/.test(source)) {
    throw new DecryptionKeyError(
      `${entryName(`${protocol}:***`)}: no key file or kbs:// URI before the password`,
    );
  }
  if (kbs === null && /^[a-z][a-z0-9+.-]*:\/\//i.test(`${source}:${password ?? ''}`)) {
    throw new DecryptionKeyError(`${entryName(`${protocol}:${source}:…`)}: only local files and kbs:// URIs`);
  }
  if (password?.startsWith('fd=')) {
    throw new DecryptionKeyError(
      `${entryName(shown)}: a password from a file descriptor (fd=) is not supported here`,
    );
  }
  return { protocol: protocol as Protocol, source, ...(password !== undefined ? { password } : {}), shown };
}

/** Reads at most MAX_KEY_BYTES (+1 to tell a larger file), whatever the file claims its size is. */
async function readLimited(path: string, what: string): Promise<Uint8Array> {
  let bytes: Buffer;
  try {
    // Non-blocking: opening a FIFO for reading would otherwise wait (a thread of the pool with it)
    // until some writer opened it, which may be never.
    const file = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
    try {
      const stat = await file.stat();
      if (stat.isFIFO() || stat.isSocket()) {
        throw new DataHubError(`not a regular file (a ${stat.isFIFO() ? 'FIFO' : 'socket'})`, {
          code: 'DECRYPTION_KEY_INVALID',
        });
      }
      const buffer = Buffer.alloc(MAX_KEY_BYTES + 1);
      let length = 0;
      let bytesRead = -1;
      while (bytesRead !== 0 && length < buffer.byteLength) {
        ({ bytesRead } = await file.read(buffer, length, buffer.byteLength - length));
        length += bytesRead;
      }
      bytes = buffer.subarray(0, length);
    } finally {
      await file.close();
    }
  } catch (e) {
    throw new DataHubError(`cannot read the ${what} ${path}: ${(e as Error).message}`, {
      code: 'DECRYPTION_KEY_INVALID',
    });
  }
  if (bytes.byteLength > MAX_KEY_BYTES)
    throw new DataHubError(`the ${what} ${path} is larger than ${MAX_KEY_BYTES} bytes`, {
      code: 'DECRYPTION_KEY_INVALID',
    });
  return bytes;
}

/** The password's bytes: a `file=` password is the file's bytes as they are, UTF-8 or not. */
async function resolvePassword(password: string | undefined): Promise<Buffer | undefined> {
  if (password === undefined) return undefined;
  if (password.startsWith('pass=')) return Buffer.from(password.slice(5), 'utf8');
  if (password.startsWith('file=')) return Buffer.from(await readLimited(password.slice(5), 'password file'));
  return Buffer.from(password, 'utf8');
}

function isPem(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.subarray(0, 4096)).toString('latin1').includes('-----BEGIN ');
}

function certificatesIn(bytes: Uint8Array): X509Certificate[] {
  if (isPem(bytes)) {
    const text = Buffer.from(bytes).toString('latin1');
    const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
    return blocks.map((b) => new X509Certificate(b));
  }
  try {
    return [new X509Certificate(Buffer.from(bytes))];
  } catch {
    return [];
  }
}

/** An RSA/EC private key, encrypted PEM/DER (PKCS#8) opened with `password`. */
function privateKey(bytes: Uint8Array, password: Buffer | undefined, name: string): KeyObject {
  const text = Buffer.from(bytes).toString('latin1');
  // `-----BEGIN ENCRYPTED PRIVATE KEY-----` (PKCS#8) or OpenSSL's `Proc-Type: 4,ENCRYPTED`.
  const encrypted = isPem(bytes) && text.includes('ENCRYPTED');
  if (password === undefined && !encrypted) return parseJwePrivateKey(bytes, name);
  if (password === undefined)
    throw new DataHubError(`${name}: the private key is encrypted (no password given)`, {
      code: 'DECRYPTION_KEY_INVALID',
    });
  let key: KeyObject;
  try {
    key = isPem(bytes)
      ? createPrivateKey({ key: text, format: 'pem', passphrase: password })
      : createPrivateKey({ key: Buffer.from(bytes), format: 'der', type: 'pkcs8', passphrase: password });
  } catch (e) {
    throw new DataHubError(
      `${name}: the private key does not open with the password: ${(e as Error).message}`,
      { code: 'DECRYPTION_KEY_INVALID' },
    );
  }
  if (key.asymmetricKeyType !== 'rsa' && key.asymmetricKeyType !== 'ec') {
    throw new DataHubError(
      `${name}: a ${key.asymmetricKeyType} key cannot unwrap ocicrypt's layer keys (RSA or EC only)`,
      { code: 'DECRYPTION_KEY_INVALID' },
    );
  }
  return key;
}

function hasPrivateKey(bytes: Uint8Array): boolean {
  if (isPem(bytes)) return /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(Buffer.from(bytes).toString('latin1'));
  return certificatesIn(bytes).length === 0;
}

function samePublicKey(cert: X509Certificate, key: KeyObject): boolean {
  const spki = (k: KeyObject) => k.export({ type: 'spki', format: 'der' });
  return spki(cert.publicKey).equals(spki(createPublicKey(key)));
}

/**
 * The unwrappers for `entries`, in protocol order (jwe, pgp, pkcs7). `readKbs` fetches a
 * `kbs://` key without caching it.
 */
export async function decryptionKeyUnwrappers(
  entries: readonly string[],
  readKbs: (uri: string) => Promise<Uint8Array>,
): Promise<KeyUnwrapper[]> {
  const jwe: KeyObject[] = [];
  const pkcs7: KeyObject[] = [];
  const certificates: { cert: X509Certificate; shown: string }[] = [];
  const pgp: Awaited<ReturnType<typeof readPgpPrivateKeys>> = [];
  for (const text of entries) {
    const entry = parseDecryptionKeyEntry(text);
    const named = entryName(entry.shown);
    try {
      const fromKbs = KBS_SOURCE.test(entry.source);
      const bytes = fromKbs ? await readKbs(entry.source) : await readLimited(entry.source, 'key file');
      if (bytes.byteLength > MAX_KEY_BYTES)
        throw new DataHubError(`the key is larger than ${MAX_KEY_BYTES} bytes`, {
          code: 'DECRYPTION_KEY_INVALID',
        });
      const password = await resolvePassword(entry.password);
      if (entry.protocol === 'pgp') {
        // openpgp takes a passphrase as text only.
        pgp.push(...(await readPgpPrivateKeys(bytes, 'key', password?.toString('utf8'))));
      } else if (entry.protocol === 'jwe') {
        jwe.push(privateKey(bytes, password, 'key'));
      } else {
        const certs = certificatesIn(bytes);
        for (const cert of certs) certificates.push({ cert, shown: entry.shown });
        if (certs.length === 0 || hasPrivateKey(bytes)) {
          const key = privateKey(bytes, password, 'key');
          if (key.asymmetricKeyType !== 'rsa') {
            throw new DataHubError(`a ${key.asymmetricKeyType} key cannot open pkcs7 (RSA only)`, {
              code: 'DECRYPTION_KEY_INVALID',
            });
          }
          pkcs7.push(key);
        }
      }
    } catch (e) {
      throw new DecryptionKeyError(`${named}: ${(e as Error).message}`, { cause: e });
    }
  }
  for (const { cert, shown } of certificates) {
    if (!pkcs7.some((key) => samePublicKey(cert, key))) {
      throw new DecryptionKeyError(
        `${entryName(shown)}: the certificate ${cert.subject.replaceAll('\n', ', ')} belongs to none of the pkcs7 private keys`,
      );
    }
  }
  return [
    ...(jwe.length > 0 ? [jweUnwrapper(jwe)] : []),
    ...(pgp.length > 0 ? [pgpUnwrapper(pgp)] : []),
    ...(pkcs7.length > 0 ? [pkcs7Unwrapper(pkcs7)] : []),
  ];
}
