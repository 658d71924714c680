import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import {
  algName,
  hashSize,
  MAX_DIGEST_SIZE,
  nodeHashName,
  TPM_ALG,
  TPM_ECC,
  TPMA_OBJECT,
} from './constants.js';
import { TpmParseError, TpmUsageError } from './errors.js';
import { TpmReader, TpmWriter } from './marshal.js';
import { MAX_ECC_KEY_BYTES, MAX_RSA_KEY_BYTES } from './signature.js';

/** Largest TPMT_PUBLIC accepted (an RSA-4096 key with a SHA-512 policy is ~600 bytes). */
export const MAX_PUBLIC_SIZE = 1024;

/** TPMT_SYM_DEF_OBJECT: `algorithm` NULL means none; otherwise key size and mode. */
export interface SymDefObject {
  readonly algorithm: number;
  readonly keyBits?: number;
  readonly mode?: number;
}

/** A scheme (TPMT_RSA_SCHEME, TPMT_ECC_SCHEME, TPMT_KDF_SCHEME, TPMT_KEYEDHASH_SCHEME). */
export interface AlgScheme {
  readonly scheme: number;
  /** The scheme's hash, when it has one. */
  readonly hashAlg?: number;
  /** ECDAA only: the commit count. */
  readonly count?: number;
  /** XOR (keyed hash) only: its KDF. */
  readonly kdf?: number;
}

interface PublicCommon {
  readonly nameAlg: number;
  readonly objectAttributes: number;
  readonly authPolicy: Uint8Array;
}

export interface RsaPublic extends PublicCommon {
  readonly type: typeof TPM_ALG.RSA;
  readonly parameters: {
    readonly symmetric: SymDefObject;
    readonly scheme: AlgScheme;
    readonly keyBits: number;
    /** 0 means the default 65537, as on the wire. */
    readonly exponent: number;
  };
  /** The modulus, big-endian. */
  readonly unique: Uint8Array;
}

export interface EccPublic extends PublicCommon {
  readonly type: typeof TPM_ALG.ECC;
  readonly parameters: {
    readonly symmetric: SymDefObject;
    readonly scheme: AlgScheme;
    readonly curveId: number;
    readonly kdf: AlgScheme;
  };
  readonly unique: { readonly x: Uint8Array; readonly y: Uint8Array };
}

export interface KeyedHashPublic extends PublicCommon {
  readonly type: typeof TPM_ALG.KEYEDHASH;
  readonly parameters: { readonly scheme: AlgScheme };
  readonly unique: Uint8Array;
}

export interface SymCipherPublic extends PublicCommon {
  readonly type: typeof TPM_ALG.SYMCIPHER;
  readonly parameters: { readonly symmetric: SymDefObject };
  readonly unique: Uint8Array;
}

/** TPMT_PUBLIC: the public area of a TPM object. */
export type TpmtPublic = RsaPublic | EccPublic | KeyedHashPublic | SymCipherPublic;

function readHashAlg(r: TpmReader, what: string, allowNull: boolean): number {
  const alg = r.u16(what);
  if (allowNull && alg === TPM_ALG.NULL) return alg;
  if (hashSize(alg) === undefined) r.fail(`${what} ${algName(alg)} is not a hash algorithm`);
  return alg;
}

function readSymDef(r: TpmReader, what: string): SymDefObject {
  const algorithm = r.u16(`${what}.algorithm`);
  if (algorithm === TPM_ALG.NULL) return { algorithm };
  if (algorithm !== TPM_ALG.AES && algorithm !== TPM_ALG.SM4 && algorithm !== TPM_ALG.CAMELLIA) {
    r.fail(`${what}.algorithm ${algName(algorithm)} is not a symmetric block cipher`);
  }
  const keyBits = r.u16(`${what}.keyBits`);
  const mode = r.u16(`${what}.mode`);
  return { algorithm, keyBits, mode };
}

function writeSymDef(w: TpmWriter, s: SymDefObject): void {
  w.u16(s.algorithm);
  if (s.algorithm === TPM_ALG.NULL) return;
  if (s.keyBits === undefined || s.mode === undefined) {
    throw new TpmUsageError(`symmetric ${algName(s.algorithm)} needs keyBits and mode`);
  }
  w.u16(s.keyBits).u16(s.mode);
}

const RSA_SCHEMES_WITH_HASH = new Set<number>([TPM_ALG.RSASSA, TPM_ALG.RSAPSS, TPM_ALG.OAEP]);
const ECC_SCHEMES_WITH_HASH = new Set<number>([
  TPM_ALG.ECDSA,
  TPM_ALG.ECDH,
  TPM_ALG.ECSCHNORR,
  TPM_ALG.SM2,
  TPM_ALG.ECMQV,
]);
const KDF_SCHEMES = new Set<number>([
  TPM_ALG.MGF1,
  TPM_ALG.KDF1_SP800_56A,
  TPM_ALG.KDF2,
  TPM_ALG.KDF1_SP800_108,
]);

function readRsaScheme(r: TpmReader): AlgScheme {
  const scheme = r.u16('TPMT_RSA_SCHEME.scheme');
  if (scheme === TPM_ALG.NULL || scheme === TPM_ALG.RSAES) return { scheme };
  if (!RSA_SCHEMES_WITH_HASH.has(scheme))
    r.fail(`TPMT_RSA_SCHEME.scheme ${algName(scheme)} is not an RSA scheme`);
  return { scheme, hashAlg: readHashAlg(r, 'TPMT_RSA_SCHEME.hashAlg', false) };
}

function readEccScheme(r: TpmReader): AlgScheme {
  const scheme = r.u16('TPMT_ECC_SCHEME.scheme');
  if (scheme === TPM_ALG.NULL) return { scheme };
  if (scheme === TPM_ALG.ECDAA) {
    const hashAlg = readHashAlg(r, 'TPMT_ECC_SCHEME.hashAlg', false);
    return { scheme, hashAlg, count: r.u16('TPMS_SCHEME_ECDAA.count') };
  }
  if (!ECC_SCHEMES_WITH_HASH.has(scheme))
    r.fail(`TPMT_ECC_SCHEME.scheme ${algName(scheme)} is not an ECC scheme`);
  return { scheme, hashAlg: readHashAlg(r, 'TPMT_ECC_SCHEME.hashAlg', false) };
}

function readKdfScheme(r: TpmReader): AlgScheme {
  const scheme = r.u16('TPMT_KDF_SCHEME.scheme');
  if (scheme === TPM_ALG.NULL) return { scheme };
  if (!KDF_SCHEMES.has(scheme)) r.fail(`TPMT_KDF_SCHEME.scheme ${algName(scheme)} is not a KDF`);
  return { scheme, hashAlg: readHashAlg(r, 'TPMT_KDF_SCHEME.hashAlg', false) };
}

function readKeyedHashScheme(r: TpmReader): AlgScheme {
  const scheme = r.u16('TPMT_KEYEDHASH_SCHEME.scheme');
  if (scheme === TPM_ALG.NULL) return { scheme };
  if (scheme === TPM_ALG.HMAC) return { scheme, hashAlg: readHashAlg(r, 'TPMS_SCHEME_HMAC.hashAlg', false) };
  if (scheme === TPM_ALG.XOR) {
    const hashAlg = readHashAlg(r, 'TPMS_SCHEME_XOR.hashAlg', false);
    const kdf = r.u16('TPMS_SCHEME_XOR.kdf');
    if (!KDF_SCHEMES.has(kdf)) r.fail(`TPMS_SCHEME_XOR.kdf ${algName(kdf)} is not a KDF`);
    return { scheme, hashAlg, kdf };
  }
  return r.fail(`TPMT_KEYEDHASH_SCHEME.scheme ${algName(scheme)} is not a keyed-hash scheme`);
}

function writeScheme(w: TpmWriter, s: AlgScheme): void {
  w.u16(s.scheme);
  if (s.scheme === TPM_ALG.NULL || s.scheme === TPM_ALG.RSAES) return;
  if (s.hashAlg === undefined) throw new TpmUsageError(`scheme ${algName(s.scheme)} needs a hash algorithm`);
  w.u16(s.hashAlg);
  if (s.scheme === TPM_ALG.ECDAA) w.u16(s.count ?? 0);
  if (s.scheme === TPM_ALG.XOR) {
    if (s.kdf === undefined) throw new TpmUsageError('XOR scheme needs a KDF');
    w.u16(s.kdf);
  }
}

export function readPublic(r: TpmReader): TpmtPublic {
  const type = r.u16('TPMT_PUBLIC.type');
  const nameAlg = readHashAlg(r, 'TPMT_PUBLIC.nameAlg', true);
  const objectAttributes = r.u32('TPMT_PUBLIC.objectAttributes');
  const authPolicy = r.tpm2b('TPMT_PUBLIC.authPolicy', MAX_DIGEST_SIZE);
  const common = { nameAlg, objectAttributes, authPolicy };
  switch (type) {
    case TPM_ALG.RSA: {
      const symmetric = readSymDef(r, 'TPMS_RSA_PARMS.symmetric');
      const scheme = readRsaScheme(r);
      const keyBits = r.u16('TPMS_RSA_PARMS.keyBits');
      const exponent = r.u32('TPMS_RSA_PARMS.exponent');
      const unique = r.tpm2b('TPM2B_PUBLIC_KEY_RSA', MAX_RSA_KEY_BYTES);
      return { type, ...common, parameters: { symmetric, scheme, keyBits, exponent }, unique };
    }
    case TPM_ALG.ECC: {
      const symmetric = readSymDef(r, 'TPMS_ECC_PARMS.symmetric');
      const scheme = readEccScheme(r);
      const curveId = r.u16('TPMS_ECC_PARMS.curveID');
      const kdf = readKdfScheme(r);
      const x = r.tpm2b('TPMS_ECC_POINT.x', MAX_ECC_KEY_BYTES);
      const y = r.tpm2b('TPMS_ECC_POINT.y', MAX_ECC_KEY_BYTES);
      return { type, ...common, parameters: { symmetric, scheme, curveId, kdf }, unique: { x, y } };
    }
    case TPM_ALG.KEYEDHASH: {
      const scheme = readKeyedHashScheme(r);
      const unique = r.tpm2b('TPMU_PUBLIC_ID.keyedHash', MAX_DIGEST_SIZE);
      return { type, ...common, parameters: { scheme }, unique };
    }
    case TPM_ALG.SYMCIPHER: {
      const symmetric = readSymDef(r, 'TPMS_SYMCIPHER_PARMS.sym');
      const unique = r.tpm2b('TPMU_PUBLIC_ID.sym', MAX_DIGEST_SIZE);
      return { type, ...common, parameters: { symmetric }, unique };
    }
    default:
      return r.fail(`TPMT_PUBLIC.type ${algName(type)} is not an object type`);
  }
}

/** Parses a complete TPMT_PUBLIC (the contents of a TPM2B_PUBLIC, without its size). */
export function parsePublic(bytes: Uint8Array): TpmtPublic {
  if (bytes.length > MAX_PUBLIC_SIZE) {
    throw new TpmParseError('TPMT_PUBLIC', 0, `${bytes.length} bytes exceed the limit of ${MAX_PUBLIC_SIZE}`);
  }
  const r = new TpmReader(bytes, 'TPMT_PUBLIC');
  const pub = readPublic(r);
  r.end();
  return pub;
}

export function writePublic(w: TpmWriter, p: TpmtPublic): void {
  w.u16(p.type)
    .u16(p.nameAlg)
    .u32(p.objectAttributes >>> 0);
  w.tpm2b(p.authPolicy, MAX_DIGEST_SIZE, 'authPolicy');
  switch (p.type) {
    case TPM_ALG.RSA:
      writeSymDef(w, p.parameters.symmetric);
      writeScheme(w, p.parameters.scheme);
      w.u16(p.parameters.keyBits).u32(p.parameters.exponent);
      w.tpm2b(p.unique, MAX_RSA_KEY_BYTES, 'RSA modulus');
      return;
    case TPM_ALG.ECC:
      writeSymDef(w, p.parameters.symmetric);
      writeScheme(w, p.parameters.scheme);
      w.u16(p.parameters.curveId);
      writeScheme(w, p.parameters.kdf);
      w.tpm2b(p.unique.x, MAX_ECC_KEY_BYTES, 'ECC x');
      w.tpm2b(p.unique.y, MAX_ECC_KEY_BYTES, 'ECC y');
      return;
    case TPM_ALG.KEYEDHASH:
      writeScheme(w, p.parameters.scheme);
      w.tpm2b(p.unique, MAX_DIGEST_SIZE, 'keyed-hash unique');
      return;
    case TPM_ALG.SYMCIPHER:
      writeSymDef(w, p.parameters.symmetric);
      w.tpm2b(p.unique, MAX_DIGEST_SIZE, 'symcipher unique');
      return;
  }
}

export function marshalPublic(p: TpmtPublic): Uint8Array {
  const w = new TpmWriter();
  writePublic(w, p);
  return w.finish();
}

/**
 * The TPM name of an object: nameAlg followed by H_nameAlg(TPMT_PUBLIC).
 * `publicArea` must be the marshalled TPMT_PUBLIC exactly as the TPM holds it.
 */
export function objectName(publicArea: Uint8Array, nameAlg: number): Uint8Array {
  const hash = nodeHashName(nameAlg);
  if (hash === undefined) throw new TpmUsageError(`name algorithm ${algName(nameAlg)} is not a hash`);
  const digest = createHash(hash).update(publicArea).digest();
  const out = new Uint8Array(2 + digest.length);
  new DataView(out.buffer).setUint16(0, nameAlg);
  out.set(digest, 2);
  return out;
}

const JWK_CURVES: ReadonlyMap<number, { readonly crv: string; readonly size: number }> = new Map([
  [TPM_ECC.NIST_P256, { crv: 'P-256', size: 32 }],
  [TPM_ECC.NIST_P384, { crv: 'P-384', size: 48 }],
  [TPM_ECC.NIST_P521, { crv: 'P-521', size: 66 }],
]);

function b64url(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64url');
}

function fixedWidth(b: Uint8Array, size: number, what: string): Uint8Array {
  let start = 0;
  while (start < b.length && b[start] === 0 && b.length - start > size) start++;
  const trimmed = b.subarray(start);
  if (trimmed.length > size) throw new TpmUsageError(`${what} is longer than the curve allows`);
  const out = new Uint8Array(size);
  out.set(trimmed, size - trimmed.length);
  return out;
}

/**
 * The public key of an RSA or ECC (NIST P-256/384/521) TPM object as a
 * node KeyObject. Keyed-hash and symmetric objects have no public key.
 */
export function publicKeyFromTpmt(p: TpmtPublic): KeyObject {
  if (p.type === TPM_ALG.RSA) {
    const { keyBits, exponent } = p.parameters;
    if (p.unique.length === 0 || p.unique.length * 8 !== keyBits) {
      throw new TpmUsageError(`RSA modulus is ${p.unique.length} bytes but keyBits says ${keyBits}`);
    }
    const e = exponent === 0 ? 65537 : exponent;
    const eBytes = new Uint8Array(4);
    new DataView(eBytes.buffer).setUint32(0, e);
    let i = 0;
    while (i < 3 && eBytes[i] === 0) i++;
    return createPublicKey({
      key: { kty: 'RSA', n: b64url(p.unique), e: b64url(eBytes.subarray(i)) },
      format: 'jwk',
    });
  }
  if (p.type === TPM_ALG.ECC) {
    const curve = JWK_CURVES.get(p.parameters.curveId);
    if (curve === undefined) {
      throw new TpmUsageError(`ECC curve 0x${p.parameters.curveId.toString(16)} is not supported`);
    }
    const x = fixedWidth(p.unique.x, curve.size, 'ECC x');
    const y = fixedWidth(p.unique.y, curve.size, 'ECC y');
    // node checks that the point is on the curve.
    return createPublicKey({ key: { kty: 'EC', crv: curve.crv, x: b64url(x), y: b64url(y) }, format: 'jwk' });
  }
  throw new TpmUsageError(`a ${algName(p.type)} object has no public key`);
}

/** DER SubjectPublicKeyInfo of an RSA or ECC TPM object (what upstream's `ak_public` carries). */
export function spkiFromTpmt(p: TpmtPublic): Uint8Array {
  return new Uint8Array(publicKeyFromTpmt(p).export({ type: 'spki', format: 'der' }));
}

/** Readable names of the TPMA_OBJECT bits set in `attrs`. */
export function objectAttributeNames(attrs: number): string[] {
  return Object.entries(TPMA_OBJECT)
    .filter(([, bit]) => (attrs & bit) !== 0)
    .map(([name]) => name);
}

/**
 * A template for an attestation key: a restricted signing key that can
 * sign quotes, created inside the TPM (fixedTPM, fixedParent,
 * sensitiveDataOrigin), usable with an empty password (userWithAuth).
 */
export function attestationKeyTemplate(
  kind: 'rsa2048' | 'ecc-p256' = 'rsa2048',
  hashAlg: number = TPM_ALG.SHA256,
): TpmtPublic {
  const objectAttributes =
    TPMA_OBJECT.fixedTPM |
    TPMA_OBJECT.fixedParent |
    TPMA_OBJECT.sensitiveDataOrigin |
    TPMA_OBJECT.userWithAuth |
    TPMA_OBJECT.restricted |
    TPMA_OBJECT.sign;
  const common = { nameAlg: TPM_ALG.SHA256, objectAttributes, authPolicy: new Uint8Array() };
  if (kind === 'rsa2048') {
    return {
      type: TPM_ALG.RSA,
      ...common,
      parameters: {
        symmetric: { algorithm: TPM_ALG.NULL },
        scheme: { scheme: TPM_ALG.RSASSA, hashAlg },
        keyBits: 2048,
        exponent: 0,
      },
      unique: new Uint8Array(),
    };
  }
  return {
    type: TPM_ALG.ECC,
    ...common,
    parameters: {
      symmetric: { algorithm: TPM_ALG.NULL },
      scheme: { scheme: TPM_ALG.ECDSA, hashAlg },
      curveId: TPM_ECC.NIST_P256,
      kdf: { scheme: TPM_ALG.NULL },
    },
    unique: { x: new Uint8Array(), y: new Uint8Array() },
  };
}
