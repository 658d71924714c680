import { constants, type KeyObject, verify } from 'node:crypto';
import { algName, hashSize, nodeHashName, TPM_ALG } from './constants.js';
import { TpmParseError, TpmUsageError } from './errors.js';
import { TpmReader, TpmWriter } from './marshal.js';

/** Largest RSA signature / modulus (4096-bit keys). */
export const MAX_RSA_KEY_BYTES = 512;
/** Largest ECC coordinate or signature half. */
export const MAX_ECC_KEY_BYTES = 128;
/** Largest TPMT_SIGNATURE accepted. */
export const MAX_SIGNATURE_SIZE = 2 + 2 + 2 + MAX_RSA_KEY_BYTES;

export type RsaSignatureAlg = typeof TPM_ALG.RSASSA | typeof TPM_ALG.RSAPSS;
export type EccSignatureAlg =
  | typeof TPM_ALG.ECDSA
  | typeof TPM_ALG.ECDAA
  | typeof TPM_ALG.SM2
  | typeof TPM_ALG.ECSCHNORR;

/** TPMT_SIGNATURE with an RSA scheme: `sig` is the raw signature (modulus-sized). */
export interface TpmRsaSignature {
  readonly sigAlg: RsaSignatureAlg;
  readonly hash: number;
  readonly sig: Uint8Array;
}

/** TPMT_SIGNATURE with an ECC scheme: r and s as unsigned big-endian integers. */
export interface TpmEccSignature {
  readonly sigAlg: EccSignatureAlg;
  readonly hash: number;
  readonly r: Uint8Array;
  readonly s: Uint8Array;
}

/** TPMT_SIGNATURE made with an HMAC key. */
export interface TpmHmacSignature {
  readonly sigAlg: typeof TPM_ALG.HMAC;
  readonly hash: number;
  readonly digest: Uint8Array;
}

export type TpmtSignature = TpmRsaSignature | TpmEccSignature | TpmHmacSignature;

function readHash(r: TpmReader, what: string): number {
  const hash = r.u16(what);
  if (hashSize(hash) === undefined) r.fail(`${what} ${algName(hash)} is not a hash algorithm`);
  return hash;
}

export function readSignature(r: TpmReader): TpmtSignature {
  const sigAlg = r.u16('TPMT_SIGNATURE.sigAlg');
  switch (sigAlg) {
    case TPM_ALG.RSASSA:
    case TPM_ALG.RSAPSS: {
      const hash = readHash(r, 'TPMS_SIGNATURE_RSA.hash');
      const sig = r.tpm2b('TPMS_SIGNATURE_RSA.sig', MAX_RSA_KEY_BYTES);
      if (sig.length === 0) r.fail('TPMS_SIGNATURE_RSA.sig is empty');
      return { sigAlg, hash, sig };
    }
    case TPM_ALG.ECDSA:
    case TPM_ALG.ECDAA:
    case TPM_ALG.SM2:
    case TPM_ALG.ECSCHNORR: {
      const hash = readHash(r, 'TPMS_SIGNATURE_ECC.hash');
      const rr = r.tpm2b('TPMS_SIGNATURE_ECC.signatureR', MAX_ECC_KEY_BYTES);
      const s = r.tpm2b('TPMS_SIGNATURE_ECC.signatureS', MAX_ECC_KEY_BYTES);
      if (rr.length === 0 || s.length === 0) r.fail('TPMS_SIGNATURE_ECC has an empty r or s');
      return { sigAlg, hash, r: rr, s };
    }
    case TPM_ALG.HMAC: {
      const hash = readHash(r, 'TPMT_HA.hashAlg');
      const digest = r.bytes(hashSize(hash)!, 'TPMT_HA.digest');
      return { sigAlg, hash, digest };
    }
    case TPM_ALG.NULL:
      return r.fail('TPMT_SIGNATURE has sigAlg TPM_ALG_NULL: it carries no signature');
    default:
      return r.fail(`TPMT_SIGNATURE.sigAlg ${algName(sigAlg)} is not a signature scheme`);
  }
}

/** Parses a complete TPMT_SIGNATURE (no trailing bytes, bounded size). */
export function parseSignature(bytes: Uint8Array): TpmtSignature {
  if (bytes.length > MAX_SIGNATURE_SIZE) {
    throw new TpmParseError(
      'TPMT_SIGNATURE',
      0,
      `${bytes.length} bytes exceed the limit of ${MAX_SIGNATURE_SIZE}`,
    );
  }
  const r = new TpmReader(bytes, 'TPMT_SIGNATURE');
  const sig = readSignature(r);
  r.end();
  return sig;
}

export function writeSignature(w: TpmWriter, s: TpmtSignature): void {
  w.u16(s.sigAlg).u16(s.hash);
  switch (s.sigAlg) {
    case TPM_ALG.RSASSA:
    case TPM_ALG.RSAPSS:
      w.tpm2b(s.sig, MAX_RSA_KEY_BYTES, 'RSA signature');
      return;
    case TPM_ALG.HMAC:
      if (s.digest.length !== hashSize(s.hash))
        throw new TpmUsageError('HMAC digest size does not match its hash');
      w.bytes(s.digest);
      return;
    default:
      w.tpm2b(s.r, MAX_ECC_KEY_BYTES, 'ECC signature r');
      w.tpm2b(s.s, MAX_ECC_KEY_BYTES, 'ECC signature s');
  }
}

export function marshalSignature(s: TpmtSignature): Uint8Array {
  const w = new TpmWriter();
  writeSignature(w, s);
  return w.finish();
}

const CURVE_BYTES: Readonly<Record<string, number>> = {
  prime256v1: 32,
  secp384r1: 48,
  secp521r1: 66,
};

function leftPad(b: Uint8Array, size: number): Uint8Array | undefined {
  let start = 0;
  while (start < b.length && b[start] === 0 && b.length - start > size) start++;
  if (b.length - start > size) return undefined;
  const out = new Uint8Array(size);
  out.set(b.subarray(start), size - (b.length - start));
  return out;
}

/**
 * Verifies a TPMT_SIGNATURE over `message` (the TPMS_ATTEST bytes of a
 * quote) with `key`. RSASSA and RSAPSS need an RSA key, ECDSA an EC key;
 * other schemes (ECDAA, SM2, EC-Schnorr, HMAC) are refused. Returns false
 * when the signature does not verify; throws when it cannot be checked.
 */
export function verifySignature(key: KeyObject, message: Uint8Array, signature: TpmtSignature): boolean {
  const hashName = nodeHashName(signature.hash);
  if (hashName === undefined)
    throw new TpmUsageError(`unsupported signature hash ${algName(signature.hash)}`);
  const keyType = key.asymmetricKeyType;
  switch (signature.sigAlg) {
    case TPM_ALG.RSASSA:
      if (keyType !== 'rsa') throw new TpmUsageError(`an RSASSA signature needs an RSA key, not ${keyType}`);
      return verify(hashName, message, { key, padding: constants.RSA_PKCS1_PADDING }, signature.sig);
    case TPM_ALG.RSAPSS:
      if (keyType !== 'rsa') throw new TpmUsageError(`an RSAPSS signature needs an RSA key, not ${keyType}`);
      // TPMs use a salt as long as the digest, some the maximum; AUTO accepts what the signature encodes.
      return verify(
        hashName,
        message,
        { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_AUTO },
        signature.sig,
      );
    case TPM_ALG.ECDSA: {
      if (keyType !== 'ec') throw new TpmUsageError(`an ECDSA signature needs an EC key, not ${keyType}`);
      const curve = key.asymmetricKeyDetails?.namedCurve ?? '';
      const size = CURVE_BYTES[curve];
      if (size === undefined) throw new TpmUsageError(`unsupported ECDSA curve ${curve}`);
      const r = leftPad(signature.r, size);
      const s = leftPad(signature.s, size);
      if (r === undefined || s === undefined) return false;
      const raw = new Uint8Array(size * 2);
      raw.set(r, 0);
      raw.set(s, size);
      return verify(hashName, message, { key, dsaEncoding: 'ieee-p1363' }, raw);
    }
    default:
      throw new TpmUsageError(`cannot verify ${algName(signature.sigAlg)} signatures`);
  }
}
