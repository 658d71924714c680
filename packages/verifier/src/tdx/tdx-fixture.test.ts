// trustee's real TDX vectors: tdx_quote_4.dat (a v4 quote from a TDX host), Intel collateral
// (tcbInfo.json, enclaveIdentity.json) and the claims trustee derives (parse_tdx_claims_expected).
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { encodeCcEventLog, parseCcEventLog, replayRegister, TCG_EVENT_TYPES } from './ccel.js';
import { tdxClaims } from './claims.js';
import {
  parseCollateral,
  parseQeIdentity,
  parseTdxTcbInfo,
  verifyCollateralSignature,
} from './collateral.js';
import { TdxVerifier } from './index.js';
import { INTEL_SGX_ROOT_CA_PEM } from './intel-roots.gen.js';
import { parsePckChain } from './pck.js';
import { parseTdxQuote } from './quote.js';
import { evaluateQe } from './tcb.js';
import { encodeTdReport, parseTdReport } from './td-report.js';
import { builtinIntelCerts, trustedSgxRoots } from './trust.js';
import { verifyQuoteSignatures, verifyTdxQuote } from './verify.js';

const DIR = vector('trustee/tdx');
const QUOTE = readFileSync(`${DIR}/tdx_quote_4.dat`);
const TCB_INFO = readFileSync(`${DIR}/tcbInfo.json`, 'utf8');
const QE_IDENTITY = readFileSync(`${DIR}/enclaveIdentity.json`, 'utf8');
const EXPECTED = JSON.parse(readFileSync(`${DIR}/parse_tdx_claims_expected.json`, 'utf8')) as Record<
  string,
  unknown
>;
const AZ_QUOTE = readFileSync(vector('trustee/az-tdx-vtpm/td-quote.bin'));

/** Inside every validity period: the PCK chain, the TCB signing certificate and both documents. */
const AT = new Date('2025-11-01T00:00:00Z');
const ROOTS = trustedSgxRoots(undefined);
const COLLATERAL = { tcbInfos: [TCB_INFO], qeIdentity: QE_IDENTITY };

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
  return undefined;
}

/** The CCEL trustee's expected claims were made from, rebuilt from the events they list. */
function ccelFromExpected(): Buffer {
  const byName = new Map([...TCG_EVENT_TYPES].map(([k, v]) => [v, k]));
  const events = EXPECTED.uefi_event_logs as {
    index: number;
    type_name: string;
    event: string;
    digests: { alg: string; digest: string }[];
  }[];
  return encodeCcEventLog(
    events.map((e) => ({
      index: e.index,
      type: byName.get(e.type_name)!,
      data: Buffer.from(e.event, 'base64'),
      digests: e.digests.map((d) => ({ alg: 0xc, digest: Buffer.from(d.digest, 'hex') })),
    })),
  );
}

describe('Intel trust anchors', () => {
  it('pins the Intel SGX Root CA', () => {
    const root = new X509Certificate(INTEL_SGX_ROOT_CA_PEM);
    expect(createHash('sha256').update(root.raw).digest('hex')).toBe(
      '44a0196b2b99f889b8e149e95b807a350e7424964399e885a7cbb8ccfab674d3',
    );
    expect(root.subject).toContain('CN=Intel SGX Root CA');
    expect(root.validToDate.toISOString()).toBe('2049-12-31T23:59:59.000Z');
    // The root a real quote carries is the same certificate.
    expect(parsePckChain(parseTdxQuote(QUOTE).pckChain).root.raw.equals(root.raw)).toBe(true);
  });

  it('has the TCB signing certificate under that root', () => {
    const { root, tcbSigning } = builtinIntelCerts();
    expect(tcbSigning.subject).toContain('CN=Intel SGX TCB Signing');
    expect(tcbSigning.verify(root.cert.publicKey)).toBe(true);
  });
});

describe('tdx_quote_4.dat', () => {
  it('parses as a v4 TDX quote', () => {
    const q = parseTdxQuote(QUOTE);
    expect(q.version).toBe(4);
    expect(q.length).toBe(QUOTE.length);
    expect(q.qeAuthData.length).toBe(32);
    const pck = parsePckChain(q.pckChain);
    expect(pck.platform.fmspc.toString('hex')).toBe('50806f000000');
    expect(pck.platform.platformCa).toBe(true);
    expect(pck.platform.tcbComponents.slice(0, 3)).toEqual([5, 5, 13]);
    expect(pck.platform.pceSvn).toBe(11);
  });

  it('gives trustee claims, event log included (parse_tdx_claims_expected.json)', () => {
    const q = parseTdxQuote(QUOTE);
    const log = parseCcEventLog(ccelFromExpected());
    const claims = tdxClaims(q, parsePckChain(q.pckChain).platform, log.entries);
    expect(JSON.parse(JSON.stringify(claims))).toEqual(EXPECTED);
  });

  it('verifies to Intel: PCK chain, QE report signature and binding, quote signature', () => {
    const { root, pck } = verifyQuoteSignatures(QUOTE, ROOTS, AT);
    expect(root.builtin).toBe(true);
    expect(pck.leaf.subject).toContain('CN=Intel SGX PCK Certificate');
  });

  it('matches the QE identity collateral, whose signature verifies', () => {
    const collateral = parseCollateral(COLLATERAL);
    verifyCollateralSignature(collateral.qeIdentity, collateral.signers, ROOTS, AT, 'QE identity');
    const level = evaluateQe(parseTdxQuote(QUOTE).qeReport, collateral.qeIdentity.body);
    expect(level.tcbStatus).toBe('UpToDate');
  });

  it('has a TCB info whose signature verifies but which is for another FMSPC', () => {
    const collateral = parseCollateral(COLLATERAL);
    const info = collateral.tcbInfos[0]!;
    verifyCollateralSignature(info, collateral.signers, ROOTS, AT, 'TCB info');
    expect(info.body.fmspc.toString('hex').toUpperCase()).toBe('00A06D080000');
    // So the TCB status of this quote cannot be established from the fixture collateral.
    expect(() => verifyTdxQuote(QUOTE, { collateral: COLLATERAL }, AT)).toThrow(
      /no TCB info for the PCK's FMSPC 50806F000000/,
    );
    expect(codeOf(() => verifyTdxQuote(QUOTE, { collateral: COLLATERAL }, AT))).toBe('COLLATERAL_MISMATCH');
  });

  it('needs collateral', () => {
    expect(codeOf(() => verifyTdxQuote(QUOTE, {}, AT))).toBe('COLLATERAL_UNAVAILABLE');
  });

  it('fails outside the PCK certificate validity', () => {
    expect(codeOf(() => verifyQuoteSignatures(QUOTE, ROOTS, new Date('2023-01-01T00:00:00Z')))).toBe(
      'CERT_NOT_VALID_AT_TIME',
    );
    expect(codeOf(() => verifyQuoteSignatures(QUOTE, ROOTS, new Date('2031-01-01T00:00:00Z')))).toBe(
      'CERT_NOT_VALID_AT_TIME',
    );
  });

  it('fails on collateral before it was signed', () => {
    expect(
      codeOf(() => verifyTdxQuote(QUOTE, { collateral: COLLATERAL }, new Date('2025-10-01T00:00:00Z'))),
    ).toBe('COLLATERAL_INVALID');
  });

  describe('tampering', () => {
    const q = parseTdxQuote(QUOTE);
    const bodyAt = 48;
    const sigDataAt = 48 + 584 + 4;
    const flip = (offset: number) => {
      const b = Buffer.from(QUOTE);
      b[offset]! ^= 0x01;
      return b;
    };
    const cases: [string, number, string][] = [
      ['header user data', 30, 'REPORT_SIGNATURE_INVALID'],
      ['MR_TD', bodyAt + 140, 'REPORT_SIGNATURE_INVALID'],
      ['RTMR3', bodyAt + 480, 'REPORT_SIGNATURE_INVALID'],
      ['REPORT_DATA', bodyAt + 530, 'REPORT_SIGNATURE_INVALID'],
      ['quote signature', sigDataAt + 5, 'REPORT_SIGNATURE_INVALID'],
      ['QE report ISVSVN', sigDataAt + 134 + 258, 'REPORT_SIGNATURE_INVALID'],
      ['QE report signature', sigDataAt + 134 + 384 + 3, 'REPORT_SIGNATURE_INVALID'],
      ['QE authentication data', sigDataAt + 134 + 384 + 64 + 2 + 5, 'REPORT_SIGNATURE_INVALID'],
    ];
    for (const [name, offset, code] of cases) {
      it(`fails on a flipped bit in ${name}`, () => {
        expect(codeOf(() => verifyQuoteSignatures(flip(offset), ROOTS, AT))).toBe(code);
      });
    }

    it('fails on a flipped attestation key bit', () => {
      // Either the point is no longer on the curve, or the QE binding breaks.
      expect(codeOf(() => verifyQuoteSignatures(flip(sigDataAt + 64 + 7), ROOTS, AT))).toMatch(
        /^(REPORT_SIGNATURE_INVALID|REPORT_MALFORMED)$/,
      );
    });

    it('fails on a changed PCK certificate', () => {
      const pemAt = QUOTE.indexOf(Buffer.from('-----BEGIN CERTIFICATE-----'));
      const b = Buffer.from(QUOTE);
      b[pemAt + 200] = b[pemAt + 200] === 0x41 ? 0x42 : 0x41;
      expect(codeOf(() => verifyQuoteSignatures(b, ROOTS, AT))).toMatch(
        /^(CERT_MALFORMED|CERT_CHAIN_INVALID)$/,
      );
    });

    it('fails when the chain ends at a root that is not trusted', () => {
      expect(codeOf(() => verifyQuoteSignatures(QUOTE, [], AT))).toBe('CERT_CHAIN_INVALID');
    });

    it('fails on changed collateral text', () => {
      const changed = TCB_INFO.replace('"tcbEvaluationDataNumber":17', '"tcbEvaluationDataNumber":18');
      const doc = parseTdxTcbInfo(changed);
      expect(
        codeOf(() =>
          verifyCollateralSignature(doc, parseCollateral(COLLATERAL).signers, ROOTS, AT, 'TCB info'),
        ),
      ).toBe('COLLATERAL_INVALID');
      const qe = parseQeIdentity(QE_IDENTITY.replace('"isvprodid":2', '"isvprodid":3'));
      expect(
        codeOf(() =>
          verifyCollateralSignature(qe, parseCollateral(COLLATERAL).signers, ROOTS, AT, 'QE identity'),
        ),
      ).toBe('COLLATERAL_INVALID');
    });

    it('keeps the QE report binding intact in the original', () => {
      expect(q.qeReport.reportData.subarray(32).every((b) => b === 0)).toBe(true);
    });
  });
});

describe("az-tdx-vtpm's td-quote.bin", () => {
  it('verifies to Intel despite the zero padding after the quote', () => {
    const q = parseTdxQuote(AZ_QUOTE);
    expect(q.length).toBe(4936);
    expect(AZ_QUOTE.length).toBe(5006);
    const { pck } = verifyQuoteSignatures(AZ_QUOTE, ROOTS, AT);
    expect(pck.platform.fmspc.toString('hex')).toBe('00806f050000');
  });

  it('refuses non-zero bytes after the quote', () => {
    const b = Buffer.from(AZ_QUOTE);
    b[b.length - 1] = 1;
    expect(codeOf(() => parseTdxQuote(b))).toBe('REPORT_MALFORMED');
  });
});

describe('event log from the expected claims', () => {
  it('replays to the RTMR values trustee computes for CCEL_data', () => {
    const log = parseCcEventLog(ccelFromExpected());
    expect(replayRegister(log, 1).toString('hex')).toBe(
      '2dc712306a963eadb894ad47dbaa17df44814151555aee11cbb843becca88950ffd079664902e6f22c66f7c8213543f4',
    );
    expect(replayRegister(log, 2).toString('hex')).toBe(
      '0fa3be56af61208bbd179dc7b124988eb929319154663c539d6f46445ecac2fec287075047ff7bd1922829fec28cd3cf',
    );
    expect(replayRegister(log, 3).equals(Buffer.alloc(48))).toBe(true);
  });
});

describe("guest-components' tdx_report_1.bin", () => {
  it('reads the RTMRs the upstream attester test expects', () => {
    const r = parseTdReport(readFileSync(vector('guest-components/tdx/tdx_report_1.bin')));
    expect(r.type).toBe(0x81);
    expect(r.rtmrs[0].toString('hex')).toBe(
      'f4ec1a04670fe7926cd5de4aef9aaa7689ab4ceaa132d7c5242b47f67dfaaea64c372a17ad68fef9a6ac99aabbddabdc',
    );
    expect(r.rtmrs[1].toString('hex')).toBe(
      '4e5f8826653198ab4bc5156fbe4bc99db054c0b8239a16c4b59249fb427f4acc50eed1b46a85c7d526c4e1e47621b14c',
    );
    expect(r.rtmrs[2].equals(Buffer.alloc(48))).toBe(true);
    expect(r.rtmrs[3].equals(Buffer.alloc(48))).toBe(true);
    // encode ∘ parse keeps every field the quote carries.
    const { type: _t, cpuSvn: _c, ...fields } = r;
    const again = parseTdReport(encodeTdReport(fields));
    expect(again.rtmrs).toEqual(r.rtmrs);
    expect(again.mrTd.equals(r.mrTd)).toBe(true);
    expect(() => parseTdReport(Buffer.alloc(1000))).toThrow(VerificationError);
  });

  it('matches the quote Azure made from the HCL report it came in', () => {
    const hcl = readFileSync(vector('trustee/az-tdx-vtpm/hcl-report.bin'));
    const td = parseTdReport(hcl.subarray(32, 32 + 1024));
    const body = parseTdxQuote(AZ_QUOTE).body;
    expect(td.reportData.equals(body.reportData)).toBe(true);
    expect(td.mrTd.equals(body.mrTd)).toBe(true);
    expect(td.teeTcbSvn.equals(body.teeTcbSvn)).toBe(true);
    expect(td.rtmrs).toEqual(body.rtmrs);
  });
});

describe('tdx verifier on tdx_quote_4.dat', () => {
  const reportData = parseTdxQuote(QUOTE).body.reportData;
  const run = (expected: { reportData: Uint8Array; initDataHash?: Uint8Array }) =>
    new TdxVerifier()
      .evaluate(
        { cc_eventlog: null, quote: QUOTE.toString('base64') },
        { ...expected, now: AT, tdx: { collateral: COLLATERAL } },
      )
      .then(
        () => 'ok',
        (e: unknown) => (e instanceof VerificationError ? e.code : String(e)),
      );

  it('binds report data and MR_CONFIG_ID before it needs the collateral', async () => {
    expect(await run({ reportData: Buffer.alloc(64, 1) })).toBe('REPORT_DATA_MISMATCH');
    expect(await run({ reportData, initDataHash: Buffer.alloc(32, 1) })).toBe('INIT_DATA_MISMATCH');
    // The quote's MR_CONFIG_ID is zero, which a zero digest matches; then only the TCB status is missing.
    expect(await run({ reportData, initDataHash: Buffer.alloc(48) })).toBe('COLLATERAL_MISMATCH');
  });
});
