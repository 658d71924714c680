/**
 * The sealed-secret pointer: `sealed.` + a compact JWS (ES256) whose payload
 * is the secret's JSON. Parsing follows guest-components'
 * `Secret::from_signed_base64_string` step by step, because both the
 * outcome and the wording of each refusal are observable:
 *
 * - verifying (the default): strip `sealed.` the way `trim_start_matches`
 *   does (every leading repetition), parse exactly three `.`-pieces as
 *   jose-jws' `Flattened` does, require `kid` and `alg`, resolve the key,
 *   require ES256 and a P-256 key, verify the raw r‖s signature over
 *   `<header>.<payload>`, then parse the payload;
 * - `skip_sealed_secret_verification`: the whole text (not stripped) must be
 *   exactly four `.`-pieces, and the third is the payload; the header and
 *   signature pieces are not looked at (kata CI's `sealed.fakeheader.….fakesignature`).
 */
import { type KeyObject, sign as signBytes, verify as verifyBytes } from 'node:crypto';
import { decodeBase64StdStrict, decodeBase64UrlStrict } from '@broker/protocol';
import {
  SealedSecretParseFailed,
  SealFailed,
  SignatureVerificationFailed,
  SigningKeyError,
  shown,
} from './errors.js';
import { type JsonMap, parseStrictJson } from './json.js';
import { parseJwkBytes, signingKeyFromJwk, verificationKeyFromJwk } from './jwk.js';
import { parsePayload, type SealedSecretPayload, serializePayload } from './payload.js';

export const SEALED_SECRET_PREFIX = 'sealed.';
/**
 * Largest pointer accepted: the size limit of a Kubernetes Secret, so any
 * pointer that fits in a Secret is read. Upstream sets no limit.
 */
export const MAX_SEALED_SECRET_BYTES = 1024 * 1024;
/** The only signature algorithm upstream verifies. */
export const SEALED_SECRET_ALG = 'ES256';

/** jose-jwa's `Signing` names: an `alg` outside this set makes the header unparsable. */
const KNOWN_ALGS: ReadonlySet<string> = new Set([
  'EdDSA',
  'ES256',
  'ES256K',
  'ES384',
  'ES512',
  'HS256',
  'HS384',
  'HS512',
  'PS256',
  'PS384',
  'PS512',
  'RS256',
  'RS384',
  'RS512',
  'none',
]);

const FAILED_TO_PARSE_JWS = 'Failed to parse JWS';
const MALFORMED_PAYLOAD = 'malformed input sealed secret format (json deserialization failed)';

/** A parsed, not yet verified, signed pointer. */
export interface SignedSealedSecret {
  readonly kind: 'signed';
  /** The protected header as sent (members other than `alg` and `kid` are ignored, as upstream). */
  readonly header: JsonMap;
  readonly alg: string;
  readonly kid: string;
  /** `<header b64>.<payload b64>`: the bytes the signature covers. */
  readonly signingInput: string;
  readonly signature: Buffer;
  /** The decoded payload; null when the payload piece is empty. */
  readonly payload: Buffer | null;
}

/** A pointer read in skip-verification mode: nothing about it is authenticated. */
export interface UnsignedSealedSecret {
  readonly kind: 'unsigned';
  readonly payload: SealedSecretPayload;
}

export type ParsedSealedSecret = SignedSealedSecret | UnsignedSealedSecret;

export interface ParseOptions {
  /** `skip_sealed_secret_verification`: read the 4-piece form without a signature. */
  readonly skipVerification?: boolean;
}

/** The pointer text: at most `MAX_SEALED_SECRET_BYTES`, UTF-8. */
function pointerText(input: string | Uint8Array): string {
  const size = typeof input === 'string' ? Buffer.byteLength(input) : input.byteLength;
  if (size > MAX_SEALED_SECRET_BYTES) {
    throw new SealedSecretParseFailed(`sealed secret is larger than ${MAX_SEALED_SECRET_BYTES} bytes`);
  }
  if (typeof input === 'string') return input;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(input);
  } catch {
    throw new SealedSecretParseFailed('Secret string must be UTF-8');
  }
}

/** Rust's `trim_start_matches("sealed.")`: every leading repetition goes. */
export function stripSealedPrefix(text: string): string {
  let i = 0;
  while (text.startsWith(SEALED_SECRET_PREFIX, i)) i += SEALED_SECRET_PREFIX.length;
  return text.slice(i);
}

function isB64Url(v: unknown): boolean {
  return typeof v === 'string' && decodeBase64UrlStrict(v) !== null;
}

/** jose-jws' `Protected` header members and their types; unknown members are ignored. */
function headerTypesOk(h: JsonMap): boolean {
  const optional = (key: string, ok: (v: unknown) => boolean) =>
    !Object.hasOwn(h, key) || h[key] === null || ok(h[key]);
  const isString = (v: unknown) => typeof v === 'string';
  return (
    optional('alg', (v) => typeof v === 'string' && KNOWN_ALGS.has(v)) &&
    optional('kid', isString) &&
    optional('typ', isString) &&
    optional('cty', isString) &&
    optional('crit', (v) => Array.isArray(v) && v.every(isString)) &&
    optional('nonce', isB64Url) &&
    optional('x5t', isB64Url) &&
    optional('x5t#S256', isB64Url) &&
    optional(
      'x5c',
      (v) => Array.isArray(v) && v.every((c) => typeof c === 'string' && decodeBase64StdStrict(c) !== null),
    ) &&
    optional('jwk', (v) => typeof v === 'object' && !Array.isArray(v)) &&
    (!Object.hasOwn(h, 'b64') || typeof h.b64 === 'boolean')
  );
}

function parseSigned(text: string): SignedSealedSecret {
  const jws = stripSealedPrefix(text);
  const parts = jws.split('.');
  if (parts.length !== 3) throw new SealedSecretParseFailed(FAILED_TO_PARSE_JWS);
  const [h, p, s] = parts as [string, string, string];
  const headerBytes = decodeBase64UrlStrict(h);
  const payload = p === '' ? null : decodeBase64UrlStrict(p);
  const signature = decodeBase64UrlStrict(s);
  if (headerBytes === null || (p !== '' && payload === null) || signature === null) {
    throw new SealedSecretParseFailed(FAILED_TO_PARSE_JWS);
  }
  let header: unknown;
  try {
    header = parseStrictJson(new TextDecoder('utf-8', { fatal: true }).decode(headerBytes));
  } catch (cause) {
    throw new SealedSecretParseFailed(FAILED_TO_PARSE_JWS, { cause });
  }
  if (
    typeof header !== 'object' ||
    header === null ||
    Array.isArray(header) ||
    !headerTypesOk(header as JsonMap)
  ) {
    throw new SealedSecretParseFailed(FAILED_TO_PARSE_JWS);
  }
  const { kid, alg } = header as { kid?: unknown; alg?: unknown };
  if (typeof kid !== 'string') throw new SealedSecretParseFailed('Could not find kid');
  if (typeof alg !== 'string') throw new SealedSecretParseFailed('Could not get algorithm');
  return {
    kind: 'signed',
    header: header as JsonMap,
    alg,
    kid,
    signingInput: `${h}.${p}`,
    signature,
    payload,
  };
}

function parseUnsigned(text: string): UnsignedSealedSecret {
  const sections = text.split('.');
  if (sections.length !== 4) throw new SealedSecretParseFailed('malformed input sealed secret');
  const body = decodeBase64UrlStrict(sections[2] as string);
  if (body === null) {
    throw new SealedSecretParseFailed('failed to decode secret body as base64 (URL-safe without padding)');
  }
  return { kind: 'unsigned', payload: payloadOf(body) };
}

function payloadOf(bytes: Uint8Array): SealedSecretPayload {
  try {
    return parsePayload(bytes);
  } catch (cause) {
    throw new SealedSecretParseFailed(MALFORMED_PAYLOAD, { cause });
  }
}

/**
 * Parses a pointer (text or bytes, `sealed.` included). Signed pointers come
 * back unverified: pass them to `verifySealedSecret`. Throws
 * `SealedSecretParseFailed` with upstream's reason.
 */
export function parseSealedSecret(
  input: string | Uint8Array,
  options: ParseOptions = {},
): ParsedSealedSecret {
  const text = pointerText(input);
  return options.skipVerification === true ? parseUnsigned(text) : parseSigned(text);
}

/** Where the verification key of a `kid` comes from: JWK bytes (or an already parsed JWK). */
export type ResolveKey = (kid: string) => Promise<Uint8Array | string | JsonMap>;

/**
 * Verifies a signed pointer and returns its payload. `alg` must be ES256
 * ("Signing key error: JWS algorithm must be ES256"), the key a P-256 JWK,
 * the signature 64 bytes r‖s that verifies ("Signature Error: signature
 * error"). `resolveKey` runs only for a header that can pass: upstream
 * resolves the key before looking at `alg`, which costs a KBS request for a
 * pointer it will refuse anyway.
 */
export async function verifySealedSecret(
  parsed: SignedSealedSecret,
  resolveKey: ResolveKey,
): Promise<SealedSecretPayload> {
  if (parsed.alg !== SEALED_SECRET_ALG) throw new SigningKeyError('JWS algorithm must be ES256');
  if (parsed.signature.length !== 64) throw new SignatureVerificationFailed();
  const keyMaterial = await resolveKey(parsed.kid);
  const jwk =
    typeof keyMaterial === 'string' || keyMaterial instanceof Uint8Array
      ? parseJwkBytes(keyMaterial)
      : keyMaterial;
  const key = verificationKeyFromJwk(jwk);
  if (!es256Verify(key, parsed.signingInput, parsed.signature)) throw new SignatureVerificationFailed();
  if (parsed.payload === null) throw new SealedSecretParseFailed('Could not find JWS Payload');
  return payloadOf(parsed.payload);
}

function es256Verify(key: KeyObject, signingInput: string, signature: Buffer): boolean {
  try {
    return verifyBytes(
      'sha256',
      Buffer.from(signingInput, 'ascii'),
      { key, dsaEncoding: 'ieee-p1363' },
      signature,
    );
  } catch {
    // r or s out of range: p256 refuses it as a malformed signature.
    return false;
  }
}

/**
 * Parses and, unless `skipVerification`, verifies a pointer: upstream's
 * `from_signed_base64_string`. Returns the payload; the version is checked
 * by the unsealing step, as upstream.
 */
export async function readSealedSecret(
  input: string | Uint8Array,
  options: ParseOptions & { readonly resolveKey: ResolveKey },
): Promise<SealedSecretPayload> {
  const parsed = parseSealedSecret(input, options);
  return parsed.kind === 'unsigned' ? parsed.payload : verifySealedSecret(parsed, options.resolveKey);
}

export interface SealOptions {
  /** The `kid` written in the header: a `kbs:///…` URI of the public JWK, or a key file name. */
  readonly kid: string;
  /** The private P-256 JWK (with `d`). */
  readonly privateJwk: unknown;
}

/**
 * Signs a payload into a pointer, byte for byte as upstream's
 * `to_signed_base64_string`: header `{"alg":"ES256","kid":…}`, the compact
 * payload JSON, an ES256 signature as raw r‖s, all base64url without
 * padding, behind `sealed.`.
 */
export function sealSecret(payload: SealedSecretPayload, options: SealOptions): string {
  if (typeof options.kid !== 'string' || options.kid === '') throw new SealFailed('the signing kid is empty');
  const key = signingKeyFromJwk(options.privateJwk);
  const header = Buffer.from(JSON.stringify({ alg: SEALED_SECRET_ALG, kid: options.kid })).toString(
    'base64url',
  );
  const body = Buffer.from(serializePayload(payload)).toString('base64url');
  const signingInput = `${header}.${body}`;
  const signature = signBytes('sha256', Buffer.from(signingInput, 'ascii'), {
    key,
    dsaEncoding: 'ieee-p1363',
  });
  const pointer = `${SEALED_SECRET_PREFIX}${signingInput}.${signature.toString('base64url')}`;
  if (Buffer.byteLength(pointer) > MAX_SEALED_SECRET_BYTES) {
    throw new SealFailed(`the pointer would be larger than ${MAX_SEALED_SECRET_BYTES} bytes`);
  }
  return pointer;
}

/**
 * The unsigned 4-piece form (`sealed.<header>.<payload>.<signature>` with
 * placeholder header and signature), readable only with
 * `skip_sealed_secret_verification`. The payload is written as given.
 */
export function unsignedSealedSecret(
  payloadJson: string,
  placeholders: { header?: string; signature?: string } = {},
): string {
  const header = placeholders.header ?? 'fakeheader';
  const signature = placeholders.signature ?? 'fakesignature';
  if (header.includes('.') || signature.includes('.'))
    throw new SealFailed('placeholders may not contain `.`');
  return `${SEALED_SECRET_PREFIX}${header}.${Buffer.from(payloadJson).toString('base64url')}.${signature}`;
}

/** What may be logged about a pointer: its `kid` and the resource it names, never its contents. */
export interface PointerSummary {
  readonly kid?: string;
  readonly type?: 'vault' | 'envelope';
  /** `name` of a vault secret, `key_id` of an envelope. */
  readonly resource?: string;
}

/**
 * Reads the `kid` and resource URI of a pointer for logs, without verifying
 * anything (the values are untrusted and shown bounded). Never throws.
 */
export function describeSealedSecret(input: string | Uint8Array): PointerSummary {
  let text: string;
  try {
    text = pointerText(input);
  } catch {
    return {};
  }
  const fromPayload = (payload: SealedSecretPayload): PointerSummary => ({
    type: payload.type,
    resource: shownValue(payload.type === 'vault' ? payload.name : payload.key_id),
  });
  try {
    const signed = parseSigned(text);
    const kid = { kid: shownValue(signed.kid) };
    if (signed.payload === null) return kid;
    try {
      return { ...kid, ...fromPayload(parsePayload(signed.payload)) };
    } catch {
      return kid;
    }
  } catch {
    // Not a JWS: perhaps the unsigned 4-piece form.
  }
  try {
    return fromPayload(parseUnsigned(text).payload);
  } catch {
    return {};
  }
}

function shownValue(v: string): string {
  return shown(v, 512);
}
