import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import {
  attestationKeyTemplate,
  MAX_ATTEST_SIZE,
  MAX_PUBLIC_SIZE,
  MAX_SIGNATURE_SIZE,
  marshalAttest,
  marshalNvPublic,
  marshalPcrSelectionList,
  marshalPublic,
  marshalSignature,
  type NvPublic,
  objectName,
  parseAttest,
  parseNvPublic,
  parsePcrSelectionList,
  parsePublic,
  parseSignature,
  publicKeyFromTpmt,
  spkiFromTpmt,
  TPM_ALG,
  TPM_ECC,
  TPMA_NV,
  TpmParseError,
  type TpmtPublic,
  type TpmtSignature,
  TpmUsageError,
  verifySignature,
} from './index.js';

const FIXTURES = vector('trustee');

/** Deterministic PRNG (mulberry32) so failures reproduce. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Case<T> {
  readonly name: string;
  readonly bytes: Uint8Array;
  readonly parse: (b: Uint8Array) => T;
  readonly marshal: (v: T) => Uint8Array;
}

/**
 * The properties every parser of untrusted bytes must have: every strict
 * prefix fails, a trailing byte fails, and random corruption either fails
 * with TpmParseError or yields a value that marshals back to exactly the
 * input (so no byte was ignored or reinterpreted).
 */
function hostile<T>(c: Case<T>): void {
  describe(`${c.name} on hostile input`, () => {
    it('round-trips the sample', () => {
      expect(c.marshal(c.parse(c.bytes))).toEqual(c.bytes);
    });

    it('rejects truncation at every offset', () => {
      for (let n = 0; n < c.bytes.length; n++) {
        expect(() => c.parse(c.bytes.subarray(0, n)), `prefix of ${n} bytes`).toThrow(TpmParseError);
      }
    });

    it('rejects trailing bytes', () => {
      const longer = new Uint8Array(c.bytes.length + 1);
      longer.set(c.bytes);
      expect(() => c.parse(longer)).toThrow(/trailing byte/);
    });

    it('fails only with TpmParseError, or parses canonically, under random corruption', () => {
      const rand = prng(c.bytes.length);
      let rejected = 0;
      for (let i = 0; i < 3000; i++) {
        const b = c.bytes.slice();
        const flips = 1 + Math.floor(rand() * 3);
        for (let f = 0; f < flips; f++) b[Math.floor(rand() * b.length)] = Math.floor(rand() * 256);
        let value: T;
        try {
          value = c.parse(b);
        } catch (err) {
          expect(err).toBeInstanceOf(TpmParseError);
          rejected++;
          continue;
        }
        expect(c.marshal(value)).toEqual(b);
      }
      // Corrupting structure fields must be caught some of the time; a parser accepting everything is broken.
      expect(rejected).toBeGreaterThan(0);
    });
  });
}

const quoteMsg = new Uint8Array(readFileSync(join(FIXTURES, 'az-snp-vtpm/tpm-quote.msg')));
const tpmEvidence = JSON.parse(readFileSync(join(FIXTURES, 'tpm/tpm_evidence.json'), 'utf8')) as {
  tpm_quote: { signature: string; message: string };
};
const rsaSig = new Uint8Array(Buffer.from(tpmEvidence.tpm_quote.signature, 'base64'));

const { publicKey: ecKey, privateKey: ecPriv } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const ecJwk = ecKey.export({ format: 'jwk' }) as { x: string; y: string };
const eccPublic: TpmtPublic = {
  ...attestationKeyTemplate('ecc-p256'),
  unique: { x: Buffer.from(ecJwk.x, 'base64url'), y: Buffer.from(ecJwk.y, 'base64url') },
} as TpmtPublic;
const { publicKey: rsaKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const rsaJwk = rsaKey.export({ format: 'jwk' }) as { n: string };
const rsaPublic: TpmtPublic = {
  ...attestationKeyTemplate('rsa2048'),
  unique: new Uint8Array(Buffer.from(rsaJwk.n, 'base64url')),
} as TpmtPublic;
const keyedHash: TpmtPublic = {
  type: TPM_ALG.KEYEDHASH,
  nameAlg: TPM_ALG.SHA256,
  objectAttributes: 0x00040072,
  authPolicy: new Uint8Array(32).fill(9),
  parameters: { scheme: { scheme: TPM_ALG.XOR, hashAlg: TPM_ALG.SHA256, kdf: TPM_ALG.KDF1_SP800_108 } },
  unique: new Uint8Array(32).fill(1),
};
const symCipher: TpmtPublic = {
  type: TPM_ALG.SYMCIPHER,
  nameAlg: TPM_ALG.SHA384,
  objectAttributes: 0x00060072,
  authPolicy: new Uint8Array(),
  parameters: { symmetric: { algorithm: TPM_ALG.AES, keyBits: 128, mode: TPM_ALG.CFB } },
  unique: new Uint8Array(48).fill(2),
};
const nvPublic: NvPublic = {
  nvIndex: 0x01400001,
  nameAlg: TPM_ALG.SHA256,
  attributes: TPMA_NV.OWNERREAD | TPMA_NV.OWNERWRITE | TPMA_NV.WRITTEN | TPMA_NV.READ_STCLEAR,
  authPolicy: new Uint8Array(),
  dataSize: 2600,
};
const ecdsaSig: TpmtSignature = {
  sigAlg: TPM_ALG.ECDSA,
  hash: TPM_ALG.SHA256,
  r: new Uint8Array(32).fill(3),
  s: new Uint8Array(31).fill(4),
};
const hmacSig: TpmtSignature = {
  sigAlg: TPM_ALG.HMAC,
  hash: TPM_ALG.SHA384,
  digest: new Uint8Array(48).fill(5),
};

hostile({ name: 'parseAttest', bytes: quoteMsg, parse: parseAttest, marshal: marshalAttest });
hostile({ name: 'parseSignature (RSASSA)', bytes: rsaSig, parse: parseSignature, marshal: marshalSignature });
hostile({
  name: 'parseSignature (ECDSA)',
  bytes: marshalSignature(ecdsaSig),
  parse: parseSignature,
  marshal: marshalSignature,
});
hostile({
  name: 'parseSignature (HMAC)',
  bytes: marshalSignature(hmacSig),
  parse: parseSignature,
  marshal: marshalSignature,
});
for (const [name, p] of [
  ['RSA', rsaPublic],
  ['ECC', eccPublic],
  ['keyed hash', keyedHash],
  ['symcipher', symCipher],
] as const) {
  hostile({
    name: `parsePublic (${name})`,
    bytes: marshalPublic(p),
    parse: parsePublic,
    marshal: marshalPublic,
  });
}
hostile({
  name: 'parseNvPublic',
  bytes: marshalNvPublic(nvPublic),
  parse: parseNvPublic,
  marshal: marshalNvPublic,
});
hostile({
  name: 'parsePcrSelectionList',
  bytes: marshalPcrSelectionList([
    { hashAlg: TPM_ALG.SHA256, pcrs: [0, 3, 8, 9, 11, 12] },
    { hashAlg: TPM_ALG.SHA1, pcrs: [23], sizeofSelect: 4 },
  ]),
  parse: parsePcrSelectionList,
  marshal: marshalPcrSelectionList,
});

function withU16(bytes: Uint8Array, at: number, value: number): Uint8Array {
  const b = bytes.slice();
  new DataView(b.buffer).setUint16(at, value);
  return b;
}

describe('specific rejections', () => {
  it('parseAttest: oversize input, wrong magic, non-quote type, bad safe flag, oversize extraData', () => {
    expect(() => parseAttest(new Uint8Array(MAX_ATTEST_SIZE + 1))).toThrow(/exceed the limit/);
    const wrongMagic = quoteMsg.slice();
    wrongMagic[0] = 0xfe;
    expect(() => parseAttest(wrongMagic)).toThrow(/TPM_GENERATED_VALUE/);
    expect(() => parseAttest(withU16(quoteMsg, 4, 0x8017))).toThrow(/certify.*is not a quote/);
    expect(() => parseAttest(withU16(quoteMsg, 4, 0x1234))).toThrow(/not an attestation type/);
    // extraData ("challenge", 9 bytes) sits after the 34-byte signer name; the clock's safe flag follows the clock.
    const safeAt = 6 + 2 + 34 + 2 + 9 + 8 + 4 + 4;
    const badSafe = quoteMsg.slice();
    badSafe[safeAt] = 2;
    expect(() => parseAttest(badSafe)).toThrow(/TPMI_YES_NO/);
    const big = marshalAttest({ ...parseAttest(quoteMsg), extraData: new Uint8Array(66) });
    const tooBig = new Uint8Array(big.length + 1);
    tooBig.set(big.subarray(0, 44));
    new DataView(tooBig.buffer).setUint16(42, 67);
    tooBig.set(big.subarray(44), 45);
    expect(() => parseAttest(tooBig)).toThrow(/extraData.size 67 exceeds the maximum 66/);
  });

  it('parseSignature: NULL and unknown schemes, non-hash hashes, oversize RSA signatures, empty halves', () => {
    expect(() => parseSignature(new Uint8Array([0x00, 0x10]))).toThrow(/carries no signature/);
    expect(() => parseSignature(withU16(rsaSig, 0, 0x0001))).toThrow(/not a signature scheme/);
    expect(() => parseSignature(withU16(rsaSig, 2, TPM_ALG.NULL))).toThrow(/not a hash algorithm/);
    expect(() => parseSignature(new Uint8Array(MAX_SIGNATURE_SIZE + 1))).toThrow(/exceed the limit/);
    const huge = new Uint8Array(6 + 513);
    new DataView(huge.buffer).setUint16(0, TPM_ALG.RSASSA);
    new DataView(huge.buffer).setUint16(2, TPM_ALG.SHA256);
    new DataView(huge.buffer).setUint16(4, 513);
    expect(() => parseSignature(huge)).toThrow(TpmParseError);
    expect(() => parseSignature(marshalSignature({ ...ecdsaSig, r: new Uint8Array() }))).toThrow(
      /empty r or s/,
    );
    expect(() => parseSignature(new Uint8Array([0x00, 0x14, 0x00, 0x0b, 0x00, 0x00]))).toThrow(/is empty/);
  });

  it('parsePublic: unknown type, oversize input, oversize modulus', () => {
    expect(() => parsePublic(withU16(marshalPublic(rsaPublic), 0, 0x0099))).toThrow(/not an object type/);
    expect(() => parsePublic(new Uint8Array(MAX_PUBLIC_SIZE + 1))).toThrow(/exceed the limit/);
    const bytes = marshalPublic(rsaPublic);
    const modulusSizeAt = bytes.length - 256 - 2;
    const grown = new Uint8Array(bytes.length + 257);
    grown.set(bytes);
    new DataView(grown.buffer).setUint16(modulusSizeAt, 513);
    expect(() => parsePublic(grown)).toThrow(/exceeds the maximum 512/);
  });

  it('parsePcrSelectionList: too many banks, oversize bitmaps, non-hash banks', () => {
    expect(() => parsePcrSelectionList(new Uint8Array([0, 0, 0, 17]))).toThrow(/exceeds 16/);
    expect(() => parsePcrSelectionList(new Uint8Array([0, 0, 0, 1, 0, 0x0b, 5, 1, 1, 1, 1, 1]))).toThrow(
      /sizeofSelect 5 exceeds 4/,
    );
    expect(() => parsePcrSelectionList(new Uint8Array([0, 0, 0, 1, 0, 0x10, 3, 1, 1, 1]))).toThrow(
      /not a hash algorithm/,
    );
  });

  it('parseNvPublic: non-NV handles and oversize input', () => {
    const b = marshalNvPublic(nvPublic);
    const notNv = b.slice();
    notNv[0] = 0x81;
    expect(() => parseNvPublic(notNv)).toThrow(/not an NV index handle/);
    expect(() => parseNvPublic(new Uint8Array(200))).toThrow(/exceed the limit/);
  });
});

describe('public keys from TPMT_PUBLIC', () => {
  it('converts RSA and ECC areas to the same keys node generated', () => {
    expect(Buffer.from(spkiFromTpmt(rsaPublic))).toEqual(rsaKey.export({ type: 'spki', format: 'der' }));
    expect(Buffer.from(spkiFromTpmt(eccPublic))).toEqual(ecKey.export({ type: 'spki', format: 'der' }));
  });

  it('verifies an ECDSA TPMT_SIGNATURE whose r or s is shorter than the curve size', () => {
    const msg = new Uint8Array([1, 2, 3]);
    // About one signature in 128 has a leading zero in r or s: 300 tries missed one run in ten;
    // 5,000 miss about once in 10^17, and the loop stops at the first (about 128 signatures).
    const tries = 5000;
    for (let i = 0; i < tries; i++) {
      const signed = Buffer.alloc(4);
      signed.writeUInt32BE(i);
      const raw = sign('sha256', Buffer.concat([msg, signed]), {
        key: ecPriv,
        dsaEncoding: 'ieee-p1363',
      });
      const r = raw.subarray(0, 32);
      const s = raw.subarray(32);
      if (r[0] !== 0 && s[0] !== 0) continue;
      // TPMs drop leading zero bytes of r and s; verification must left-pad them.
      const strip = (b: Buffer) => new Uint8Array(b.subarray(b.findIndex((x) => x !== 0)));
      const sig: TpmtSignature = { sigAlg: TPM_ALG.ECDSA, hash: TPM_ALG.SHA256, r: strip(r), s: strip(s) };
      expect(verifySignature(publicKeyFromTpmt(eccPublic), Buffer.concat([msg, signed]), sig)).toBe(true);
      return;
    }
    throw new Error(`no signature with a leading zero in ${tries} tries`);
  });

  it('refuses inconsistent or unsupported keys', () => {
    const short = { ...rsaPublic, unique: new Uint8Array(255).fill(1) } as TpmtPublic;
    expect(() => publicKeyFromTpmt(short)).toThrow(TpmUsageError);
    const bn = {
      ...eccPublic,
      parameters: { ...(eccPublic as { parameters: object }).parameters, curveId: TPM_ECC.BN_P256 },
    } as TpmtPublic;
    expect(() => publicKeyFromTpmt(bn)).toThrow(/not supported/);
    const offCurve = {
      ...eccPublic,
      unique: { x: new Uint8Array(32).fill(1), y: new Uint8Array(32).fill(2) },
    } as TpmtPublic;
    expect(() => publicKeyFromTpmt(offCurve)).toThrow();
    expect(() => publicKeyFromTpmt(keyedHash)).toThrow(/has no public key/);
  });

  it('uses exponent 65537 when the area says 0, and the given exponent otherwise', () => {
    const e3 = {
      ...rsaPublic,
      parameters: { ...(rsaPublic as { parameters: object }).parameters, exponent: 3 },
    } as TpmtPublic;
    const jwk = publicKeyFromTpmt(e3).export({ format: 'jwk' });
    expect(jwk.e).toBe('Aw');
    expect(publicKeyFromTpmt(rsaPublic).export({ format: 'jwk' }).e).toBe('AQAB');
  });

  it('names objects by nameAlg and the hash of the exact public area', () => {
    const area = marshalPublic(rsaPublic);
    const digest = createHash('sha256').update(area).digest();
    expect(Buffer.from(objectName(area, TPM_ALG.SHA256))).toEqual(
      Buffer.concat([Buffer.from([0, 0x0b]), digest]),
    );
    expect(() => objectName(area, TPM_ALG.NULL)).toThrow(TpmUsageError);
  });
});
