import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TeePubKey } from './jwk.js';
import {
  DEFAULT_REPORT_DATA_HASH,
  padReportData,
  parseReportDataHashAlgorithm,
  runtimeDataClaims,
  runtimeDataDigest,
  SUPPORTED_HASH_ALGORITHMS,
} from './report-data.js';

const key: TeePubKey = {
  kty: 'EC',
  crv: 'P-256',
  alg: 'ECDH-ES+A256KW',
  x: 'gI0GAILBdu7T53akrFmMyGcsF3n5dO7MmwNBHKW5SV0',
  y: 'SLW_xSffzlPWrHEVI30DHM_4egVwt3NQqeUD7nMFpps',
};
const nonce = 'dGhpcyBpcyBhIG5vbmNlIG9mIDMyIGJ5dGVzISEhISE=';

describe('runtime data binding', () => {
  it('hashes JCS of {additional-evidence, nonce, tee-pubkey} with SHA-384 by default', () => {
    const expectedText =
      '{"additional-evidence":"","nonce":"' +
      nonce +
      '","tee-pubkey":{"alg":"ECDH-ES+A256KW","crv":"P-256","kty":"EC","x":"' +
      (key as { x: string }).x +
      '","y":"' +
      (key as { y: string }).y +
      '"}}';
    const expected = createHash('sha384').update(expectedText).digest();
    const got = runtimeDataDigest({ nonce, 'tee-pubkey': key, 'additional-evidence': '' });
    expect(DEFAULT_REPORT_DATA_HASH).toBe('sha384');
    expect(got).toHaveLength(48);
    expect(got.equals(expected)).toBe(true);
  });

  it('omits additional-evidence for device entries', () => {
    expect(Object.keys(runtimeDataClaims({ nonce, 'tee-pubkey': key }))).toEqual(['nonce', 'tee-pubkey']);
    expect(
      runtimeDataDigest({ nonce, 'tee-pubkey': key }).equals(
        runtimeDataDigest({ nonce, 'tee-pubkey': key, 'additional-evidence': '' }),
      ),
    ).toBe(false);
  });

  it('ignores extra JWK members a caller leaves on the key', () => {
    const noisy = { ...key, kid: 'x', use: 'enc' } as TeePubKey;
    expect(
      runtimeDataDigest({ nonce, 'tee-pubkey': noisy }).equals(
        runtimeDataDigest({ nonce, 'tee-pubkey': key }),
      ),
    ).toBe(true);
  });

  it('supports the negotiated algorithms, SM3 included', () => {
    expect(SUPPORTED_HASH_ALGORITHMS).toEqual(['sha256', 'sha384', 'sha512', 'sm3']);
    expect(runtimeDataDigest({ nonce, 'tee-pubkey': key }, 'sha256')).toHaveLength(32);
    expect(runtimeDataDigest({ nonce, 'tee-pubkey': key }, 'sha512')).toHaveLength(64);
    expect(runtimeDataDigest({ nonce, 'tee-pubkey': key }, 'sm3')).toHaveLength(32);
  });

  it('SM3 is the real SM3 (GB/T 32905 "abc" vector)', () => {
    expect(createHash('sm3').update('abc').digest('hex')).toBe(
      '66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0',
    );
  });

  it('parses hash names case-insensitively like kbs-types', () => {
    expect(parseReportDataHashAlgorithm('SHA512')).toBe('sha512');
    expect(parseReportDataHashAlgorithm('sm3')).toBe('sm3');
    expect(parseReportDataHashAlgorithm('sha-384')).toBeNull();
    expect(parseReportDataHashAlgorithm(384)).toBeNull();
  });
});

describe('padReportData', () => {
  const d48 = Buffer.alloc(48, 0xab);
  it('zero-pads a SHA-384 digest to 64 bytes (TDX/SNP REPORTDATA)', () => {
    const out = padReportData(d48, 64);
    expect(out).toHaveLength(64);
    expect(out.subarray(0, 48).equals(d48)).toBe(true);
    expect(out.subarray(48).equals(Buffer.alloc(16))).toBe(true);
  });
  it('truncates to 32 bytes (TPM)', () => {
    expect(padReportData(d48, 32).equals(Buffer.alloc(32, 0xab))).toBe(true);
  });
  it('returns a copy for an exact fit', () => {
    const out = padReportData(d48, 48);
    out[0] = 0;
    expect(d48[0]).toBe(0xab);
  });
  it('rejects a nonsensical size', () => {
    expect(() => padReportData(d48, 0)).toThrow(RangeError);
    expect(() => padReportData(d48, 1.5)).toThrow(RangeError);
  });
});
