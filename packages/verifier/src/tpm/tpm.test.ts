import { createHash, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { pcr8FromInitDataDigest } from '@broker/protocol';
import {
  marshalAttest,
  marshalSignature,
  pcrDigest,
  pcrSelection,
  TPM_ALG,
  TPM_GENERATED_VALUE,
  TPM_ST,
  type TpmtSignature,
} from '@broker/tpm';
import { describe, expect, it } from 'vitest';
import { VerificationError, type VerificationErrorCode } from '../errors.js';
import { getVerifier } from '../registry.js';
import type { ExpectedData } from '../verifier.js';
import { type TpmClaims, TpmVerifier } from './index.js';

const FIXTURE = JSON.parse(readFileSync(vector('trustee/tpm/tpm_evidence.json'), 'utf8')) as {
  ak_public: string;
  tpm_quote: { signature: string; message: string; pcrs: string[] };
};

const verifier = new TpmVerifier();
const reportData = createHash('sha384').update('runtime data').digest();

async function failureCode(
  evidence: unknown,
  expected: Partial<ExpectedData> = {},
): Promise<VerificationErrorCode> {
  try {
    await verifier.evaluate(evidence, { reportData, ...expected });
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
  throw new Error('verification succeeded');
}

interface MadeEvidence {
  evidence: { ak_public: string; tpm_quote: { signature: string; message: string; pcrs: string[] } };
  ak: KeyObject;
}

/** Evidence as the AA's tpm attester makes it: RSASSA-SHA256 TPMT_SIGNATURE, report data resized to 32 bytes. */
function makeEvidence(
  o: { nonce?: Uint8Array; pcrs?: Map<number, Buffer>; sig?: (s: Buffer) => TpmtSignature } = {},
): MadeEvidence {
  const ak = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const nonce = o.nonce ?? reportData.subarray(0, 32);
  const pcrs = o.pcrs ?? new Map(Array.from({ length: 24 }, (_, i) => [i, Buffer.alloc(32, i)] as const));
  const indices = [...pcrs.keys()].sort((a, b) => a - b);
  const values: Uint8Array[] = [];
  for (const i of indices) values[i] = pcrs.get(i)!;
  const sel = [pcrSelection(TPM_ALG.SHA256, indices)];
  const message = Buffer.from(
    marshalAttest({
      magic: TPM_GENERATED_VALUE,
      type: TPM_ST.ATTEST_QUOTE,
      qualifiedSigner: Buffer.concat([Buffer.from([0, 0x0b]), Buffer.alloc(32, 1)]),
      extraData: nonce,
      clockInfo: { clock: 99n, resetCount: 1, restartCount: 0, safe: true },
      firmwareVersion: 1n,
      attested: { pcrSelect: sel, pcrDigest: pcrDigest(values, sel, TPM_ALG.SHA256) },
    }),
  );
  const raw = sign('sha256', message, ak.privateKey);
  const signature = marshalSignature(
    o.sig ? o.sig(raw) : { sigAlg: TPM_ALG.RSASSA, hash: TPM_ALG.SHA256, sig: raw },
  );
  return {
    evidence: {
      ak_public: ak.publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
      tpm_quote: {
        signature: Buffer.from(signature).toString('base64'),
        message: message.toString('base64'),
        pcrs: indices.map((i) => pcrs.get(i)!.toString('hex')),
      },
    },
    ak: ak.publicKey,
  };
}

describe('tpm verifier', () => {
  it('is registered', () => {
    expect(getVerifier('tpm')).toBeInstanceOf(TpmVerifier);
  });

  it("checks trustee's fixture: signature and PCR digest hold, its 64-byte nonce never matches", async () => {
    // The AA resizes report data to 32 bytes and trustee compares with the expected data resized
    // the same way; this capture carries 64 bytes, so upstream too can only verify it without
    // report data. Reaching the nonce check shows the signature and the PCR digest verified.
    expect(await failureCode(FIXTURE)).toBe('REPORT_DATA_MISMATCH');
    const nonce = Buffer.from(FIXTURE.tpm_quote.message, 'base64').subarray(0x24, 0x24 + 64);
    expect(await failureCode(FIXTURE, { reportData: nonce })).toBe('REPORT_DATA_MISMATCH');
  });

  it("verifies trustee's fixture without report data (ReportData::NotProvided), as upstream can", async () => {
    const out = await verifier.evaluate(FIXTURE, {
      reportData: Buffer.alloc(0),
      reportDataNotProvided: true,
    });
    expect(out).toHaveLength(1);
    // The flag, not an empty expectation, is what skips the check.
    expect(await failureCode(FIXTURE, { reportData: Buffer.alloc(0) })).toBe('REPORT_DATA_MISMATCH');
  });

  it('fails on every flipped byte of the fixture quote, signature and PCRs', async () => {
    for (const field of ['message', 'signature'] as const) {
      const bytes = Buffer.from(FIXTURE.tpm_quote[field], 'base64');
      for (let i = 0; i < bytes.length; i++) {
        const b = Buffer.from(bytes);
        b[i]! ^= 1;
        const c = await failureCode({
          ...FIXTURE,
          tpm_quote: { ...FIXTURE.tpm_quote, [field]: b.toString('base64') },
        });
        expect(['QUOTE_SIGNATURE_INVALID', 'REPORT_MALFORMED', 'UNSUPPORTED_ALGORITHM']).toContain(c);
      }
    }
    for (let p = 0; p < 24; p++) {
      const pcrs = [...FIXTURE.tpm_quote.pcrs];
      pcrs[p] = `${pcrs[p]!.slice(0, 10)}${pcrs[p]![10] === '0' ? '1' : '0'}${pcrs[p]!.slice(11)}`;
      expect(await failureCode({ ...FIXTURE, tpm_quote: { ...FIXTURE.tpm_quote, pcrs } })).toBe(
        'PCR_DIGEST_MISMATCH',
      );
    }
  });

  it("gives trustee's claims: PCRs at the top level, the AK as sent, hex nonce and PCR8", async () => {
    const { evidence } = makeEvidence();
    const [r] = await verifier.evaluate(evidence, { reportData });
    expect(r!.class).toBe('cpu');
    const c = r!.claims as TpmClaims;
    expect(c.ak_public).toBe(evidence.ak_public);
    expect(c.report_data).toBe(reportData.subarray(0, 32).toString('hex'));
    expect(c.init_data).toBe('08'.repeat(32));
    expect(c.pcr00).toBe('00'.repeat(32));
    expect(c.pcr23).toBe('17'.repeat(32));
    expect(Object.keys(c)).toHaveLength(27);
  });

  it('pads short report data with zeros, as the attester does', async () => {
    const short = Buffer.from('short');
    const nonce = Buffer.alloc(32);
    short.copy(nonce);
    const { evidence } = makeEvidence({ nonce });
    await expect(verifier.evaluate(evidence, { reportData: short })).resolves.toHaveLength(1);
    expect(await failureCode(evidence, { reportData: Buffer.from('shorT') })).toBe('REPORT_DATA_MISMATCH');
  });

  it('binds initdata through PCR8', async () => {
    const digest = createHash('sha256').update('initdata').digest();
    const pcrs = new Map<number, Buffer>(
      Array.from({ length: 24 }, (_, i) => [i, Buffer.alloc(32)] as const),
    );
    pcrs.set(8, pcr8FromInitDataDigest(digest));
    const { evidence } = makeEvidence({ pcrs });
    await expect(verifier.evaluate(evidence, { reportData, initDataHash: digest })).resolves.toHaveLength(1);
    expect(await failureCode(evidence, { initDataHash: createHash('sha256').update('x').digest() })).toBe(
      'INIT_DATA_MISMATCH',
    );
  });

  it('refuses a quote signed by another key than ak_public', async () => {
    const a = makeEvidence();
    const b = makeEvidence();
    expect(await failureCode({ ...a.evidence, ak_public: b.evidence.ak_public })).toBe(
      'QUOTE_SIGNATURE_INVALID',
    );
    expect(await failureCode({ ...FIXTURE, ak_public: a.evidence.ak_public })).toBe(
      'QUOTE_SIGNATURE_INVALID',
    );
  });

  it('accepts only RSASSA with SHA-256', async () => {
    const pss = makeEvidence({ sig: (sig) => ({ sigAlg: TPM_ALG.RSAPSS, hash: TPM_ALG.SHA256, sig }) });
    expect(await failureCode(pss.evidence)).toBe('UNSUPPORTED_ALGORITHM');
    const sha1 = makeEvidence({ sig: (sig) => ({ sigAlg: TPM_ALG.RSASSA, hash: TPM_ALG.SHA1, sig }) });
    expect(await failureCode(sha1.evidence)).toBe('UNSUPPORTED_ALGORITHM');
  });

  it('refuses an AK that is not an RSA SPKI', async () => {
    const { evidence } = makeEvidence();
    expect(await failureCode({ ...evidence, ak_public: Buffer.from('garbage').toString('base64') })).toBe(
      'AK_INVALID',
    );
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({
      type: 'spki',
      format: 'der',
    });
    expect(await failureCode({ ...evidence, ak_public: ec.toString('base64') })).toBe('AK_INVALID');
  });

  it('refuses PCR lists that do not match the quote', async () => {
    const { evidence } = makeEvidence();
    const q = evidence.tpm_quote;
    expect(await failureCode({ ...evidence, tpm_quote: { ...q, pcrs: q.pcrs.slice(1) } })).toBe(
      'PCR_DIGEST_MISMATCH',
    );
    const pcrs = [...q.pcrs];
    pcrs[5] = 'ff'.repeat(32);
    expect(await failureCode({ ...evidence, tpm_quote: { ...q, pcrs } })).toBe('PCR_DIGEST_MISMATCH');
  });

  it('refuses malformed evidence', async () => {
    const { evidence } = makeEvidence();
    const q = evidence.tpm_quote;
    const cases: [unknown, VerificationErrorCode][] = [
      [null, 'EVIDENCE_MALFORMED'],
      [{}, 'EVIDENCE_MALFORMED'],
      [{ ...evidence, ak_public: 7 }, 'EVIDENCE_MALFORMED'],
      [{ ...evidence, ak_public: 'A'.repeat(5000) }, 'EVIDENCE_TOO_LARGE'],
      [{ ...evidence, ak_public: 'not base64' }, 'EVIDENCE_MALFORMED'],
      [{ ...evidence, tpm_quote: null }, 'EVIDENCE_MALFORMED'],
      [{ ...evidence, tpm_quote: { ...q, signature: 'AAAA' } }, 'REPORT_MALFORMED'],
      [{ ...evidence, tpm_quote: { ...q, signature: 'A'.repeat(2000) } }, 'EVIDENCE_TOO_LARGE'],
      [{ ...evidence, tpm_quote: { ...q, message: 'A'.repeat(5000) } }, 'EVIDENCE_TOO_LARGE'],
      [{ ...evidence, tpm_quote: { ...q, message: q.message.replace(/=*$/, '') } }, 'EVIDENCE_MALFORMED'],
      [
        { ...evidence, tpm_quote: { ...q, pcrs: [...q.pcrs.slice(1), 'zz'.repeat(32)] } },
        'EVIDENCE_MALFORMED',
      ],
      [
        { ...evidence, tpm_quote: { ...q, pcrs: [...q.pcrs.slice(1), '00'.repeat(48)] } },
        'EVIDENCE_MALFORMED',
      ],
      [{ ...evidence, tpm_quote: { ...q, pcrs: Array(40).fill(q.pcrs[0]) } }, 'EVIDENCE_TOO_LARGE'],
    ];
    for (const [ev, c] of cases) expect(await failureCode(ev), JSON.stringify(ev).slice(0, 100)).toBe(c);
  });

  it('refuses a signed message that is not a quote', async () => {
    // A validly signed TPMS_ATTEST of another type must not pass as a quote.
    const ak = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const msg = Buffer.from(
      marshalAttest({
        magic: TPM_GENERATED_VALUE,
        type: TPM_ST.ATTEST_QUOTE,
        qualifiedSigner: Buffer.alloc(0),
        extraData: reportData.subarray(0, 32),
        clockInfo: { clock: 0n, resetCount: 0, restartCount: 0, safe: true },
        firmwareVersion: 0n,
        attested: { pcrSelect: [], pcrDigest: Buffer.alloc(0) },
      }),
    );
    msg.writeUInt16BE(TPM_ST.ATTEST_CERTIFY, 4);
    const sig = marshalSignature({
      sigAlg: TPM_ALG.RSASSA,
      hash: TPM_ALG.SHA256,
      sig: sign('sha256', msg, ak.privateKey),
    });
    const evidence = {
      ak_public: ak.publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
      tpm_quote: {
        signature: Buffer.from(sig).toString('base64'),
        message: msg.toString('base64'),
        pcrs: [],
      },
    };
    expect(await failureCode(evidence)).toBe('REPORT_MALFORMED');
  });
});
