import { createPublicKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import {
  ALL_PCRS,
  marshalAttest,
  marshalSignature,
  parseAttest,
  parseSignature,
  pcrDigest,
  TPM_ALG,
  TPM_GENERATED_VALUE,
  TPM_ST,
  verifySignature,
} from './index.js';

const FIXTURES = vector('trustee');
const fixture = (p: string) => new Uint8Array(readFileSync(join(FIXTURES, p)));
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const unhex = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));
const b64 = (s: string) => new Uint8Array(Buffer.from(s, 'base64'));

interface AzEvidence {
  tpm_quote: { signature: string; message: string; pcrs: string[] };
  hcl_report: string;
  vcek: string;
}

describe('trustee az-snp-vtpm fixtures', () => {
  it('parses tpm-quote.msg (v1 quote over PCRs 0-7 and 14, nonce "challenge")', () => {
    const msg = fixture('az-snp-vtpm/tpm-quote.msg');
    const a = parseAttest(msg);
    expect(a.magic).toBe(TPM_GENERATED_VALUE);
    expect(a.type).toBe(TPM_ST.ATTEST_QUOTE);
    expect(Buffer.from(a.extraData).toString()).toBe('challenge');
    expect(a.qualifiedSigner.length).toBe(34);
    expect(a.qualifiedSigner.subarray(0, 2)).toEqual(new Uint8Array([0x00, 0x0b]));
    expect(a.clockInfo).toEqual({ clock: 0x3356d0fdn, resetCount: 3, restartCount: 0, safe: true });
    expect(a.firmwareVersion).toBe(0x2020031200120003n);
    expect(a.attested.pcrSelect).toEqual([
      { hashAlg: TPM_ALG.SHA256, pcrs: [0, 1, 2, 3, 4, 5, 6, 7, 14], sizeofSelect: 3 },
    ]);
    expect(hex(a.attested.pcrDigest)).toBe(
      '9d608cf40eb5bc7454c6cbc0985c17c2efa45d5e5b28004aa7d77c1285d2fa5d',
    );
    // Re-marshalling gives the same bytes: nothing was dropped or defaulted.
    expect(marshalAttest(a)).toEqual(msg);
  });

  it('parses the v2 evidence quote and checks its signature with the AK of the HCL report', () => {
    const ev = JSON.parse(readFileSync(join(FIXTURES, 'az-snp-vtpm/evidence-v2.json'), 'utf8')) as AzEvidence;
    const message = unhex(ev.tpm_quote.message);
    const a = parseAttest(message);
    expect(a.extraData.length).toBe(48);
    expect(a.attested.pcrSelect).toEqual([{ hashAlg: TPM_ALG.SHA256, pcrs: [...ALL_PCRS], sizeofSelect: 3 }]);
    const pcrs = ev.tpm_quote.pcrs.map(unhex);
    expect(pcrDigest(pcrs, a.attested.pcrSelect, TPM_ALG.SHA256)).toEqual(a.attested.pcrDigest);

    // The HCL report's runtime claims hold the AK as a JWK (kid HCLAkPub).
    const hcl = Buffer.from(ev.hcl_report, 'base64url');
    const varSize = hcl.readUInt32LE(1232);
    const claims = JSON.parse(hcl.subarray(1236, 1236 + varSize).toString()) as {
      keys: { kid: string; kty: string; n: string; e: string }[];
    };
    const jwk = claims.keys.find((k) => k.kid === 'HCLAkPub')!;
    const ak = createPublicKey({ key: { kty: jwk.kty, n: jwk.n, e: jwk.e }, format: 'jwk' });
    const sig = { sigAlg: TPM_ALG.RSASSA, hash: TPM_ALG.SHA256, sig: unhex(ev.tpm_quote.signature) } as const;
    expect(verifySignature(ak, message, sig)).toBe(true);
    const tampered = message.slice();
    tampered[tampered.length - 1]! ^= 1;
    expect(verifySignature(ak, tampered, sig)).toBe(false);
    // The VCEK is not the AK: a signature check with the wrong key fails.
    const vcek = new X509Certificate(Buffer.from(ev.vcek, 'base64url')).publicKey;
    expect(() => verifySignature(vcek, message, sig)).toThrow();
  });

  it('verifies tpm-quote-v1.json (hex quote) with the AK of hcl-report.bin', () => {
    const hcl = Buffer.from(fixture('az-snp-vtpm/hcl-report.bin'));
    const varSize = hcl.readUInt32LE(1232);
    const claims = JSON.parse(hcl.subarray(1236, 1236 + varSize).toString()) as {
      keys: { kid: string; kty: string; n: string; e: string }[];
    };
    const jwk = claims.keys.find((k) => k.kid === 'HCLAkPub')!;
    const ak = createPublicKey({ key: { kty: jwk.kty, n: jwk.n, e: jwk.e }, format: 'jwk' });
    const q = JSON.parse(readFileSync(join(FIXTURES, 'az-snp-vtpm/tpm-quote-v1.json'), 'utf8')) as {
      signature: string;
      message: string;
      pcrs: string[];
    };
    const message = unhex(q.message);
    const a = parseAttest(message);
    expect(pcrDigest(q.pcrs.map(unhex), a.attested.pcrSelect, TPM_ALG.SHA256)).toEqual(a.attested.pcrDigest);
    const sig = { sigAlg: TPM_ALG.RSASSA, hash: TPM_ALG.SHA256, sig: unhex(q.signature) } as const;
    expect(verifySignature(ak, message, sig)).toBe(true);
    // A PCR list that does not match the digest is detected.
    const wrong = q.pcrs.map(unhex);
    wrong[3] = new Uint8Array(32).fill(1);
    expect(pcrDigest(wrong, a.attested.pcrSelect, TPM_ALG.SHA256)).not.toEqual(a.attested.pcrDigest);
  });
});

describe('trustee tpm fixture', () => {
  const ev = JSON.parse(readFileSync(join(FIXTURES, 'tpm/tpm_evidence.json'), 'utf8')) as {
    ak_public: string;
    tpm_quote: { signature: string; message: string; pcrs: string[] };
  };

  it('parses the TPMT_SIGNATURE and TPMS_ATTEST and verifies with ak_public', () => {
    const sigBytes = b64(ev.tpm_quote.signature);
    const sig = parseSignature(sigBytes);
    expect(sig.sigAlg).toBe(TPM_ALG.RSASSA);
    expect(sig.hash).toBe(TPM_ALG.SHA256);
    expect(marshalSignature(sig)).toEqual(sigBytes);
    const message = b64(ev.tpm_quote.message);
    const a = parseAttest(message);
    expect(marshalAttest(a)).toEqual(message);
    expect(a.attested.pcrSelect).toEqual([{ hashAlg: TPM_ALG.SHA256, pcrs: [...ALL_PCRS], sizeofSelect: 3 }]);
    expect(pcrDigest(ev.tpm_quote.pcrs.map(unhex), a.attested.pcrSelect, TPM_ALG.SHA256)).toEqual(
      a.attested.pcrDigest,
    );
    const ak = createPublicKey({ key: Buffer.from(ev.ak_public, 'base64'), format: 'der', type: 'spki' });
    expect(verifySignature(ak, message, sig)).toBe(true);
  });
});
