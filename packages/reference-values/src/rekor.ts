// Offline check of a Rekor signed entry timestamp (SET), the `dev.sigstore.cosign/bundle` annotation
// cosign attaches to a key-based signature that it uploaded to the transparency log:
//
//   {"SignedEntryTimestamp": "<std b64 ECDSA DER>",
//    "Payload": {"body": "<std b64 hashedrekord JSON>", "integratedTime": N, "logIndex": N, "logID": "<hex>"}}
//
// The SET is Rekor's signature over the RFC 8785 form of Payload. The body must be a hashedrekord
// v0.0.1 entry naming the same signing key, the same signature bytes and the SHA-256 of the same
// payload. This proves Rekor logged this signature at `integratedTime`; inclusion in the current tree
// (an online Merkle proof) is not checked.
import { createHash, createPublicKey, type KeyObject, verify } from 'node:crypto';
import { canonicalJson, decodeBase64StdStrict } from '@broker/protocol';
import { ArtifactError } from './errors.js';

export const SIGSTORE_BUNDLE_ANNOTATION = 'dev.sigstore.cosign/bundle';
export const MAX_BUNDLE_BYTES = 64 * 1024;
const HASHEDREKORD_API_VERSION = '0.0.1';

function fail(why: string): never {
  throw new ArtifactError(`Rekor SET: ${why}`);
}

function object(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) fail(`${what} is not a JSON object`);
  return v as Record<string, unknown>;
}

/** The members must be exactly `names`, as containers/image's strict decoder demands. */
function exactMembers(o: Record<string, unknown>, names: readonly string[], what: string): void {
  const keys = Object.keys(o);
  for (const k of keys)
    if (!names.includes(k)) fail(`${what} has an unknown member ${JSON.stringify(k.slice(0, 32))}`);
  for (const n of names) if (!Object.hasOwn(o, n)) fail(`${what} has no member ${n}`);
}

function base64(v: unknown, what: string): Buffer {
  if (typeof v !== 'string') fail(`${what} is not a string`);
  const bytes = decodeBase64StdStrict(v);
  if (bytes === null) fail(`${what} is not standard base64`);
  return Buffer.from(bytes);
}

function integer(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    fail(`${what} is not a non-negative integer`);
  return v;
}

function parseJsonObject(text: string | Buffer, what: string): Record<string, unknown> {
  try {
    return object(JSON.parse(text.toString()), what);
  } catch (e) {
    if (e instanceof ArtifactError) throw e;
    return fail(`${what} is not JSON`);
  }
}

/** DER of the single PEM block in `pem` (a public key or certificate), or undefined. */
function pemDer(pem: string): Buffer | undefined {
  const m = /^\s*-----BEGIN ([A-Z ]+)-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END \1-----\s*$/.exec(pem);
  if (m === null) return undefined;
  const der = decodeBase64StdStrict((m[2] ?? '').replace(/[\r\n]/g, ''));
  return der === null ? undefined : Buffer.from(der);
}

/** Rekor's log ID: hex SHA-256 of the log's public key (DER SubjectPublicKeyInfo). */
export function rekorLogId(rekorKey: KeyObject): string {
  return createHash('sha256')
    .update(rekorKey.export({ type: 'spki', format: 'der' }))
    .digest('hex');
}

/** Reads Rekor's public key (PEM, ECDSA as Rekor uses). */
export function parseRekorPublicKey(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (e) {
    throw new ArtifactError(`Rekor public key is not a PEM public key: ${(e as Error).message}`, {
      cause: e,
    });
  }
  if (key.asymmetricKeyType !== 'ec') {
    throw new ArtifactError(
      `Rekor public key is ${key.asymmetricKeyType ?? 'of an unknown type'}, expected ECDSA`,
    );
  }
  return key;
}

export interface RekorSetInput {
  readonly rekorKey: KeyObject;
  /** The bundle annotation text. */
  readonly bundle: string;
  /** The key that verified the signature. */
  readonly signerKey: KeyObject;
  /** The signature annotation (standard base64). */
  readonly base64Signature: string;
  /** The exact payload bytes that were signed. */
  readonly payload: Uint8Array;
}

/** Verifies the SET and its match with the signature; returns when Rekor integrated the entry. */
export function verifyRekorSet(input: RekorSetInput): Date {
  if (Buffer.byteLength(input.bundle, 'utf8') > MAX_BUNDLE_BYTES)
    fail(`larger than ${MAX_BUNDLE_BYTES} bytes`);
  const set = parseJsonObject(input.bundle, 'bundle');
  exactMembers(set, ['SignedEntryTimestamp', 'Payload'], 'bundle');
  const signature = base64(set.SignedEntryTimestamp, 'SignedEntryTimestamp');
  const payload = object(set.Payload, 'Payload');
  exactMembers(payload, ['body', 'integratedTime', 'logIndex', 'logID'], 'Payload');
  let canonical: string;
  try {
    canonical = canonicalJson(payload);
  } catch (e) {
    throw new ArtifactError(`Rekor SET: Payload cannot be canonicalized: ${(e as Error).message}`, {
      cause: e,
    });
  }
  if (
    !verify('sha256', Buffer.from(canonical, 'utf8'), { key: input.rekorKey, dsaEncoding: 'der' }, signature)
  ) {
    fail('the signature by the Rekor key does not verify');
  }
  // Signed from here on.
  const logId = payload.logID;
  if (typeof logId !== 'string' || logId.toLowerCase() !== rekorLogId(input.rekorKey)) {
    fail('logID is not the ID of the configured Rekor key');
  }
  const integratedTime = integer(payload.integratedTime, 'integratedTime');
  integer(payload.logIndex, 'logIndex');
  const body = parseJsonObject(base64(payload.body, 'body'), 'body');
  if (body.kind !== 'hashedrekord') fail(`entry kind ${JSON.stringify(body.kind)} is not hashedrekord`);
  if (body.apiVersion !== HASHEDREKORD_API_VERSION) {
    fail(`hashedrekord version ${JSON.stringify(body.apiVersion)} is not ${HASHEDREKORD_API_VERSION}`);
  }
  const spec = object(body.spec, 'hashedrekord spec');
  const sig = object(spec.signature, 'hashedrekord signature');
  const publicKey = object(sig.publicKey, 'hashedrekord signature.publicKey');
  const loggedPem = base64(publicKey.content, 'signature.publicKey.content').toString('utf8');
  const loggedDer = pemDer(loggedPem);
  if (loggedDer === undefined) fail('signature.publicKey.content is not one PEM block');
  const signerDer = input.signerKey.export({ type: 'spki', format: 'der' });
  if (!loggedDer.equals(signerDer)) fail('the logged public key is not the key that verified the signature');
  const loggedSignature = base64(sig.content, 'signature.content');
  const presented = decodeBase64StdStrict(input.base64Signature);
  if (presented === null || !loggedSignature.equals(Buffer.from(presented))) {
    fail('the logged signature is not the signature presented');
  }
  const data = object(spec.data, 'hashedrekord data');
  const hash = object(data.hash, 'hashedrekord data.hash');
  if (hash.algorithm !== 'sha256')
    fail(`data.hash.algorithm ${JSON.stringify(hash.algorithm)} is not sha256`);
  const want = createHash('sha256').update(input.payload).digest('hex');
  if (typeof hash.value !== 'string' || hash.value.toLowerCase() !== want) {
    fail('the logged payload hash is not the hash of the signed payload');
  }
  return new Date(integratedTime * 1000);
}
