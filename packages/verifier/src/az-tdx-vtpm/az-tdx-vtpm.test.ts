import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { pcr8FromInitDataDigest } from '@broker/protocol';
import { beforeAll, describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import {
  createTestQuotingEnclave,
  createTestSgxPki,
  issueTestPck,
  signCollateral,
  type TestPlatform,
  type TestQuotingEnclave,
  type TestSgxPki,
  testQeIdentity,
  testTcbInfo,
} from '../tdx/test-pki.js';
import type { TdxVerifierOptions } from '../tdx/verify.js';
import { parseAzTdxVtpmEvidence } from './evidence.js';
import { AzTdxVtpmVerifier } from './index.js';
import { makeAzTdxTestEvidence } from './test-evidence.js';

const DIR = vector('trustee/az-tdx-vtpm');
const FIXTURE = JSON.parse(readFileSync(`${DIR}/evidence-v1.json`, 'utf8')) as Record<string, unknown>;
const TCB_INFO = readFileSync(vector('trustee/tdx/tcbInfo.json'), 'utf8');
const QE_IDENTITY = readFileSync(vector('trustee/tdx/enclaveIdentity.json'), 'utf8');
const CHALLENGE = Buffer.from('challenge');
const AT = new Date('2025-11-01T00:00:00Z');

const verifier = new AzTdxVtpmVerifier();

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
  return undefined;
}

describe('az-tdx-vtpm evidence-v1.json (captured on Azure)', () => {
  const collateral = { tcbInfos: [TCB_INFO], qeIdentity: QE_IDENTITY };

  it('parses as v1', () => {
    const ev = parseAzTdxVtpmEvidence(FIXTURE);
    expect(ev.version).toBe(1);
    expect(ev.tdQuote.length).toBe(5006);
    expect(ev.tpmQuote.pcrs).toHaveLength(24);
  });

  it('passes every check but the TCB status, for which the fixture collateral is of another platform', async () => {
    // AK signature, nonce, PCR digest, TD quote to Intel's root, HCL runtime claims = TD REPORT_DATA:
    // all pass; the TCB info is for FMSPC 00A06D080000, the quote's PCK certifies 00806F050000.
    const err = await verifier
      .evaluate(FIXTURE, { reportData: CHALLENGE, now: AT, tdx: { collateral } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VerificationError);
    expect((err as VerificationError).code).toBe('COLLATERAL_MISMATCH');
    expect((err as Error).message).toContain('00806F050000');
    expect(await codeOf(verifier.evaluate(FIXTURE, { reportData: CHALLENGE, now: AT }))).toBe(
      'COLLATERAL_UNAVAILABLE',
    );
  });

  it('fails on another nonce, a tampered quote, PCR or HCL report', async () => {
    const run = (ev: unknown, rd = CHALLENGE) =>
      codeOf(verifier.evaluate(ev, { reportData: rd, now: AT, tdx: { collateral } }));
    expect(await run(FIXTURE, Buffer.from('challengf'))).toBe('REPORT_DATA_MISMATCH');
    const q = FIXTURE.tpm_quote as { signature: string; message: string; pcrs: string[] };
    const flipHex = (h: string, at: number) => h.slice(0, at) + (h[at] === '0' ? '1' : '0') + h.slice(at + 1);
    expect(await run({ ...FIXTURE, tpm_quote: { ...q, signature: flipHex(q.signature, 10) } })).toBe(
      'QUOTE_SIGNATURE_INVALID',
    );
    expect(
      await run({
        ...FIXTURE,
        tpm_quote: { ...q, pcrs: q.pcrs.map((p, i) => (i === 3 ? flipHex(p, 0) : p)) },
      }),
    ).toBe('PCR_DIGEST_MISMATCH');
    const td = Buffer.from(FIXTURE.td_quote as string, 'base64url');
    td[48 + 200]! ^= 1;
    expect(await run({ ...FIXTURE, td_quote: td.toString('base64url') })).toBe('REPORT_SIGNATURE_INVALID');
    // The runtime claims (after the AK, so the AK still verifies): the quote no longer vouches for them.
    const hcl = Buffer.from(FIXTURE.hcl_report as string, 'base64url');
    const claimsAt = 1236;
    const text = hcl.subarray(claimsAt).toString('latin1');
    const at = claimsAt + text.indexOf('"vm-configuration"') + 3;
    hcl[at] = hcl[at] === 0x6d ? 0x4d : 0x6d;
    expect(await run({ ...FIXTURE, hcl_report: hcl.toString('base64url') })).toBe('HCL_DATA_MISMATCH');
  });

  it('refuses an SNP HCL report and unknown versions', async () => {
    const snp = JSON.parse(readFileSync(vector('trustee/az-snp-vtpm/evidence-v1.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(
      await codeOf(verifier.evaluate({ ...FIXTURE, hcl_report: snp.hcl_report }, { reportData: CHALLENGE })),
    ).toBe('REPORT_MALFORMED');
    expect(await codeOf(verifier.evaluate({ ...FIXTURE, version: 9 }, { reportData: CHALLENGE }))).toBe(
      'UNSUPPORTED_VERSION',
    );
    expect(
      await codeOf(
        verifier.evaluate({ ...FIXTURE, td_quote: 'A'.repeat(100_000) }, { reportData: CHALLENGE }),
      ),
    ).toBe('EVIDENCE_TOO_LARGE');
  });
});

describe('az-tdx-vtpm on test hardware', () => {
  const PLATFORM: TestPlatform = {
    fmspc: Buffer.from('00806f050000', 'hex'),
    tcbComponents: [6, 6, 2, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0],
    pceSvn: 11,
  };
  const NONCE = createHash('sha384').update('nonce').digest();
  let pki: TestSgxPki;
  let qe: TestQuotingEnclave;
  let tdx: TdxVerifierOptions;

  beforeAll(() => {
    pki = createTestSgxPki();
    qe = createTestQuotingEnclave(pki, issueTestPck(pki, PLATFORM));
    tdx = {
      trustedSgxRoots: [pki.root.pem],
      collateral: {
        tcbInfos: [
          signCollateral('tcbInfo', testTcbInfo(PLATFORM, Array(16).fill(0)), pki.tcbSigning.privateKey),
        ],
        qeIdentity: signCollateral('enclaveIdentity', testQeIdentity(), pki.tcbSigning.privateKey),
        signingCerts: [pki.tcbSigning.pem],
      },
    };
  });

  it('verifies v2 evidence with PCR8 bound to the initdata', async () => {
    const initdata = createHash('sha256').update('initdata').digest();
    const pcrs = new Map(
      Array.from(
        { length: 24 },
        (_, i) => [i, i === 8 ? pcr8FromInitDataDigest(initdata) : Buffer.alloc(32, i)] as const,
      ),
    );
    const ev = makeAzTdxTestEvidence(qe, { nonce: NONCE, pcrs });
    const [r] = await verifier.evaluate(ev, { reportData: NONCE, initDataHash: initdata, tdx });
    const c = r!.claims;
    expect(c.tcb_status).toBe('UpToDate');
    expect(c.report_data).toBe(NONCE.toString('hex'));
    expect(c.init_data).toBe(Buffer.from(pcr8FromInitDataDigest(initdata)).toString('hex'));
    expect((c.tpm as Record<string, string>).pcr03).toBe('03'.repeat(32));
    expect((c.td_attributes as Record<string, boolean>).septve_disable).toBe(true);
    expect(
      await codeOf(verifier.evaluate(ev, { reportData: NONCE, initDataHash: Buffer.alloc(32), tdx })),
    ).toBe('INIT_DATA_MISMATCH');
  });

  it('fails when the TD report does not vouch for the runtime claims or user data', async () => {
    expect(
      await codeOf(
        verifier.evaluate(makeAzTdxTestEvidence(qe, { nonce: NONCE, tdReportData: Buffer.alloc(32, 1) }), {
          reportData: NONCE,
          tdx,
        }),
      ),
    ).toBe('HCL_DATA_MISMATCH');
    expect(
      await codeOf(
        verifier.evaluate(makeAzTdxTestEvidence(qe, { nonce: NONCE, userData: Buffer.alloc(64, 9) }), {
          reportData: NONCE,
          tdx,
        }),
      ),
    ).toBe('REPORT_DATA_MISMATCH');
    // v1 evidence makes no promise about user-data.
    await verifier.evaluate(
      makeAzTdxTestEvidence(qe, { nonce: NONCE, userData: Buffer.alloc(64, 9), version: 1 }),
      { reportData: NONCE, tdx },
    );
  });

  it('needs the test root configured', async () => {
    const ev = makeAzTdxTestEvidence(qe, { nonce: NONCE });
    expect(
      await codeOf(verifier.evaluate(ev, { reportData: NONCE, tdx: { collateral: tdx.collateral! } })),
    ).toBe('CERT_CHAIN_INVALID');
  });
});
