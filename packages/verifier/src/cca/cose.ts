// COSE_Sign1 (RFC 9052 §4.2) for CCA tokens: tag 18 around [protected bstr, unprotected map,
// payload bstr, signature bstr], signed over Sig_structure ["Signature1", protected, h'', payload].
// Only the ECDSA algorithms the CCA platform and realm tokens use are accepted.
import { type KeyObject, sign, verify } from 'node:crypto';
import { decode, encode, Tag } from 'cbor2';
import { VerificationError } from '../errors.js';

export const COSE_SIGN1_TAG = 18;
const HEADER_ALG = 1;

/** COSE algorithm → the hash and curve it fixes (RFC 9053 §2.1). */
export const COSE_ECDSA: ReadonlyMap<
  number,
  { readonly hash: string; readonly curve: string; readonly size: number }
> = new Map([
  [-7, { hash: 'sha256', curve: 'prime256v1', size: 32 }], // ES256
  [-35, { hash: 'sha384', curve: 'secp384r1', size: 48 }], // ES384
  [-36, { hash: 'sha512', curve: 'secp521r1', size: 66 }], // ES512
]);

export interface CoseSign1 {
  readonly protectedBytes: Uint8Array;
  readonly alg: number;
  readonly payload: Uint8Array;
  readonly signature: Uint8Array;
}

/** Strict CBOR decode: no trailing bytes, no repeated map keys, maps as Map (integer keys kept). */
export function decodeCbor(bytes: Uint8Array, what: string): unknown {
  try {
    return decode(bytes, { preferMap: true, rejectDuplicateKeys: true });
  } catch (e) {
    throw new VerificationError('REPORT_MALFORMED', `${what}: not one well-formed CBOR item`, { cause: e });
  }
}

function malformed(what: string, message: string): VerificationError {
  return new VerificationError('REPORT_MALFORMED', `${what}: ${message}`);
}

export function decodeCoseSign1(bytes: Uint8Array, what: string): CoseSign1 {
  const item = decodeCbor(bytes, what);
  if (!(item instanceof Tag) || Number(item.tag) !== COSE_SIGN1_TAG) {
    throw malformed(what, 'not a tagged COSE_Sign1 (tag 18)');
  }
  const parts = item.contents;
  if (!Array.isArray(parts) || parts.length !== 4)
    throw malformed(what, 'COSE_Sign1 is not a 4-element array');
  const [prot, unprot, payload, signature] = parts as unknown[];
  if (
    !(prot instanceof Uint8Array) ||
    !(payload instanceof Uint8Array) ||
    !(signature instanceof Uint8Array)
  ) {
    throw malformed(what, 'COSE_Sign1 protected header, payload and signature must be byte strings');
  }
  if (!(unprot instanceof Map)) throw malformed(what, 'COSE_Sign1 unprotected header must be a map');
  const header = prot.length === 0 ? new Map() : decodeCbor(prot, `${what} protected header`);
  if (!(header instanceof Map)) throw malformed(what, 'protected header is not a map');
  const alg = header.get(HEADER_ALG);
  if (typeof alg !== 'number') throw malformed(what, 'protected header has no integer alg');
  return { protectedBytes: prot, alg, payload, signature };
}

/** Node Buffers as plain Uint8Arrays, deep: cbor2 writes a Buffer as an object (its toJSON), not a bstr. */
function plain(value: unknown): unknown {
  if (value instanceof Uint8Array) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (Array.isArray(value)) return value.map(plain);
  if (value instanceof Map) return new Map([...value].map(([k, v]) => [plain(k), plain(v)]));
  if (value instanceof Tag) return new Tag(value.tag, plain(value.contents));
  return value;
}

/** CBOR of `value`, byte strings from Buffers or Uint8Arrays alike. */
export function encodeCbor(value: unknown): Uint8Array {
  return encode(plain(value));
}

export function sigStructure(protectedBytes: Uint8Array, payload: Uint8Array): Uint8Array {
  return encodeCbor(['Signature1', protectedBytes, new Uint8Array(0), payload]);
}

/** Checks the signature with `key`, whose curve must be the one the alg names. */
export function verifyCoseSign1(msg: CoseSign1, key: KeyObject, what: string, keyName: string): void {
  const alg = COSE_ECDSA.get(msg.alg);
  if (alg === undefined) {
    throw new VerificationError(
      'UNSUPPORTED_ALGORITHM',
      `${what}: COSE algorithm ${msg.alg} is not ES256/ES384/ES512`,
    );
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== alg.curve) {
    throw new VerificationError(
      'UNSUPPORTED_ALGORITHM',
      `${what}: the ${keyName} is not on the curve its alg names`,
    );
  }
  const ok =
    msg.signature.length === 2 * alg.size &&
    verify(
      alg.hash,
      sigStructure(msg.protectedBytes, msg.payload),
      { key, dsaEncoding: 'ieee-p1363' },
      msg.signature,
    );
  if (!ok) {
    throw new VerificationError(
      'REPORT_SIGNATURE_INVALID',
      `${what} signature does not verify with the ${keyName}`,
    );
  }
}

/** A COSE_Sign1 of `payload` signed with `key` (ES256/384/512 by its curve): tests and the mock TEE. */
export function signCoseSign1(payload: Uint8Array, key: KeyObject): Uint8Array {
  const curve = key.asymmetricKeyDetails?.namedCurve;
  const entry = [...COSE_ECDSA].find(([, a]) => a.curve === curve);
  if (entry === undefined) throw new RangeError(`no COSE ECDSA algorithm for curve ${curve}`);
  const [alg, { hash }] = entry;
  const prot = encodeCbor(new Map([[HEADER_ALG, alg]]));
  const signature = sign(hash, sigStructure(prot, payload), { key, dsaEncoding: 'ieee-p1363' });
  return encodeCbor(new Tag(COSE_SIGN1_TAG, [prot, new Map(), payload, signature]));
}
