/**
 * Sigstore (cosign) key-based image signatures, as containers/image verifies
 * them: the signature annotation is checked over the exact payload bytes
 * with any of the trusted public keys (SHA-256; ECDSA DER, RSA PKCS#1 v1.5,
 * Ed25519), and only then is the simple-signing payload parsed, strictly,
 * and its manifest digest and identity checked.
 *
 * Signing is here too, for our own tooling and tests: it writes payloads in
 * cosign's byte layout, so that the signatures we make are the ones cosign
 * would make.
 */

import { createPublicKey, sign as cryptoSign, verify as cryptoVerify, type KeyObject } from 'node:crypto';
import { parseDigest } from './digest.js';
import { ImageError, type ImageErrorCode } from './errors.js';
import {
  decodeStdBase64,
  goNumber,
  goQuote,
  goString,
  JsonFormatError,
  type JsonValue,
  paranoidExactFields,
  paranoidObject,
  parseJson,
} from './json.js';

export const SIGSTORE_SIGNATURE_MIME_TYPE = 'application/vnd.dev.cosign.simplesigning.v1+json';
export const SIGSTORE_SIGNATURE_ANNOTATION = 'dev.cosignproject.cosign/signature';
export const SIGSTORE_SET_ANNOTATION = 'dev.sigstore.cosign/bundle';
export const SIGSTORE_CERTIFICATE_ANNOTATION = 'dev.sigstore.cosign/certificate';
export const SIGSTORE_CHAIN_ANNOTATION = 'dev.sigstore.cosign/chain';
/** `critical.type` of every simple-signing payload cosign makes. */
export const SIGSTORE_PAYLOAD_TYPE = 'cosign container image signature';
/** containers/image `iolimits.MaxSignatureBodySize`. */
export const MAX_SIGNATURE_BYTES = 4 * 1024 * 1024;
/** Smallest RSA key accepted (sigstore's own key validation floor). */
export const MIN_RSA_BITS = 2048;

/** A signature whose content cannot be trusted (containers/image `InvalidSignatureError`). */
export class InvalidSignatureError extends ImageError {
  override readonly code: ImageErrorCode = 'SIGNATURE_INVALID';
  override readonly name: string = 'InvalidSignatureError';
}

/** A trusted key that cannot be used. */
export class InvalidPublicKeyError extends ImageError {
  override readonly code: ImageErrorCode = 'PUBLIC_KEY_INVALID';
  override readonly name: string = 'InvalidPublicKeyError';
}

/**
 * A signature as stored next to an image, not yet verified. Sigstore ones
 * come from a `.sig` attachment layer (or a `dir:` image's `signature-N`);
 * simple-signing ones (GPG) are recognised so that they can be counted, never
 * accepted.
 */
export type UntrustedSignature =
  | {
      readonly format: 'sigstore';
      readonly mimeType: string;
      readonly payload: Uint8Array;
      readonly annotations: Readonly<Record<string, string>>;
    }
  | { readonly format: 'simple-signing'; readonly blob: Uint8Array };

/** The claims of a simple-signing payload. */
export interface SigstorePayload {
  readonly dockerManifestDigest: string;
  readonly dockerReference: string;
  readonly creator?: string;
  readonly timestamp?: number;
}

const OPENPGP_FIRST_BYTES = new Set([
  0xa0, 0xa1, 0xa2, 0xa3, 0xc8, 0x90, 0x91, 0x92, 0x3d, 0xc4, 0x88, 0x89, 0x8a, 0x8b, 0xc2,
]);
const utf8 = new TextDecoder('utf-8', { fatal: false });
const utf8Encoder = new TextEncoder();

/**
 * containers/image `signature.FromBlob`: a GPG blob, or `\0<format>\n<body>`
 * with format `simple-signing` or `sigstore-json`.
 */
export function signatureFromBlob(blob: Uint8Array): UntrustedSignature {
  if (blob.byteLength === 0) throw new InvalidSignatureError('empty signature blob');
  if (blob.byteLength > MAX_SIGNATURE_BYTES) throw new InvalidSignatureError('signature blob too large');
  const first = blob[0] ?? 0;
  if (OPENPGP_FIRST_BYTES.has(first)) return { format: 'simple-signing', blob };
  if (first !== 0)
    throw new InvalidSignatureError(
      `unrecognized signature format, starting with binary 0x${first.toString(16)}`,
    );
  const nl = blob.indexOf(0x0a, 1);
  if (nl < 0) throw new InvalidSignatureError('invalid signature format, missing newline');
  const formatBytes = blob.subarray(1, nl);
  for (const b of formatBytes) {
    if (b < 32 || b >= 0x7f)
      throw new InvalidSignatureError(`invalid signature format, non-ASCII byte 0x${b.toString(16)}`);
  }
  const format = utf8.decode(formatBytes);
  const body = blob.subarray(nl + 1);
  if (format === 'simple-signing') return { format: 'simple-signing', blob: body };
  if (format === 'sigstore-json') return sigstoreFromJson(body);
  throw new InvalidSignatureError(`unrecognized signature format ${goQuote(format)}`);
}

/** The `sigstore-json` body: `{"mimeType","payload" (base64),"annotations"}`, read leniently as Go's plain decoder does. */
function sigstoreFromJson(body: Uint8Array): UntrustedSignature {
  let v: JsonValue;
  try {
    v = parseJson(body);
  } catch (e) {
    throw new InvalidSignatureError((e as Error).message);
  }
  if (v.kind !== 'object') throw new InvalidSignatureError('sigstore signature is not a JSON object');
  let mimeType = '';
  let payload: Uint8Array = new Uint8Array(0);
  const annotations: Record<string, string> = {};
  for (const [key, value] of v.entries) {
    const k = key.toLowerCase();
    try {
      if (k === 'mimetype') mimeType = goString(value);
      else if (k === 'payload')
        payload = value.kind === 'null' ? new Uint8Array(0) : decodeStdBase64(goString(value, '[]uint8'));
      else if (k === 'annotations' && value.kind === 'object') {
        for (const [ak, av] of value.entries) annotations[ak] = goString(av);
      } else if (k === 'annotations' && value.kind !== 'null') {
        throw new JsonFormatError(
          `json: cannot unmarshal ${value.kind} into Go value of type map[string]string`,
        );
      }
    } catch (e) {
      throw new InvalidSignatureError((e as Error).message);
    }
  }
  return { format: 'sigstore', mimeType, payload, annotations };
}

/** The inverse of `signatureFromBlob` for sigstore signatures (containers/image's `dir:` layout). */
export function signatureToBlob(sig: UntrustedSignature): Uint8Array {
  if (sig.format === 'simple-signing') return sig.blob;
  const body = JSON.stringify({
    mimeType: sig.mimeType,
    payload: Buffer.from(sig.payload).toString('base64'),
    annotations: sig.annotations,
  });
  return Buffer.concat([Buffer.from('\0sigstore-json\n'), Buffer.from(body)]);
}

/** The first PEM block of `text`: its type and DER bytes. */
function firstPemBlock(text: string): { type: string; der: Buffer } | undefined {
  const begin = /-----BEGIN ([^\r\n-]*)-----\r?\n/.exec(text);
  if (begin === null) return undefined;
  const type = begin[1] ?? '';
  const bodyStart = begin.index + begin[0].length;
  const endMarker = `-----END ${type}-----`;
  const end = text.indexOf(endMarker, bodyStart);
  if (end < 0) return undefined;
  let body = text.slice(bodyStart, end);
  // RFC 1421 headers ("Proc-Type: ...") end at an empty line.
  if (/^[^\r\n]*:/.test(body)) {
    const blank = body.search(/\r?\n\r?\n/);
    if (blank < 0) return undefined;
    body = body.slice(blank);
  }
  const compact = body.replace(/[\r\n\t ]/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 !== 0) return undefined;
  return { type, der: Buffer.from(compact, 'base64') };
}

/**
 * sigstore `cryptoutils.UnmarshalPEMToPublicKey`: a `PUBLIC KEY` (PKIX) or
 * `RSA PUBLIC KEY` (PKCS#1) PEM block. ECDSA (P-256, P-384, P-521), RSA of
 * at least 2048 bits and Ed25519 keys are usable.
 */
export function parsePublicKeyPem(pem: Uint8Array | string): KeyObject {
  const text = typeof pem === 'string' ? pem : utf8.decode(pem);
  const block = firstPemBlock(text);
  if (block === undefined) throw new InvalidPublicKeyError('PEM decoding failed');
  let key: KeyObject;
  try {
    if (block.type === 'PUBLIC KEY') key = createPublicKey({ key: block.der, format: 'der', type: 'spki' });
    else if (block.type === 'RSA PUBLIC KEY')
      key = createPublicKey({ key: block.der, format: 'der', type: 'pkcs1' });
    else {
      throw new InvalidPublicKeyError(
        `unknown Public key PEM file type: ${block.type}. Are you passing the correct public key?`,
      );
    }
  } catch (e) {
    if (e instanceof InvalidPublicKeyError) throw e;
    throw new InvalidPublicKeyError(`parsing public key: ${(e as Error).message}`);
  }
  switch (key.asymmetricKeyType) {
    case 'ec':
    case 'ed25519':
      return key;
    case 'rsa': {
      const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
      if (bits < MIN_RSA_BITS)
        throw new InvalidPublicKeyError(`RSA key of ${bits} bits, at least ${MIN_RSA_BITS} needed`);
      return key;
    }
    default:
      throw new InvalidPublicKeyError(`unsupported public key type ${key.asymmetricKeyType ?? 'unknown'}`);
  }
}

/** The hash sigstore-rs (image-rs) pairs with each curve other than P-256. */
const EC_CURVE_HASH: Readonly<Record<string, string>> = { secp384r1: 'sha384', secp521r1: 'sha512' };

/** One key's verdict on raw signature bytes; the failure text is sigstore's verifier's. */
function verifyWithKey(key: KeyObject, payload: Uint8Array, signature: Uint8Array): string | undefined {
  try {
    switch (key.asymmetricKeyType) {
      case 'ec': {
        // cosign and containers/image hash with SHA-256 for every curve; image-rs (sigstore-rs) with the
        // curve's own hash (SHA-384 for P-384, SHA-512 for P-521). A signature either way is accepted.
        const own = EC_CURVE_HASH[key.asymmetricKeyDetails?.namedCurve ?? ''];
        const ok = (hash: string) => cryptoVerify(hash, payload, { key, dsaEncoding: 'der' }, signature);
        return ok('sha256') || (own !== undefined && ok(own))
          ? undefined
          : 'invalid signature when validating ASN.1 encoded signature';
      }
      case 'rsa':
        return cryptoVerify('sha256', payload, key, signature) ? undefined : 'crypto/rsa: verification error';
      case 'ed25519':
        return cryptoVerify(null, payload, key, signature) ? undefined : 'failed to verify signature';
      default:
        return `unsupported public key type ${key.asymmetricKeyType ?? 'unknown'}`;
    }
  } catch (e) {
    return (e as Error).message;
  }
}

/** Verifies raw signature bytes over the exact payload with any of `keys`. Throws `InvalidSignatureError`. */
export function verifyPayloadSignature(
  keys: readonly KeyObject[],
  payload: Uint8Array,
  signature: Uint8Array,
): void {
  if (keys.length === 0)
    throw new ImageError('Need at least one public key to verify the sigstore payload, but got 0', {
      code: 'KEY_UNUSABLE',
    });
  const failures: string[] = [];
  for (const key of keys) {
    const failure = verifyWithKey(key, payload, signature);
    if (failure === undefined) return;
    failures.push(failure);
  }
  throw new InvalidSignatureError(`cryptographic signature verification failed: ${failures.join(', ')}`);
}

/** containers/image's strict reading of a simple-signing payload. Throws `InvalidSignatureError`. */
export function parseSigstorePayload(bytes: Uint8Array): SigstorePayload {
  return parsePayloadOf(bytes, SIGSTORE_PAYLOAD_TYPE, false);
}

/** The type GPG simple signatures carry in `critical.type`. */
export const SIMPLE_SIGNING_PAYLOAD_TYPE = 'atomic container signature';

/**
 * containers/image's strict reading of a GPG simple-signing payload
 * (`untrustedSignature.strictUnmarshalJSON`): as the sigstore one, but the
 * type is `atomic container signature` and `optional` must be an object.
 */
export function parseSimpleSigningPayload(bytes: Uint8Array): SigstorePayload {
  return parsePayloadOf(bytes, SIMPLE_SIGNING_PAYLOAD_TYPE, true);
}

function parsePayloadOf(bytes: Uint8Array, expectedType: string, optionalObject: boolean): SigstorePayload {
  try {
    return readPayload(parseJson(bytes), expectedType, optionalObject);
  } catch (e) {
    if (e instanceof InvalidSignatureError) throw e;
    throw new InvalidSignatureError((e as Error).message);
  }
}

function readPayload(v: JsonValue, expectedType: string, optionalObject: boolean): SigstorePayload {
  let critical: JsonValue = { kind: 'null' };
  let optional: JsonValue = { kind: 'null' };
  paranoidExactFields(v, { critical: (x) => (critical = x), optional: (x) => (optional = x) });
  if (optionalObject && (optional as JsonValue).kind !== 'object')
    throw new InvalidSignatureError('JSON object expected');
  let creator: string | undefined;
  let timestamp: number | undefined;
  if (optional.kind !== 'null') {
    paranoidObject(optional, (key) => {
      if (key === 'creator') return (x) => (creator = goString(x));
      if (key === 'timestamp') return (x) => (timestamp = goNumber(x));
      return () => undefined; // cosign's `-a` annotations and anything else are allowed and ignored.
    });
  }
  if (timestamp !== undefined && !(Number.isInteger(timestamp) && Math.abs(timestamp) < 2 ** 63)) {
    throw new InvalidSignatureError('Field optional.timestamp is not an integer');
  }
  let type = '';
  let image: JsonValue = { kind: 'null' };
  let identity: JsonValue = { kind: 'null' };
  paranoidExactFields(critical, {
    type: (x) => (type = goString(x)),
    image: (x) => (image = x),
    identity: (x) => (identity = x),
  });
  if (type !== expectedType) throw new InvalidSignatureError(`Unrecognized signature type ${type}`);
  let digestString = '';
  paranoidExactFields(image, { 'docker-manifest-digest': (x) => (digestString = goString(x)) });
  try {
    parseDigest(digestString);
  } catch (e) {
    throw new InvalidSignatureError(
      `invalid docker-manifest-digest value ${goQuote(digestString)}: ${(e as Error).message}`,
    );
  }
  let dockerReference = '';
  paranoidExactFields(identity, { 'docker-reference': (x) => (dockerReference = goString(x)) });
  return {
    dockerManifestDigest: digestString,
    dockerReference,
    ...(creator !== undefined ? { creator } : {}),
    ...(timestamp !== undefined ? { timestamp } : {}),
  };
}

/** Checks applied to a payload once its signature is verified; each throws to reject. */
export interface PayloadRules {
  validateManifestDigest(digest: string): void | Promise<void>;
  validateDockerReference(reference: string): void | Promise<void>;
}

/**
 * containers/image `VerifySigstorePayload`: base64-decode the signature,
 * verify it over the raw payload, then parse the payload and apply the
 * digest rule and the identity rule, in that order.
 */
export async function verifySigstorePayload(
  keys: readonly KeyObject[],
  payload: Uint8Array,
  base64Signature: string,
  rules: PayloadRules,
): Promise<SigstorePayload> {
  let signature: Uint8Array;
  try {
    signature = decodeStdBase64(base64Signature);
  } catch (e) {
    throw new InvalidSignatureError(`base64 decoding: ${(e as Error).message}`);
  }
  verifyPayloadSignature(keys, payload, signature);
  const parsed = parseSigstorePayload(payload);
  await rules.validateManifestDigest(parsed.dockerManifestDigest);
  await rules.validateDockerReference(parsed.dockerReference);
  return parsed;
}

/** Input of `createSigstorePayload`. */
export interface PayloadClaims {
  readonly manifestDigest: string;
  /** What the signature vouches for: cosign writes the repository, containers/image the full reference. */
  readonly dockerReference: string;
  /** cosign's `-a key=value` annotations; null (cosign's default) when absent. */
  readonly optional?: Readonly<Record<string, string | number>> | null;
}

/** A simple-signing payload in cosign's exact byte layout (Go `encoding/json` of its struct). */
export function createSigstorePayload(claims: PayloadClaims): Uint8Array {
  parseDigest(claims.manifestDigest);
  const optional = claims.optional ?? null;
  const text =
    `{"critical":{"identity":{"docker-reference":${goJson(claims.dockerReference)}},` +
    `"image":{"docker-manifest-digest":${goJson(claims.manifestDigest)}},` +
    `"type":${goJson(SIGSTORE_PAYLOAD_TYPE)}},"optional":${optional === null ? 'null' : goJsonObject(optional)}}`;
  return utf8Encoder.encode(text);
}

/** Go's `json.Marshal` of a string: JSON with `<`, `>`, `&`, U+2028 and U+2029 escaped. */
function goJson(s: string): string {
  return JSON.stringify(s).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Go marshals map keys in sorted order. */
function goJsonObject(o: Readonly<Record<string, string | number>>): string {
  const keys = Object.keys(o).sort();
  return `{${keys.map((k) => `${goJson(k)}:${typeof o[k] === 'number' ? String(o[k]) : goJson(String(o[k]))}`).join(',')}}`;
}

/** Signs `payload` as cosign does (SHA-256; ECDSA in DER) and returns the standard base64 annotation value. */
export function signPayload(privateKey: KeyObject, payload: Uint8Array): string {
  let sig: Buffer;
  switch (privateKey.asymmetricKeyType) {
    case 'ec':
      sig = cryptoSign('sha256', payload, { key: privateKey, dsaEncoding: 'der' });
      break;
    case 'rsa':
      sig = cryptoSign('sha256', payload, privateKey);
      break;
    case 'ed25519':
      sig = cryptoSign(null, payload, privateKey);
      break;
    default:
      throw new InvalidPublicKeyError(`cannot sign with a ${privateKey.asymmetricKeyType ?? 'unknown'} key`);
  }
  return sig.toString('base64');
}

/** A complete sigstore signature attachment for `claims`, signed with `privateKey`. */
export function createSigstoreSignature(
  privateKey: KeyObject,
  claims: PayloadClaims,
): Extract<UntrustedSignature, { format: 'sigstore' }> {
  const payload = createSigstorePayload(claims);
  return {
    format: 'sigstore',
    mimeType: SIGSTORE_SIGNATURE_MIME_TYPE,
    payload,
    annotations: { [SIGSTORE_SIGNATURE_ANNOTATION]: signPayload(privateKey, payload) },
  };
}

/** The tag under which sigstore attachments of `digest` are stored: `sha256-<hex>.sig`. */
export function sigstoreAttachmentTag(digest: string): string {
  parseDigest(digest);
  return `${digest.replace(':', '-')}.sig`;
}
