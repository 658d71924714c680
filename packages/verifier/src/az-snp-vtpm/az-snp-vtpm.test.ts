import { createHash, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { pcr8FromInitDataDigest } from '@broker/protocol';
import { describe, expect, it } from 'vitest';
import { VerificationError, type VerificationErrorCode } from '../errors.js';
import { getVerifier } from '../registry.js';
import { pemCertificates } from '../snp/certs.js';
import { createTestAmdRoots, issueTestVek } from '../snp/test-roots.js';
import type { ExpectedData } from '../verifier.js';
import { type AzSnpVtpmClaims, AzSnpVtpmVerifier } from './index.js';
import { makeTestEvidence, TEST_CHIP_ID, TEST_TCB, testRoots } from './test-evidence.js';

const DIR = vector('trustee/az-snp-vtpm');
const V1 = JSON.parse(readFileSync(`${DIR}/evidence-v1.json`, 'utf8')) as Record<string, unknown>;
const V2 = JSON.parse(readFileSync(`${DIR}/evidence-v2.json`, 'utf8')) as Record<string, unknown>;
const HCL_REPORT = readFileSync(`${DIR}/hcl-report.bin`);
const TPM_QUOTE_V1 = JSON.parse(readFileSync(`${DIR}/tpm-quote-v1.json`, 'utf8')) as Record<string, unknown>;
const VCEK_PEM = readFileSync(`${DIR}/vcek.pem`, 'utf8');
const INVALID_VCEK = readFileSync(vector('trustee/snp/test-vcek-invalid-new.der'));

/** v0/v1 were captured with report data "challenge". */
const CHALLENGE = Buffer.from('challenge');
/** v2's report data, from trustee's az_snp_vtpm tests (EVIDENCE_V2_REPORT_DATA). */
const V2_REPORT_DATA = Buffer.from(
  '982f5c6e45df0ed3f10b6f60b02f0c8390e281300f3805e2279c16168cd6ae9aa398f647caa2338748cd0fd9f5f819ef',
  'hex',
);
/**
 * The v1 and v2 VCEKs are valid from 2025-01-28 to 2032-01-28, vcek.pem from 2023-05-02 to
 * 2030-05-02; AMD's Milan ARK and ASK until 2045. Any time in the overlap will do.
 */
const AT = new Date('2025-06-01T00:00:00Z');

const verifier = new AzSnpVtpmVerifier();

async function claimsOf(evidence: unknown, expected: Partial<ExpectedData> & { reportData: Uint8Array }) {
  const out = await verifier.evaluate(evidence, { now: AT, ...expected });
  expect(out).toHaveLength(1);
  expect(out[0]!.class).toBe('cpu');
  return out[0]!.claims as unknown as AzSnpVtpmClaims;
}

async function failure(evidence: unknown, expected: Partial<ExpectedData> = {}): Promise<VerificationError> {
  try {
    await verifier.evaluate(evidence, { reportData: CHALLENGE, now: AT, ...expected });
  } catch (e) {
    if (e instanceof VerificationError) return e;
    throw e;
  }
  throw new Error('verification succeeded');
}

async function failureCode(
  evidence: unknown,
  expected: Partial<ExpectedData> = {},
): Promise<VerificationErrorCode> {
  return (await failure(evidence, expected)).code;
}

const clone = <T>(v: T): T => structuredClone(v);
const hcl1 = () => Buffer.from(V1.hcl_report as string, 'base64url');
const withHcl = (ev: Record<string, unknown>, hcl: Buffer) => ({
  ...ev,
  hcl_report: hcl.toString('base64url'),
});
const quote1 = () => clone(V1.tpm_quote) as { signature: string; message: string; pcrs: string[] };

/** A v1 evidence from trustee's separate hcl-report.bin, tpm-quote-v1.json and vcek.pem. */
function assembledV1(): Record<string, unknown> {
  return {
    version: 1,
    tpm_quote: TPM_QUOTE_V1,
    hcl_report: HCL_REPORT.toString('base64url'),
    vcek: pemCertificates(VCEK_PEM, 3)[0]!.toString('base64url'),
  };
}

/** The same capture in the unversioned v0 shape: byte arrays as numbers, the VCEK as PEM. */
function v0Of(ev: Record<string, unknown>, vcekPem: string): Record<string, unknown> {
  const q = ev.tpm_quote as { signature: string; message: string; pcrs: string[] };
  return {
    quote: {
      signature: [...Buffer.from(q.signature, 'hex')],
      message: [...Buffer.from(q.message, 'hex')],
      pcrs: q.pcrs.map((p) => [...Buffer.from(p, 'hex')]),
    },
    report: [...Buffer.from(ev.hcl_report as string, 'base64url')],
    vcek: vcekPem,
  };
}

describe('az-snp-vtpm: real Azure evidence with AMD roots', () => {
  it('is registered', () => {
    expect(getVerifier('az-snp-vtpm')).toBeInstanceOf(AzSnpVtpmVerifier);
  });

  it('verifies evidence v1 with report data "challenge", with upstream claims', async () => {
    const c = await claimsOf(V1, { reportData: CHALLENGE });
    expect(c.report_data).toBe('6368616c6c656e6765');
    expect(c.tpm.pcr00).toBe('e15c44796beabf46abcec7c57e590942041e47497e4ec27571c8b7664f48dced');
    expect(Object.keys(c.tpm)).toEqual(
      Array.from({ length: 24 }, (_, i) => `pcr${String(i).padStart(2, '0')}`),
    );
    expect(c.init_data).toBe(c.tpm.pcr08);
    expect(c).toMatchObject({
      policy_abi_major: '0',
      policy_abi_minor: '31',
      policy_smt_allowed: 'true',
      policy_migrate_ma: 'false',
      policy_debug_allowed: 'false',
      policy_single_socket: 'false',
      reported_tcb_bootloader: '4',
      reported_tcb_tee: '0',
      reported_tcb_snp: '24',
      reported_tcb_microcode: '219',
      platform_tsme_enabled: 'false',
      platform_smt_enabled: 'true',
    });
    expect(Buffer.from(c.measurement, 'base64')).toHaveLength(48);
    expect(Object.keys(c).sort()).toEqual(
      [
        'init_data',
        'measurement',
        'platform_smt_enabled',
        'platform_tsme_enabled',
        'policy_abi_major',
        'policy_abi_minor',
        'policy_debug_allowed',
        'policy_migrate_ma',
        'policy_single_socket',
        'policy_smt_allowed',
        'report_data',
        'reported_tcb_bootloader',
        'reported_tcb_microcode',
        'reported_tcb_snp',
        'reported_tcb_tee',
        'tpm',
      ].sort(),
    );
    for (const v of Object.values(c)) if (typeof v !== 'object') expect(typeof v).toBe('string');
  });

  it('verifies evidence v2 with its 48-byte report data (also bound in the HCL user-data)', async () => {
    const c = await claimsOf(V2, { reportData: V2_REPORT_DATA });
    expect(c.report_data).toBe(V2_REPORT_DATA.toString('hex'));
    expect(c.tpm.pcr00).toBe('84275b2f4312cd4fc6cbe6b152ad3c3683e513d9f1e23c34fca160c8cca7a6a7');
  });

  it("verifies trustee's separate HCL report, quote and VCEK put together", async () => {
    const c = await claimsOf(assembledV1(), { reportData: CHALLENGE });
    expect(c.report_data).toBe('6368616c6c656e6765');
  });

  it('verifies the same captures in the v0 shape (VCEK as a PEM bundle)', async () => {
    await claimsOf(v0Of(assembledV1(), VCEK_PEM), { reportData: CHALLENGE });
    const der = Buffer.from(V1.vcek as string, 'base64url');
    const pem = `-----BEGIN CERTIFICATE-----\n${der.toString('base64')}\n-----END CERTIFICATE-----\n`;
    await claimsOf(v0Of(V1, pem), { reportData: CHALLENGE });
  });

  it('refuses other report data (nonce, and the v2 user-data)', async () => {
    expect(await failureCode(V1, { reportData: Buffer.from('challengf') })).toBe('REPORT_DATA_MISMATCH');
    expect(await failureCode(V1, { reportData: Buffer.from('challenge\0') })).toBe('REPORT_DATA_MISMATCH');
    const other = Buffer.from(V2_REPORT_DATA);
    other[47]! ^= 1;
    expect(await failureCode(V2, { reportData: other })).toBe('REPORT_DATA_MISMATCH');
  });

  it('checks the certificates at the verification time', async () => {
    expect(await failureCode(V1, { now: new Date('2025-01-01T00:00:00Z') })).toBe('CERT_NOT_VALID_AT_TIME');
    expect(await failureCode(V1, { now: new Date('2032-02-01T00:00:00Z') })).toBe('CERT_NOT_VALID_AT_TIME');
  });

  it('refuses an initdata digest that PCR8 does not hold, and one that is not SHA-256', async () => {
    const digest = createHash('sha256').update('initdata').digest();
    expect(await failureCode(V1, { initDataHash: digest })).toBe('INIT_DATA_MISMATCH');
    expect(await failureCode(V1, { initDataHash: Buffer.alloc(48) })).toBe('INIT_DATA_MISMATCH');
  });
});

describe('az-snp-vtpm: tampering with signed bytes', () => {
  async function mustFail(
    label: string,
    evidence: unknown,
    reportData: Uint8Array = CHALLENGE,
  ): Promise<void> {
    try {
      await verifier.evaluate(evidence, { reportData, now: AT });
    } catch (e) {
      if (e instanceof VerificationError) return;
      throw new Error(`${label}: ${String(e)}`);
    }
    throw new Error(`${label} went unnoticed`);
  }

  it('fails on every flipped bit-0 of the quote message and signature', async () => {
    for (const field of ['message', 'signature'] as const) {
      const bytes = Buffer.from(quote1()[field], 'hex');
      for (let i = 0; i < bytes.length; i++) {
        const b = Buffer.from(bytes);
        b[i]! ^= 1;
        await mustFail(`quote ${field} byte ${i}`, {
          ...V1,
          tpm_quote: { ...quote1(), [field]: b.toString('hex') },
        });
      }
    }
  });

  it('fails on every flipped byte of every PCR value', async () => {
    const q = quote1();
    for (let p = 0; p < q.pcrs.length; p++) {
      const bytes = Buffer.from(q.pcrs[p]!, 'hex');
      for (let i = 0; i < bytes.length; i++) {
        const b = Buffer.from(bytes);
        b[i]! ^= 0x80;
        const pcrs = [...q.pcrs];
        pcrs[p] = b.toString('hex');
        await mustFail(`PCR ${p} byte ${i}`, { ...V1, tpm_quote: { ...q, pcrs } });
      }
    }
  });

  it('fails on every flipped byte of the signed SNP report and of the HCL runtime claims', async () => {
    const hcl = hcl1();
    const ranges: [number, number][] = [
      [32, 32 + 0x2a0 + 144], // the SNP report's signed bytes and r, s
      [1236, 1236 + 1110], // the runtime claims (variable data)
    ];
    for (const [from, to] of ranges) {
      for (let i = from; i < to; i++) {
        const b = Buffer.from(hcl);
        b[i]! ^= 1;
        await mustFail(`HCL byte ${i}`, withHcl(V1, b));
      }
    }
  });

  it('fails on every flipped byte of the VCEK', async () => {
    const der = Buffer.from(V1.vcek as string, 'base64url');
    for (let i = 0; i < der.length; i++) {
      const b = Buffer.from(der);
      b[i]! ^= 1;
      await mustFail(`VCEK byte ${i}`, { ...V1, vcek: b.toString('base64url') });
    }
  });
});

describe('az-snp-vtpm: bad input', () => {
  it('names the failing check', async () => {
    // Not signed by the AK of this HCL report: the v2 quote with the v1 report.
    expect(await failureCode({ ...V1, tpm_quote: V2.tpm_quote })).toBe('QUOTE_SIGNATURE_INVALID');
    // Corrupted quote.
    const q = quote1();
    q.message = `${q.message.slice(0, 40)}00${q.message.slice(42)}`;
    expect(await failureCode({ ...V1, tpm_quote: q })).toBe('QUOTE_SIGNATURE_INVALID');
    // trustee's test_verify_akpub_failure: a NUL in the runtime claims leaves no AK.
    const noAk = hcl1();
    noAk[0x540] = 0;
    expect(await failureCode(withHcl(V1, noAk))).toBe('AK_INVALID');
    // trustee's test_verify_report_data_failure: runtime claims changed outside the AK.
    const claims = hcl1();
    claims[0x6e0]! += 1;
    expect(await failureCode(withHcl(V1, claims))).toBe('HCL_DATA_MISMATCH');
    // trustee's test_verify_snp_report_failure: the reported SNP SVN changed.
    const svn = hcl1();
    svn[0x1a6] = 0;
    expect(await failureCode(withHcl(V1, svn))).toBe('REPORT_SIGNATURE_INVALID');
  });

  it('refuses truncated and oversize HCL reports', async () => {
    for (const n of [0, 31, 100, 1215, 1235, 1236, 1236 + 1109]) {
      expect(await failureCode(withHcl(V1, hcl1().subarray(0, n)))).toBe('REPORT_MALFORMED');
    }
    expect(await failureCode(withHcl(V1, Buffer.concat([hcl1(), Buffer.alloc(16 * 1024)])))).toBe(
      'EVIDENCE_TOO_LARGE',
    );
  });

  it('refuses HCL reports of another kind or hash', async () => {
    const magic = hcl1();
    magic[0] = 0;
    expect(await failureCode(withHcl(V1, magic))).toBe('REPORT_MALFORMED');
    const tdx = hcl1();
    tdx.writeUInt32LE(4, 1216 + 8);
    expect(await failureCode(withHcl(V1, tdx))).toBe('REPORT_MALFORMED');
    const type = hcl1();
    type.writeUInt32LE(7, 1216 + 8);
    expect(await failureCode(withHcl(V1, type))).toBe('REPORT_MALFORMED');
    const hash = hcl1();
    hash.writeUInt32LE(2, 1216 + 12);
    expect(await failureCode(withHcl(V1, hash))).toBe('UNSUPPORTED_ALGORITHM');
    const huge = hcl1();
    huge.writeUInt32LE(0xffffffff, 1216 + 16);
    expect(await failureCode(withHcl(V1, huge))).toBe('EVIDENCE_TOO_LARGE');
  });

  it('refuses a VCEK from another chain', async () => {
    expect(await failureCode({ ...V1, vcek: INVALID_VCEK.toString('base64url') })).toBe('CERT_CHAIN_INVALID');
    const since = new Date('2020-01-01T00:00:00Z');
    const other = createTestAmdRoots({ product: 'Other', notBefore: since });
    const foreign = issueTestVek(other, {
      tcb: { bootloader: 4, tee: 0, snp: 24, microcode: 219 },
      notBefore: since,
    });
    expect(await failureCode({ ...V1, vcek: foreign.der.toString('base64url') })).toBe('CERT_CHAIN_INVALID');
    // Trusting that root does not make its VCEK the signer of AMD's report.
    expect(
      await failureCode(
        { ...V1, vcek: foreign.der.toString('base64url') },
        { trustedArks: [other.bundlePem] },
      ),
    ).toBe('REPORT_SIGNATURE_INVALID');
    // A genuine AMD VCEK of another chip.
    expect(await failureCode({ ...V1, vcek: V2.vcek })).toBe('REPORT_SIGNATURE_INVALID');
  });

  it('refuses PCR lists that do not match the quote', async () => {
    const q = quote1();
    expect(await failureCode({ ...V1, tpm_quote: { ...q, pcrs: q.pcrs.slice(0, 23) } })).toBe(
      'PCR_DIGEST_MISMATCH',
    );
    expect(await failureCode({ ...V1, tpm_quote: { ...q, pcrs: [...q.pcrs, q.pcrs[0]] } })).toBe(
      'PCR_DIGEST_MISMATCH',
    );
    const swapped = [...q.pcrs];
    [swapped[0], swapped[1]] = [swapped[1]!, swapped[0]!];
    expect(await failureCode({ ...V1, tpm_quote: { ...q, pcrs: swapped } })).toBe('PCR_DIGEST_MISMATCH');
    expect(await failureCode({ ...V1, tpm_quote: { ...q, pcrs: [] } })).toBe('PCR_DIGEST_MISMATCH');
    const short = [...q.pcrs];
    short[3] = short[3]!.slice(2);
    expect(await failureCode({ ...V1, tpm_quote: { ...q, pcrs: short } })).toBe('EVIDENCE_MALFORMED');
    const long = [...q.pcrs];
    long[3] = `${long[3]}00`;
    expect(await failureCode({ ...V1, tpm_quote: { ...q, pcrs: long } })).toBe('EVIDENCE_MALFORMED');
    expect(await failureCode({ ...V1, tpm_quote: { ...q, pcrs: Array(33).fill(q.pcrs[0]) } })).toBe(
      'EVIDENCE_TOO_LARGE',
    );
  });

  it('refuses oversize members before decoding them', async () => {
    const q = quote1();
    expect(await failureCode({ ...V1, tpm_quote: { ...q, signature: 'ab'.repeat(513) } })).toBe(
      'EVIDENCE_TOO_LARGE',
    );
    expect(await failureCode({ ...V1, tpm_quote: { ...q, message: 'ab'.repeat(2049) } })).toBe(
      'EVIDENCE_TOO_LARGE',
    );
    expect(await failureCode({ ...V1, vcek: 'A'.repeat(30000) })).toBe('EVIDENCE_TOO_LARGE');
    expect(await failureCode({ ...V1, hcl_report: 'A'.repeat(30000) })).toBe('EVIDENCE_TOO_LARGE');
    expect(
      await failureCode({
        quote: { signature: Array(600).fill(0), message: [], pcrs: [] },
        report: [],
        vcek: '',
      }),
    ).toBe('EVIDENCE_TOO_LARGE');
  });

  it('refuses malformed evidence JSON', async () => {
    const cases: [unknown, VerificationErrorCode][] = [
      [null, 'EVIDENCE_MALFORMED'],
      ['evidence', 'EVIDENCE_MALFORMED'],
      [[V1], 'EVIDENCE_MALFORMED'],
      [{}, 'EVIDENCE_MALFORMED'],
      [{ ...V1, version: 3 }, 'UNSUPPORTED_VERSION'],
      [{ ...V1, version: '1' }, 'UNSUPPORTED_VERSION'],
      [{ ...V1, tpm_quote: undefined }, 'EVIDENCE_MALFORMED'],
      [{ ...V1, tpm_quote: { ...quote1(), signature: 'xyz' } }, 'EVIDENCE_MALFORMED'],
      [{ ...V1, tpm_quote: { ...quote1(), message: 'abc' } }, 'EVIDENCE_MALFORMED'],
      [{ ...V1, tpm_quote: { ...quote1(), pcrs: 'x' } }, 'EVIDENCE_MALFORMED'],
      [{ ...V1, tpm_quote: { ...quote1(), pcrs: [1] } }, 'EVIDENCE_MALFORMED'],
      [{ ...V1, hcl_report: `${V1.hcl_report as string}=` }, 'EVIDENCE_MALFORMED'],
      [{ ...V1, hcl_report: (V1.hcl_report as string).replace(/[-_]/, '+') }, 'EVIDENCE_MALFORMED'],
      [{ ...V1, vcek: 'not base64!' }, 'EVIDENCE_MALFORMED'],
      [{ ...V1, vcek: Buffer.from('not a certificate').toString('base64url') }, 'CERT_MALFORMED'],
      [{ ...V1, vcek: Buffer.alloc(0).toString('base64url') }, 'CERT_MALFORMED'],
      [{ quote: {}, report: [], vcek: '' }, 'EVIDENCE_MALFORMED'],
      [{ quote: { signature: [256], message: [], pcrs: [] }, report: [], vcek: '' }, 'EVIDENCE_MALFORMED'],
    ];
    for (const [ev, c] of cases) expect(await failureCode(ev), JSON.stringify(ev).slice(0, 80)).toBe(c);
  });

  it('reads padded and unpadded base64url, as serde_with does', async () => {
    const unpadded = { ...V1, hcl_report: (V1.hcl_report as string).replace(/=+$/, '') };
    await claimsOf(unpadded, { reportData: CHALLENGE });
  });

  it('does not crash on random quote messages and HCL reports', async () => {
    let seed = 11;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed & 0xff;
    };
    for (let i = 0; i < 200; i++) {
      const len = rnd() * 12;
      const b = Buffer.alloc(len);
      for (let j = 0; j < len; j++) b[j] = rnd();
      if (i % 2 === 0 && len >= 4) b.writeUInt32LE(0x414c4348, 0);
      const err = await failure(
        i % 3 === 0 ? { ...V1, tpm_quote: { ...quote1(), message: b.toString('hex') } } : withHcl(V1, b),
      );
      expect(err).toBeInstanceOf(VerificationError);
    }
  });
});

describe('az-snp-vtpm: evidence from a configured test root', () => {
  const nonce = createHash('sha384').update('runtime data').digest();
  const trustedArks = [testRoots().bundlePem];
  const run = (evidence: unknown, expected: Partial<ExpectedData> = {}) =>
    verifier.evaluate(evidence, { reportData: nonce, trustedArks, ...expected });

  it('verifies only when the test root is configured', async () => {
    const t = makeTestEvidence({ nonce });
    const [r] = await run(t.evidence);
    const c = r!.claims as unknown as AzSnpVtpmClaims;
    expect(c.report_data).toBe(nonce.toString('hex'));
    expect(c.reported_tcb_snp).toBe(String(TEST_TCB.snp));
    expect(await failureCode(t.evidence, { reportData: nonce })).toBe('CERT_CHAIN_INVALID');
    expect(TEST_CHIP_ID).toHaveLength(64);
  });

  it('binds initdata through PCR8', async () => {
    const digest = createHash('sha256').update('version = "0.1.0"\n').digest();
    const pcrs = new Map<number, Buffer>(
      Array.from({ length: 24 }, (_, i) => [i, Buffer.alloc(32, i)] as const),
    );
    pcrs.set(8, pcr8FromInitDataDigest(digest));
    const t = makeTestEvidence({ nonce, pcrs });
    const [r] = await run(t.evidence, { initDataHash: digest });
    expect((r!.claims as unknown as AzSnpVtpmClaims).init_data).toBe(
      pcr8FromInitDataDigest(digest).toString('hex'),
    );
    const other = createHash('sha256').update('other').digest();
    await expect(run(t.evidence, { initDataHash: other })).rejects.toMatchObject({
      code: 'INIT_DATA_MISMATCH',
    });
  });

  it('names PCRs by the quote selection when only some are quoted', async () => {
    const pcrs = new Map([3, 8, 9, 11, 12].map((i) => [i, Buffer.alloc(32, i)] as const));
    const t = makeTestEvidence({ nonce, pcrs });
    const [r] = await run(t.evidence);
    const c = r!.claims as unknown as AzSnpVtpmClaims;
    expect(c.tpm).toEqual({
      pcr03: '03'.repeat(32),
      pcr08: '08'.repeat(32),
      pcr09: '09'.repeat(32),
      pcr11: '0b'.repeat(32),
      pcr12: '0c'.repeat(32),
    });
    expect(c.init_data).toBe('08'.repeat(32));
    // Without PCR8 the initdata cannot be checked, and upstream's HOST_DATA claim stays.
    const noPcr8 = makeTestEvidence({ nonce, pcrs: new Map([[3, Buffer.alloc(32, 3)]]) });
    const [r2] = await run(noPcr8.evidence);
    expect((r2!.claims as unknown as AzSnpVtpmClaims).init_data).toBe(Buffer.alloc(32).toString('base64'));
    await expect(run(noPcr8.evidence, { initDataHash: Buffer.alloc(32) })).rejects.toMatchObject({
      code: 'INIT_DATA_MISMATCH',
    });
  });

  it('checks the v2 HCL user-data, and not in v1', async () => {
    const t = makeTestEvidence({ nonce, userData: Buffer.alloc(64, 1) });
    await expect(run(t.evidence)).rejects.toMatchObject({ code: 'REPORT_DATA_MISMATCH' });
    await expect(run({ ...t.evidence, version: 1 })).resolves.toHaveLength(1);
    // The user-data holds 64 bytes; a longer nonce (TPM2B_DATA allows 66) cannot be in it.
    const short = makeTestEvidence({ nonce: Buffer.alloc(66, 2), userData: Buffer.alloc(64, 2) });
    await expect(run(short.evidence, { reportData: Buffer.alloc(66, 2) })).rejects.toMatchObject({
      code: 'REPORT_DATA_MISMATCH',
    });
  });

  it('requires VMPL 0', async () => {
    const t = makeTestEvidence({ nonce, vmpl: 2 });
    await expect(run(t.evidence)).rejects.toMatchObject({ code: 'VMPL_MISMATCH' });
  });

  it('requires the SNP report to vouch for the runtime claims', async () => {
    const t = makeTestEvidence({ nonce, snpReportData: Buffer.alloc(32, 9) });
    await expect(run(t.evidence)).rejects.toMatchObject({ code: 'HCL_DATA_MISMATCH' });
  });

  it('refuses a quote signed by another key than HCLAkPub', async () => {
    const t = makeTestEvidence({
      nonce,
      quoteKey: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
    });
    await expect(run(t.evidence)).rejects.toMatchObject({ code: 'QUOTE_SIGNATURE_INVALID' });
  });
});
