/**
 * The KBS-flavoured JWE (trustee `kbs/src/jwe`, kbs-types `Response`):
 * flattened JSON without `aad`, A256GCM content encryption whose AAD is the
 * ASCII `protected` string, and a protected header serialized compactly in
 * serde's order (`alg`, `enc`, then the other members sorted by key).
 *
 * The upstream guest does not use the received `protected` string as AAD: it
 * parses the header and serializes it again (`ProtectedHeader::generate_aad`).
 * {@link jweDecrypt} does the same by default, so a JWE that the upstream guest
 * would reject is rejected here too.
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  createSecretKey,
  constants as cryptoConstants,
  diffieHellman,
  generateKeyPairSync,
  type KeyObject,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
} from 'node:crypto';
import { decodeBase64UrlStrict } from './base64.js';
import { JweDecryptionFailed, JweInvalid, JweNotSupported, ProtocolError } from './errors.js';
import { type EcPublicJwk, parseTeePubKey, type RsaPublicJwk, type TeePubKey } from './jwk.js';

/** Flattened JWE JSON as the KBS sends it; every member is base64url without padding. */
export interface Jwe {
  protected: string;
  encrypted_key: string;
  iv: string;
  ciphertext: string;
  tag: string;
}

export const JWE_ALG_ECDH_ES_A256KW = 'ECDH-ES+A256KW';
export const JWE_ALG_RSA_OAEP_256 = 'RSA-OAEP-256';
export const JWE_ALG_RSA1_5 = 'RSA1_5';
export const JWE_ENC_A256GCM = 'A256GCM';

export type JweKeyAlgorithm =
  | typeof JWE_ALG_ECDH_ES_A256KW
  | typeof JWE_ALG_RSA_OAEP_256
  | typeof JWE_ALG_RSA1_5;

/** Key pair flavours, named as the guest's `TeeKeyAlgorithm` (plus RSA1_5 for legacy peers). */
export type TeeKeyAlgorithm = 'ECDH-ES+A256KW-P256' | 'ECDH-ES+A256KW-P521' | 'RSA-OAEP-256' | 'RSA1_5';

const CEK_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const WRAPPED_CEK_BYTES = 40;
/** Upper bound on the base64url `protected` member; real headers are < 400 characters. */
export const MAX_PROTECTED_HEADER_LENGTH = 16 * 1024;
const AES_KW_IV = Buffer.from('A6A6A6A6A6A6A6A6', 'hex');

type KwCurve = 'P-256' | 'P-521';
const KW_CURVES: Record<KwCurve, { size: number; openssl: string; spkiPrefix: Buffer }> = {
  // spkiPrefix: the DER of SubjectPublicKeyInfo {id-ecPublicKey, curve} up to the uncompressed point.
  'P-256': {
    size: 32,
    openssl: 'prime256v1',
    spkiPrefix: Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex'),
  },
  'P-521': {
    size: 66,
    openssl: 'secp521r1',
    spkiPrefix: Buffer.from('30819b301006072a8648ce3d020106052b8104002303818600', 'hex'),
  },
};

/**
 * The public key at (x, y), an already validated point, through PEM: node imports a PEM string in
 * about half the time of a `{ key, format }` object, whose KeyObject and CryptoKey brand checks throw.
 */
function ecPublicKey(crv: KwCurve, x: string, y: string): KeyObject {
  const der = Buffer.concat([
    KW_CURVES[crv].spkiPrefix,
    Buffer.of(4),
    Buffer.from(x, 'base64url'),
    Buffer.from(y, 'base64url'),
  ]);
  const body = der
    .toString('base64')
    .match(/.{1,64}/g)
    ?.join('\n');
  return createPublicKey(`-----BEGIN PUBLIC KEY-----\n${body}\n-----END PUBLIC KEY-----\n`);
}

function isKwCurve(s: unknown): s is KwCurve {
  return s === 'P-256' || s === 'P-521';
}

// ---- primitives -------------------------------------------------------------

/** NIST SP 800-56A Concat KDF with SHA-256 (RFC 7518 §4.6.2); the KBS uses empty PartyUInfo/PartyVInfo. */
export function concatKdf(
  z: Uint8Array,
  algorithmId: string,
  keyBits: number,
  partyUInfo: Uint8Array = new Uint8Array(0),
  partyVInfo: Uint8Array = new Uint8Array(0),
): Buffer {
  const alg = Buffer.from(algorithmId, 'ascii');
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  const keyBytes = keyBits / 8;
  const rounds = Math.ceil(keyBytes / 32);
  const parts: Buffer[] = [];
  for (let i = 1; i <= rounds; i++) {
    parts.push(
      createHash('sha256')
        .update(u32(i))
        .update(z)
        .update(u32(alg.length))
        .update(alg)
        .update(u32(partyUInfo.length))
        .update(partyUInfo)
        .update(u32(partyVInfo.length))
        .update(partyVInfo)
        .update(u32(keyBits))
        .digest(),
    );
  }
  return Buffer.concat(parts).subarray(0, keyBytes);
}

/**
 * The AES key as a KeyObject: handed a Buffer, node's cipher constructors first try it as a KeyObject
 * and a CryptoKey by brand checks that throw and catch (tens of µs); making the KeyObject costs ~2 µs.
 */
function aesKey(key: Uint8Array): KeyObject {
  return createSecretKey(key);
}

function aesKeyWrap(kek: Uint8Array, key: Uint8Array): Buffer {
  const c = createCipheriv('id-aes256-wrap', aesKey(kek), AES_KW_IV);
  return Buffer.concat([c.update(key), c.final()]);
}

function aesKeyUnwrap(kek: Uint8Array, wrapped: Uint8Array): Buffer {
  try {
    const d = createDecipheriv('id-aes256-wrap', aesKey(kek), AES_KW_IV);
    return Buffer.concat([d.update(wrapped), d.final()]);
  } catch {
    throw new JweDecryptionFailed();
  }
}

function gcmEncrypt(cek: Uint8Array, iv: Uint8Array, aad: Uint8Array, plaintext: Uint8Array) {
  const c = createCipheriv('aes-256-gcm', aesKey(cek), iv, { authTagLength: TAG_BYTES });
  c.setAAD(aad);
  const ciphertext = Buffer.concat([c.update(plaintext), c.final()]);
  return { ciphertext, tag: c.getAuthTag() };
}

function gcmDecrypt(
  cek: Uint8Array,
  iv: Uint8Array,
  aad: Uint8Array,
  ciphertext: Uint8Array,
  tag: Uint8Array,
) {
  try {
    const d = createDecipheriv('aes-256-gcm', aesKey(cek), iv, { authTagLength: TAG_BYTES });
    d.setAAD(aad);
    d.setAuthTag(tag);
    return Buffer.concat([d.update(ciphertext), d.final()]);
  } catch {
    throw new JweDecryptionFailed();
  }
}

// ---- protected header -------------------------------------------------------

function utf8Compare(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

const LONE_SURROGATE_RE = /\p{Surrogate}/u;

/**
 * serde_json's compact output for a parsed value: objects are BTreeMaps, so
 * keys come out sorted by their UTF-8 bytes; string escaping equals
 * JSON.stringify for well-formed strings.
 */
function serdeSerialize(v: unknown, depth: number): string {
  if (depth > 32) throw new JweInvalid('JWE protected header nested too deeply');
  if (typeof v === 'string') {
    if (LONE_SURROGATE_RE.test(v)) throw new JweInvalid('JWE protected header has a lone surrogate');
    return JSON.stringify(v);
  }
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map((x) => serdeSerialize(x, depth + 1)).join(',')}]`;
  if (typeof v === 'object') {
    const obj = v as Record<string, unknown>;
    const keys = Object.keys(obj).sort(utf8Compare);
    return `{${keys.map((k) => `${serdeSerialize(k, depth + 1)}:${serdeSerialize(obj[k], depth + 1)}`).join(',')}}`;
  }
  throw new JweInvalid('JWE protected header holds a non-JSON value');
}

/** kbs-types `ProtectedHeader`: `alg`, `enc`, then the flattened other members. */
export interface ProtectedHeader {
  alg: string;
  enc: string;
  [member: string]: unknown;
}

/** Compact JSON of a protected header exactly as kbs-types (serde) writes it. */
export function serializeProtectedHeader(header: ProtectedHeader): string {
  const { alg, enc, ...rest } = header;
  if (typeof alg !== 'string' || typeof enc !== 'string') throw new JweInvalid('alg and enc must be strings');
  const others = Object.keys(rest)
    .sort(utf8Compare)
    .map((k) => `,${serdeSerialize(k, 0)}:${serdeSerialize(rest[k], 0)}`)
    .join('');
  return `{"alg":${serdeSerialize(alg, 0)},"enc":${serdeSerialize(enc, 0)}${others}}`;
}

/** Decode and parse the `protected` member (base64url JSON object with string `alg` and `enc`). */
export function parseProtectedHeader(protectedB64: string): ProtectedHeader {
  if (protectedB64.length > MAX_PROTECTED_HEADER_LENGTH)
    throw new JweInvalid('JWE protected header too long');
  const bytes = decodeBase64UrlStrict(protectedB64);
  if (bytes === null) throw new JweInvalid('JWE protected header is not base64url');
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw new JweInvalid('JWE protected header is not UTF-8 JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new JweInvalid('JWE protected header is not a JSON object');
  }
  const h = parsed as Record<string, unknown>;
  if (typeof h.alg !== 'string') throw new JweInvalid('JWE protected header: alg must be a string');
  if (typeof h.enc !== 'string') throw new JweInvalid('JWE protected header: enc must be a string');
  return h as ProtectedHeader;
}

/** The AAD the upstream guest computes: base64url of the re-serialized header, as ASCII bytes. */
export function upstreamAad(header: ProtectedHeader): Buffer {
  return Buffer.from(Buffer.from(serializeProtectedHeader(header), 'utf8').toString('base64url'), 'ascii');
}

// ---- encryption (KBS side) --------------------------------------------------

function finish(header: string, encryptedKey: Uint8Array, cek: Buffer, plaintext: Uint8Array): Jwe {
  const protectedB64 = Buffer.from(header, 'utf8').toString('base64url');
  const iv = randomBytes(IV_BYTES);
  const { ciphertext, tag } = gcmEncrypt(cek, iv, Buffer.from(protectedB64, 'ascii'), plaintext);
  cek.fill(0);
  return {
    protected: protectedB64,
    encrypted_key: Buffer.from(encryptedKey).toString('base64url'),
    iv: iv.toString('base64url'),
    ciphertext: ciphertext.toString('base64url'),
    tag: tag.toString('base64url'),
  };
}

function encryptEcdh(plaintext: Uint8Array, recipient: EcPublicJwk): Jwe {
  const crv = recipient.crv;
  if (!isKwCurve(crv))
    throw new JweNotSupported(`curve ${crv} and algorithm ${recipient.alg} is not supported`);
  const recipientKey = createPublicKey({
    key: { kty: 'EC', crv, x: recipient.x, y: recipient.y },
    format: 'jwk',
  });
  const eph = generateKeyPairSync('ec', { namedCurve: KW_CURVES[crv].openssl });
  const z = diffieHellman({ privateKey: eph.privateKey, publicKey: recipientKey });
  const kek = concatKdf(z, JWE_ALG_ECDH_ES_A256KW, 256);
  z.fill(0);
  const cek = randomBytes(CEK_BYTES);
  const encryptedKey = aesKeyWrap(kek, cek);
  kek.fill(0);
  const epk = eph.publicKey.export({ format: 'jwk' });
  const header = serializeProtectedHeader({
    alg: JWE_ALG_ECDH_ES_A256KW,
    enc: JWE_ENC_A256GCM,
    epk: { crv, kty: 'EC', x: epk.x, y: epk.y },
  });
  return finish(header, encryptedKey, cek, plaintext);
}

function encryptRsaOaep(plaintext: Uint8Array, recipient: RsaPublicJwk): Jwe {
  const key = createPublicKey({ key: { kty: 'RSA', n: recipient.n, e: recipient.e }, format: 'jwk' });
  const cek = randomBytes(CEK_BYTES);
  const encryptedKey = publicEncrypt(
    { key, padding: cryptoConstants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
    cek,
  );
  const header = serializeProtectedHeader({ alg: JWE_ALG_RSA_OAEP_256, enc: JWE_ENC_A256GCM });
  return finish(header, encryptedKey, cek, plaintext);
}

/**
 * Encrypt a resource to the TEE key, as trustee's KBS does. The key selects
 * the algorithm: EC P-256/P-521 with alg `ECDH-ES+A256KW`, or RSA with
 * `RSA-OAEP-256`. RSA1_5 is refused here (decryption only).
 * @throws JweNotSupported for other key/alg combinations
 * @throws ProtocolError when `recipient` is not a valid TeePubKey
 */
export function jweEncrypt(plaintext: Uint8Array, recipient: TeePubKey): Jwe {
  const key = parseTeePubKey(recipient);
  if (key.kty === 'EC') {
    if (key.alg !== JWE_ALG_ECDH_ES_A256KW) {
      throw new JweNotSupported(`curve ${key.crv} and algorithm ${key.alg} is not supported`);
    }
    return encryptEcdh(plaintext, key);
  }
  if (key.alg === JWE_ALG_RSA_OAEP_256) return encryptRsaOaep(plaintext, key);
  if (key.alg === JWE_ALG_RSA1_5) {
    throw new JweNotSupported('RSA1_5 is deprecated and supported for decryption only');
  }
  throw new JweNotSupported(`algorithm ${key.alg} is not supported`);
}

// ---- decryption (guest side) ------------------------------------------------

export interface JweDecryptOptions {
  /**
   * `reserialized-header` (default): AAD from the parsed header serialized
   * again in serde's order, as the upstream guest does. `protected`: RFC 7516
   * AAD from the received `protected` string (and `aad` member), for JWEs
   * made by generic JOSE libraries whose header member order differs.
   */
  aadSource?: 'reserialized-header' | 'protected';
}

function member(obj: Record<string, unknown>, key: string): Buffer {
  const v = obj[key];
  if (typeof v !== 'string') throw new JweInvalid(`JWE member ${key} must be a string`);
  const bytes = decodeBase64UrlStrict(v);
  if (bytes === null) throw new JweInvalid(`JWE member ${key} is not base64url without padding`);
  return bytes;
}

function ecCurveOf(key: KeyObject): KwCurve | null {
  if (key.asymmetricKeyType !== 'ec') return null;
  const named = key.asymmetricKeyDetails?.namedCurve;
  if (named === 'prime256v1') return 'P-256';
  if (named === 'secp521r1') return 'P-521';
  return null;
}

function unwrapEcdh(header: ProtectedHeader, privateKey: KeyObject, wrapped: Buffer): Buffer {
  const curve = ecCurveOf(privateKey);
  if (curve === null) throw new JweNotSupported('ECDH-ES+A256KW needs a P-256 or P-521 private key');
  const epk = header.epk;
  if (typeof epk !== 'object' || epk === null || Array.isArray(epk)) {
    throw new JweInvalid('JWE protected header: missing epk');
  }
  const { crv, x, y } = epk as Record<string, unknown>;
  if (typeof crv !== 'string') throw new JweInvalid('JWE protected header: epk.crv must be a string');
  if (typeof x !== 'string') throw new JweInvalid('JWE protected header: epk.x must be a string');
  if (typeof y !== 'string') throw new JweInvalid('JWE protected header: epk.y must be a string');
  if (crv !== curve) throw new JweNotSupported(`unmatched curve: ${crv.slice(0, 16)}`);
  let epkKey: TeePubKey;
  try {
    epkKey = parseTeePubKey({ kty: 'EC', crv, alg: JWE_ALG_ECDH_ES_A256KW, x, y }, 'epk');
  } catch (e) {
    if (e instanceof ProtocolError) throw new JweInvalid(`JWE protected header: ${e.message}`);
    throw e;
  }
  if (epkKey.kty !== 'EC') throw new JweInvalid('JWE protected header: epk is not an EC key');
  if (wrapped.length !== WRAPPED_CEK_BYTES) throw new JweDecryptionFailed();
  const z = diffieHellman({ privateKey, publicKey: ecPublicKey(curve, epkKey.x, epkKey.y) });
  const kek = concatKdf(z, JWE_ALG_ECDH_ES_A256KW, 256);
  z.fill(0);
  try {
    return aesKeyUnwrap(kek, wrapped);
  } finally {
    kek.fill(0);
  }
}

function requireRsa(privateKey: KeyObject, alg: string): void {
  if (privateKey.asymmetricKeyType !== 'rsa') throw new JweNotSupported(`${alg} needs an RSA private key`);
}

function unwrapRsa(alg: string, privateKey: KeyObject, wrapped: Buffer): Buffer {
  requireRsa(privateKey, alg);
  if (alg === JWE_ALG_RSA_OAEP_256) {
    try {
      return privateDecrypt(
        { key: privateKey, padding: cryptoConstants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
        wrapped,
      );
    } catch {
      throw new JweDecryptionFailed();
    }
  }
  // RSA1_5: Node's OpenSSL (3.2+) applies implicit rejection, returning a
  // pseudo-random message for bad padding instead of an error. A wrong-length
  // result is replaced by a random CEK (RFC 7516 §11.5) so that every padding
  // failure ends the same way: at the GCM tag check.
  let cek: Buffer;
  try {
    cek = privateDecrypt({ key: privateKey, padding: cryptoConstants.RSA_PKCS1_PADDING }, wrapped);
  } catch {
    cek = randomBytes(CEK_BYTES);
  }
  return cek.length === CEK_BYTES ? cek : randomBytes(CEK_BYTES);
}

/**
 * Decrypt a KBS JWE with the TEE private key (guest side). Supports
 * `ECDH-ES+A256KW` (P-256, P-521), `RSA-OAEP-256` and `RSA1_5`, content
 * encryption `A256GCM` only.
 * @throws JweInvalid malformed JWE JSON or header
 * @throws JweNotSupported unknown alg/enc, or a key of the wrong type/curve
 * @throws JweDecryptionFailed wrong key or any tampering
 */
export function jweDecrypt(jwe: unknown, privateKey: KeyObject, options: JweDecryptOptions = {}): Buffer {
  if (typeof jwe !== 'object' || jwe === null || Array.isArray(jwe))
    throw new JweInvalid('JWE must be a JSON object');
  if (privateKey.type !== 'private') throw new TypeError('privateKey must be a private KeyObject');
  const obj = jwe as Record<string, unknown>;
  if (typeof obj.protected !== 'string') throw new JweInvalid('JWE member protected must be a string');
  const header = parseProtectedHeader(obj.protected);
  const encryptedKey = member(obj, 'encrypted_key');
  const iv = member(obj, 'iv');
  const ciphertext = member(obj, 'ciphertext');
  const tag = member(obj, 'tag');
  if (header.enc !== JWE_ENC_A256GCM)
    throw new JweNotSupported(`content encryption ${header.enc.slice(0, 32)} is not supported`);
  if (iv.length !== IV_BYTES) throw new JweInvalid(`JWE iv must be ${IV_BYTES} bytes`);
  if (tag.length !== TAG_BYTES) throw new JweInvalid(`JWE tag must be ${TAG_BYTES} bytes`);

  let aad: Buffer;
  if ((options.aadSource ?? 'reserialized-header') === 'reserialized-header') {
    aad = upstreamAad(header);
  } else {
    let text = obj.protected;
    if (obj.aad !== undefined) {
      if (typeof obj.aad !== 'string' || decodeBase64UrlStrict(obj.aad) === null) {
        throw new JweInvalid('JWE member aad is not base64url without padding');
      }
      text = `${text}.${obj.aad}`;
    }
    aad = Buffer.from(text, 'ascii');
  }

  let cek: Buffer;
  switch (header.alg) {
    case JWE_ALG_ECDH_ES_A256KW:
      cek = unwrapEcdh(header, privateKey, encryptedKey);
      break;
    case JWE_ALG_RSA_OAEP_256:
    case JWE_ALG_RSA1_5:
      cek = unwrapRsa(header.alg, privateKey, encryptedKey);
      break;
    default:
      throw new JweNotSupported(`unsupported algorithm: ${header.alg.slice(0, 32)}`);
  }
  if (cek.length !== CEK_BYTES) throw new JweDecryptionFailed();
  try {
    return gcmDecrypt(cek, iv, aad, ciphertext, tag);
  } finally {
    cek.fill(0);
  }
}

// ---- TEE key pairs (guest side) ---------------------------------------------

export interface TeeKeyPair {
  privateKey: KeyObject;
  publicJwk: TeePubKey;
}

/** RSA modulus size of the guest's RSA TEE keys (`RSA_PUBKEY_LENGTH`). */
export const TEE_RSA_MODULUS_BITS = 2048;

/**
 * The public `tee-pubkey` JWK for a TEE private key, with `alg` set the way
 * the guest does: `ECDH-ES+A256KW` for EC keys, `RSA-OAEP-256` for RSA unless
 * `rsaAlg` says otherwise.
 */
export function teePubKeyFromPrivateKey(
  privateKey: KeyObject,
  rsaAlg: typeof JWE_ALG_RSA_OAEP_256 | typeof JWE_ALG_RSA1_5 = JWE_ALG_RSA_OAEP_256,
): TeePubKey {
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' });
  if (jwk.kty === 'EC') {
    const crv = jwk.crv;
    if (!isKwCurve(crv)) throw new JweNotSupported(`TEE keys must be P-256 or P-521, not ${crv}`);
    return parseTeePubKey({ kty: 'EC', crv, alg: JWE_ALG_ECDH_ES_A256KW, x: jwk.x, y: jwk.y });
  }
  if (jwk.kty === 'RSA') return parseTeePubKey({ kty: 'RSA', alg: rsaAlg, n: jwk.n, e: jwk.e });
  throw new JweNotSupported(`TEE keys must be EC or RSA, not ${String(jwk.kty)}`);
}

/** A fresh TEE key pair; the default of the guest is `ECDH-ES+A256KW-P256`. */
export function generateTeeKeyPair(alg: TeeKeyAlgorithm = 'ECDH-ES+A256KW-P256'): TeeKeyPair {
  switch (alg) {
    case 'ECDH-ES+A256KW-P256':
    case 'ECDH-ES+A256KW-P521': {
      const { privateKey } = generateKeyPairSync('ec', {
        namedCurve: alg === 'ECDH-ES+A256KW-P256' ? 'prime256v1' : 'secp521r1',
      });
      return { privateKey, publicJwk: teePubKeyFromPrivateKey(privateKey) };
    }
    case 'RSA-OAEP-256':
    case 'RSA1_5': {
      const { privateKey } = generateKeyPairSync('rsa', {
        modulusLength: TEE_RSA_MODULUS_BITS,
        publicExponent: 65537,
      });
      return { privateKey, publicJwk: teePubKeyFromPrivateKey(privateKey, alg) };
    }
    default:
      throw new JweNotSupported(`unknown TEE key algorithm ${String(alg)}`);
  }
}

/**
 * Load a TEE private key from PEM as `kbs-client --tee-key-file` does
 * (PKCS#1 RSA or PKCS#8 EC P-256/P-521).
 */
export function teePrivateKeyFromPem(pem: string | Uint8Array): KeyObject {
  const key = createPrivateKey({ key: typeof pem === 'string' ? pem : Buffer.from(pem), format: 'pem' });
  if (key.asymmetricKeyType === 'rsa' || ecCurveOf(key) !== null) return key;
  throw new JweNotSupported('TEE private key must be RSA or EC P-256/P-521');
}
