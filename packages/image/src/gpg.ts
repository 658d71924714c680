/**
 * GPG "simple signing" (containers/image `signedBy` with `keyType: GPGKeys`):
 * an OpenPGP signed message whose literal data is the JSON payload
 * `{"critical":{"identity":{"docker-reference":…},"image":{"docker-manifest-digest":…},"type":"atomic container signature"},"optional":{…}}`.
 *
 * OpenPGP itself is done by the `openpgp` library; this module only decides
 * which messages are acceptable. It is stricter than a plain "does it verify"
 * check, as containers/image (through gpgme) is:
 * - the message must be exactly one signed literal (optionally compressed):
 *   no trailing or leading packets, no second signature, nothing encrypted;
 * - the signer must be a key of the trusted keyring, and that key must be
 *   valid now (a key or subkey that has since expired or been revoked no
 *   longer vouches for anything);
 * - the signature itself must not have expired.
 */

import type * as openpgp from 'openpgp';
import { ImageError } from './errors.js';
import { type OpenpgpModule, openpgpModule } from './openpgp-module.js';
import { InvalidSignatureError, parseSimpleSigningPayload, type SigstorePayload } from './sigstore.js';

/** Largest simple-signing blob accepted (skopeo's are under 1 KiB). */
export const MAX_GPG_SIGNATURE_BYTES = 64 * 1024;
/** Largest payload a compressed signature may expand to. */
export const MAX_GPG_PAYLOAD_BYTES = 1024 * 1024;

function pgpConfig(pgp: OpenpgpModule): openpgp.Config {
  return {
    ...pgp.config,
    maxDecompressedMessageSize: MAX_GPG_PAYLOAD_BYTES,
    ignoreUnsupportedPackets: false,
    ignoreMalformedPackets: false,
    enforceGrammar: true,
  };
}

/** A keyring the policy trusts, with the primary-key fingerprints it contains. */
export interface GpgKeyring {
  readonly keys: readonly openpgp.PublicKey[];
  /** Upper-case hex fingerprints of the primary keys, as containers/image reports them. */
  readonly fingerprints: readonly string[];
}

const ARMOR_START = Buffer.from('-----BEGIN PGP');

/**
 * Reads keyrings (binary, as `gpg --export` writes, or ASCII-armored), as
 * containers/image imports each `keyPath`/`keyPaths`/`keyData` entry.
 */
export async function loadGpgKeyring(blobs: readonly Uint8Array[]): Promise<GpgKeyring> {
  const keys: openpgp.PublicKey[] = [];
  const pgp = await openpgpModule();
  for (const [i, blob] of blobs.entries()) {
    // An empty keyring imports nothing (gpgme does not complain either).
    if (blob.byteLength === 0) continue;
    const bytes = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
    let read: openpgp.Key[];
    try {
      const start = bytes.subarray(0, 256).indexOf(ARMOR_START);
      read =
        start >= 0 &&
        bytes.subarray(0, start).every((b) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09)
          ? await pgp.readKeys({ armoredKeys: bytes.toString('utf8') })
          : await pgp.readKeys({ binaryKeys: bytes });
    } catch (e) {
      throw new ImageError(`parsing GPG key ${i + 1}: ${(e as Error).message}`, { code: 'KEY_UNUSABLE' });
    }
    for (const k of read) keys.push(k.isPrivate() ? k.toPublic() : (k as openpgp.PublicKey));
  }
  if (keys.length === 0) throw new ImageError('No public keys imported', { code: 'KEY_UNUSABLE' });
  return { keys, fingerprints: keys.map((k) => k.getFingerprint().toUpperCase()) };
}

/**
 * Every packet of a list, including those still queued in its stream (the
 * library parses an in-memory message into an array that it hands out
 * lazily; the part past the literal data is only reachable by reading it).
 */
async function allPackets(list: openpgp.PacketList<openpgp.AnyPacket>): Promise<unknown[]> {
  const out: unknown[] = [...list];
  const rest = (list as unknown as { stream?: { getReader?: () => ReadableStreamDefaultReader<unknown> } })
    .stream;
  if (rest?.getReader !== undefined) {
    const reader = rest.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (Array.isArray(value)) out.push(...value);
      else out.push(value);
    }
  }
  return out;
}

function packetTag(p: unknown): number {
  const tag = (p as { constructor: { tag?: number } }).constructor.tag;
  return typeof tag === 'number' ? tag : -1;
}

function describeTags(pgp: OpenpgpModule, tags: readonly number[]): string {
  return tags
    .map((t) => {
      try {
        return t < 0 ? 'unknown' : String(pgp.enums.read(pgp.enums.packet, t));
      } catch {
        return `tag ${t}`;
      }
    })
    .join(', ');
}

/**
 * The packets of a simple signature must be exactly a signed literal:
 * one-pass signature, literal data, signature (what gpg and skopeo write) or
 * the older signature, literal data; optionally inside one compressed packet.
 * Anything else (a trailing packet, a second signature, an encrypted or
 * unsigned message) is refused before any signature is checked. Marker and
 * padding packets are dropped by the library while reading, as RFC 9580
 * tells receivers to.
 */
async function checkSignedLiteralShape(pgp: OpenpgpModule, blob: Uint8Array): Promise<void> {
  const PACKET = pgp.enums.packet;
  let tags: number[];
  try {
    const message = await pgp.readMessage({ binaryMessage: blob, config: pgpConfig(pgp) });
    const outer = await allPackets(message.packets);
    tags = outer.map(packetTag);
    if (tags.length === 1 && tags[0] === PACKET.compressedData) {
      const compressed = outer[0] as { packets: openpgp.PacketList<openpgp.AnyPacket> };
      tags = (await allPackets(compressed.packets)).map(packetTag);
    }
  } catch (e) {
    throw new InvalidSignatureError(`Invalid GPG signature: ${(e as Error).message}`);
  }
  const onePass = [PACKET.onePassSignature, PACKET.literalData, PACKET.signature];
  const old = [PACKET.signature, PACKET.literalData];
  const same = (a: readonly number[], b: readonly number[]) =>
    a.length === b.length && a.every((x, i) => x === b[i]);
  if (!same(tags, onePass) && !same(tags, old)) {
    throw new InvalidSignatureError(
      `Invalid GPG signature: expected one signed literal data packet, got packets [${describeTags(pgp, tags)}]`,
    );
  }
}

/** What a verified GPG signature says. */
export interface VerifiedGpgSignature {
  /** The literal data (the payload), exactly as signed. */
  readonly content: Uint8Array;
  /** Upper-case fingerprint of the signing key's primary key. */
  readonly signerFingerprint: string;
}

/**
 * containers/image `gpgSigningMechanism.Verify` + the trusted-fingerprint
 * check of `verifyAndExtractSignature`: returns the signed content only when
 * a key of `keyring` made the signature and is valid now.
 */
export async function verifyGpgSignature(
  keyring: GpgKeyring,
  blob: Uint8Array,
  now: Date = new Date(),
): Promise<VerifiedGpgSignature> {
  if (blob.byteLength > MAX_GPG_SIGNATURE_BYTES)
    throw new InvalidSignatureError(`GPG signature larger than ${MAX_GPG_SIGNATURE_BYTES} bytes`);
  const pgp = await openpgpModule();
  await checkSignedLiteralShape(pgp, blob);
  let message: openpgp.Message<Uint8Array>;
  try {
    message = await pgp.readMessage({ binaryMessage: blob, config: pgpConfig(pgp) });
  } catch (e) {
    throw new InvalidSignatureError(`Invalid GPG signature: ${(e as Error).message}`);
  }
  const issuers = message.getSigningKeyIDs();
  if (issuers.length !== 1)
    throw new InvalidSignatureError(`Invalid GPG signature: ${issuers.length} signatures, expected 1`);
  const issuer = issuers[0] as openpgp.KeyID;
  const signer = keyring.keys.find((k) => k.getKeys(issuer).length > 0);
  if (signer === undefined) {
    throw new InvalidSignatureError(
      `Invalid GPG signature: signed by key ${issuer.toHex().toUpperCase()}, which is not among the trusted keys`,
    );
  }
  let content: Uint8Array;
  try {
    const result = await pgp.verify({
      message,
      verificationKeys: [signer],
      expectSigned: true,
      format: 'binary',
      date: now,
      config: pgpConfig(pgp),
    });
    for (const s of result.signatures) await s.verified;
    content = result.data;
  } catch (e) {
    throw new InvalidSignatureError(`Invalid GPG signature: ${(e as Error).message}`);
  }
  // openpgp checks the key as of the signature's creation; a key that has
  // expired or been revoked since no longer vouches for anything.
  try {
    await signer.getSigningKey(issuer, now, undefined, pgpConfig(pgp));
  } catch (e) {
    throw new InvalidSignatureError(
      `Invalid GPG signature: key ${signer.getFingerprint().toUpperCase()} is not valid now: ${(e as Error).message}`,
    );
  }
  const signerFingerprint = signer.getFingerprint().toUpperCase();
  if (!keyring.fingerprints.includes(signerFingerprint)) {
    throw new InvalidSignatureError(
      `Signature by ${signerFingerprint} does not match expected fingerprints [${keyring.fingerprints.join(' ')}]`,
    );
  }
  return { content, signerFingerprint };
}

/** Checks applied once the signature verified; each throws to reject. */
export interface SimpleSigningRules {
  validateManifestDigest(digest: string): void | Promise<void>;
  validateDockerReference(reference: string): void | Promise<void>;
}

/**
 * containers/image `verifyAndExtractSignature` for GPG: verify, then parse
 * the payload strictly, then the manifest digest rule, then the identity rule.
 */
export async function verifySimpleSigning(
  keyring: GpgKeyring,
  blob: Uint8Array,
  rules: SimpleSigningRules,
  now: Date = new Date(),
): Promise<SigstorePayload & { readonly signerFingerprint: string }> {
  const { content, signerFingerprint } = await verifyGpgSignature(keyring, blob, now);
  const payload = parseSimpleSigningPayload(content);
  await rules.validateManifestDigest(payload.dockerManifestDigest);
  await rules.validateDockerReference(payload.dockerReference);
  return { ...payload, signerFingerprint };
}
