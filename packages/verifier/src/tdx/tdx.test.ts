// The tdx verifier end to end on test hardware: quotes from a test PCK chain with collateral signed
// by a test TCB signing certificate, trusted only when configured.
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { derOctetString } from '../x509/build.js';
import { type EventRecord, encodeCcEventLog, rtmrsOf } from './ccel.js';
import { TdxVerifier } from './index.js';
import { OID_SGX_EXTENSIONS } from './pck.js';
import type { TdReportBodyFields } from './quote.js';
import {
  createTestQuotingEnclave,
  createTestSgxPki,
  issueTestPck,
  sgxExtensionValue,
  signCollateral,
  signTestQuote,
  TEST_QE,
  type TestPlatform,
  type TestQuotingEnclave,
  type TestSgxPki,
  testQeIdentity,
  testTcbInfo,
} from './test-pki.js';
import type { TdxVerifierOptions } from './verify.js';

const PLATFORM: TestPlatform = {
  fmspc: Buffer.from('00906ed50000', 'hex'),
  tcbComponents: [3, 3, 2, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0],
  pceSvn: 13,
};
/** TEE_TCB_SVN: module SVN 4, major version 1, late microcode 2. */
const TEE_TCB_SVN = [4, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const REPORT_DATA = createHash('sha384').update('runtime data').digest();
const INITDATA = createHash('sha256').update('initdata toml').digest();
const TD_ATTRS = Buffer.from('0000001000000000', 'hex'); // SEPT_VE_DISABLE

let pki: TestSgxPki;
let qe: TestQuotingEnclave;
let options: TdxVerifierOptions;

const verifier = new TdxVerifier();

function body(over: Partial<TdReportBodyFields> = {}): TdReportBodyFields {
  return {
    teeTcbSvn: Buffer.from(TEE_TCB_SVN),
    tdAttributes: TD_ATTRS,
    xfam: Buffer.from('e702060000000000', 'hex'),
    mrTd: Buffer.alloc(48, 0x5a),
    mrConfigId: INITDATA,
    reportData: REPORT_DATA,
    ...over,
  };
}

function evidence(quote: Buffer, ccel?: Buffer | null): unknown {
  return {
    cc_eventlog: ccel === undefined || ccel === null ? null : ccel.toString('base64'),
    quote: quote.toString('base64'),
  };
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
  return undefined;
}

beforeAll(() => {
  pki = createTestSgxPki();
  qe = createTestQuotingEnclave(pki, issueTestPck(pki, PLATFORM));
  options = {
    trustedSgxRoots: [pki.root.pem],
    collateral: {
      tcbInfos: [signCollateral('tcbInfo', testTcbInfo(PLATFORM, TEE_TCB_SVN), pki.tcbSigning.privateKey)],
      qeIdentity: signCollateral('enclaveIdentity', testQeIdentity(), pki.tcbSigning.privateKey),
      signingCerts: [pki.tcbSigning.pem],
    },
  };
});

describe('tdx verifier on test hardware', () => {
  it('verifies and gives the TCB status and trustee claims', async () => {
    const quote = signTestQuote(qe, body());
    const [result] = await verifier.evaluate(evidence(quote), {
      reportData: REPORT_DATA,
      initDataHash: INITDATA,
      tdx: options,
    });
    const c = result!.claims;
    expect(result!.class).toBe('cpu');
    expect(c.tcb_status).toBe('UpToDate');
    expect(c.collateral_expiration_status).toBe('0');
    expect(c.advisory_ids).toEqual([]);
    expect(c.init_data).toBe(Buffer.concat([INITDATA, Buffer.alloc(16)]).toString('hex'));
    expect(c.report_data).toBe(Buffer.concat([REPORT_DATA, Buffer.alloc(16)]).toString('hex'));
    expect(c.td_attributes).toEqual({
      debug: false,
      septve_disable: true,
      protection_keys: false,
      key_locker: false,
      perfmon: false,
    });
    expect((c.quote as { body: { mr_td: string } }).body.mr_td).toBe('5a'.repeat(48));
    expect(c.platform_instance_id).toBe('22'.repeat(16));
    expect(c.sgx_type).toBe('Scalable');
    expect(c.is_cached_keys).toBe(true);
    expect(c.tcb_eval_num).toBe(17);
    expect(c.tcb_date).toBe('2024-03-13T00:00:00Z');
    expect(c.uefi_event_logs).toBeUndefined();
  });

  it('refuses the test root unless it is configured', async () => {
    const quote = signTestQuote(qe, body());
    const { trustedSgxRoots: _, ...withoutRoot } = options;
    expect(
      await codeOf(verifier.evaluate(evidence(quote), { reportData: REPORT_DATA, tdx: withoutRoot })),
    ).toBe('CERT_CHAIN_INVALID');
  });

  it('checks report data and MR_CONFIG_ID', async () => {
    const quote = signTestQuote(qe, body());
    expect(
      await codeOf(verifier.evaluate(evidence(quote), { reportData: Buffer.alloc(48, 1), tdx: options })),
    ).toBe('REPORT_DATA_MISMATCH');
    await expect(
      verifier.evaluate(evidence(quote), {
        reportData: Buffer.alloc(0),
        reportDataNotProvided: true,
        tdx: options,
      }),
    ).resolves.toHaveLength(1);
    expect(
      await codeOf(
        verifier.evaluate(evidence(quote), {
          reportData: REPORT_DATA,
          initDataHash: Buffer.alloc(32, 7),
          tdx: options,
        }),
      ),
    ).toBe('INIT_DATA_MISMATCH');
    // A sha384 initdata digest fills MR_CONFIG_ID exactly.
    const full = createHash('sha384').update('initdata').digest();
    const q384 = signTestQuote(qe, body({ mrConfigId: full }));
    await verifier.evaluate(evidence(q384), { reportData: REPORT_DATA, initDataHash: full, tdx: options });
  });

  it('replays the event log against the RTMRs and shows it', async () => {
    const aael = Buffer.from('github.com/confidential-containers PullImage {"image":"x", "digest":"y"}');
    const tag = Buffer.alloc(8);
    tag.writeUInt32LE(0x4141454c, 0);
    tag.writeUInt32LE(aael.length, 4);
    const records: EventRecord[] = [
      { index: 1, type: 0x80000008, data: Buffer.from('firmware') },
      { index: 2, type: 0x4, data: Buffer.alloc(4) },
      { index: 4, type: 0x6, data: Buffer.concat([tag, aael]) },
    ];
    const rtmrs = rtmrsOf(records);
    const quote = signTestQuote(qe, body({ rtmrs }));
    const ccel = encodeCcEventLog(records);
    const [r] = await verifier.evaluate(evidence(quote, ccel), { reportData: REPORT_DATA, tdx: options });
    const logs = r!.claims.uefi_event_logs as { type_name: string; details: Record<string, unknown> }[];
    expect(logs.map((l) => l.type_name)).toEqual([
      'EV_EFI_PLATFORM_FIRMWARE_BLOB',
      'EV_SEPARATOR',
      'EV_EVENT_TAG',
    ]);
    expect(logs[2]!.details).toEqual({
      string: aael.toString(),
      unicode_name: 'AAEL',
      data: {
        domain: 'github.com/confidential-containers',
        operation: 'PullImage',
        content: { image: 'x', digest: 'y' },
      },
    });
    // One more event than the RTMR saw: the replay fails.
    const extra = encodeCcEventLog([...records, { index: 4, type: 0x6, data: Buffer.concat([tag, aael]) }]);
    expect(
      await codeOf(verifier.evaluate(evidence(quote, extra), { reportData: REPORT_DATA, tdx: options })),
    ).toBe('EVENT_LOG_MISMATCH');
  });

  it('verifies v5 quotes with TDX 1.0 and 1.5 bodies', async () => {
    for (const bodyKind of ['tdx10', 'tdx15'] as const) {
      const quote = signTestQuote(qe, body(), { version: 5, bodyKind });
      const [r] = await verifier.evaluate(evidence(quote), { reportData: REPORT_DATA, tdx: options });
      const q = r!.claims.quote as Record<string, unknown>;
      expect(q.type).toBe(bodyKind === 'tdx10' ? '0200' : '0300');
      expect((q.header as Record<string, string>).version).toBe('0500');
      expect('tee_tcb_svn2' in (q.body as object)).toBe(bodyKind === 'tdx15');
    }
  });

  it('reports expired collateral in collateral_expiration_status', async () => {
    const quote = signTestQuote(qe, body());
    const later = new Date(Date.now() + 60 * 86_400_000);
    const [r] = await verifier.evaluate(evidence(quote), {
      reportData: REPORT_DATA,
      tdx: options,
      now: later,
    });
    expect(r!.claims.collateral_expiration_status).toBe('1');
  });
});

describe('TCB status from the collateral', () => {
  const sign = (key: 'tcbInfo' | 'enclaveIdentity', v: unknown) =>
    signCollateral(key, v, pki.tcbSigning.privateKey);
  const run = async (tcbInfo: unknown, qeIdentity: unknown = testQeIdentity(), quoteBody = body()) => {
    const quote = signTestQuote(qe, quoteBody);
    const tdx: TdxVerifierOptions = {
      trustedSgxRoots: [pki.root.pem],
      collateral: {
        tcbInfos: [sign('tcbInfo', tcbInfo)],
        qeIdentity: sign('enclaveIdentity', qeIdentity),
        signingCerts: [pki.tcbSigning.pem],
      },
    };
    return verifier.evaluate(evidence(quote), { reportData: REPORT_DATA, tdx });
  };
  const level = (status: string, sgx: number[], tdx: number[], advisoryIDs?: string[]) => ({
    tcb: {
      sgxtcbcomponents: sgx.map((svn) => ({ svn })),
      pcesvn: PLATFORM.pceSvn,
      tdxtcbcomponents: tdx.map((svn) => ({ svn })),
    },
    tcbDate: '2024-01-01T00:00:00Z',
    tcbStatus: status,
    ...(advisoryIDs ? { advisoryIDs } : {}),
  });

  it('takes the first level the platform reaches', async () => {
    const higher = PLATFORM.tcbComponents.map((v, i) => (i === 0 ? v + 1 : v));
    const info = testTcbInfo(PLATFORM, TEE_TCB_SVN, {
      tcbLevels: [
        level('UpToDate', higher, TEE_TCB_SVN),
        level('SWHardeningNeeded', [...PLATFORM.tcbComponents], TEE_TCB_SVN, ['INTEL-SA-00615']),
      ],
    });
    const [r] = await run(info);
    expect(r!.claims.tcb_status).toBe('SWHardeningNeeded');
    expect(r!.claims.advisory_ids).toEqual(['INTEL-SA-00615']);
  });

  it('ignores TEE_TCB_SVN bytes 0 and 1 when the module major version is set', async () => {
    const tdxNeeds = [9, 9, ...TEE_TCB_SVN.slice(2)];
    const [r] = await run(
      testTcbInfo(PLATFORM, TEE_TCB_SVN, {
        tcbLevels: [level('UpToDate', [...PLATFORM.tcbComponents], tdxNeeds)],
      }),
    );
    expect(r!.claims.tcb_status).toBe('UpToDate');
    const higherLate = [...TEE_TCB_SVN];
    higherLate[2] = 3;
    expect(
      await codeOf(
        run(
          testTcbInfo(PLATFORM, TEE_TCB_SVN, {
            tcbLevels: [level('UpToDate', [...PLATFORM.tcbComponents], higherLate)],
          }),
        ),
      ),
    ).toBe('TCB_NOT_SUPPORTED');
  });

  it('rates the TDX module by its identity and converges the statuses', async () => {
    // Module SVN 4 meets TDX_01's UpToDate level; SVN 3 only its OutOfDate one.
    const old = body({ teeTcbSvn: Buffer.from([3, 1, 2]) });
    const [r] = await run(testTcbInfo(PLATFORM, [3, 1, 2, ...Array(13).fill(0)]), testQeIdentity(), old);
    expect(r!.claims.tcb_status).toBe('OutOfDate');
    const cfg = testTcbInfo(PLATFORM, [3, 1, 2, ...Array(13).fill(0)], {
      tcbLevels: [level('ConfigurationNeeded', [...PLATFORM.tcbComponents], [0, 0, 2, ...Array(13).fill(0)])],
    });
    const [r2] = await run(cfg, testQeIdentity(), old);
    expect(r2!.claims.tcb_status).toBe('OutOfDateConfigurationNeeded');
  });

  it('converges an out-of-date QE', async () => {
    const qeId = testQeIdentity(TEST_QE, {
      qeTcbLevels: [
        { tcb: { isvsvn: 8 }, tcbDate: '2025-01-01T00:00:00Z', tcbStatus: 'UpToDate' },
        {
          tcb: { isvsvn: 2 },
          tcbDate: '2023-01-01T00:00:00Z',
          tcbStatus: 'OutOfDate',
          advisoryIDs: ['INTEL-SA-00999'],
        },
      ],
    });
    const [r] = await run(testTcbInfo(PLATFORM, TEE_TCB_SVN), qeId);
    expect(r!.claims.tcb_status).toBe('OutOfDate');
    expect(r!.claims.advisory_ids).toEqual(['INTEL-SA-00999']);
  });

  it('fails on revoked TCB and unknown QEs', async () => {
    expect(
      await codeOf(
        run(
          testTcbInfo(PLATFORM, TEE_TCB_SVN, {
            tcbLevels: [level('Revoked', [...PLATFORM.tcbComponents], TEE_TCB_SVN)],
          }),
        ),
      ),
    ).toBe('TCB_REVOKED');
    const otherSigner = testQeIdentity({ ...TEST_QE, mrSigner: Buffer.alloc(32, 1) });
    expect(await codeOf(run(testTcbInfo(PLATFORM, TEE_TCB_SVN), otherSigner))).toBe('QE_IDENTITY_MISMATCH');
    const newerQe = testQeIdentity(
      { ...TEST_QE, isvSvn: 9 },
      { qeTcbLevels: [{ tcb: { isvsvn: 9 }, tcbDate: '2025-01-01T00:00:00Z', tcbStatus: 'UpToDate' }] },
    );
    expect(await codeOf(run(testTcbInfo(PLATFORM, TEE_TCB_SVN), newerQe))).toBe('TCB_NOT_SUPPORTED');
  });

  it('fails on a TDX module the TCB info does not know', async () => {
    const foreign = body({ mrSignerSeam: Buffer.alloc(48, 3) });
    expect(await codeOf(run(testTcbInfo(PLATFORM, TEE_TCB_SVN), testQeIdentity(), foreign))).toBe(
      'TCB_NOT_SUPPORTED',
    );
    const v7 = body({ teeTcbSvn: Buffer.from([4, 7, 2]) });
    expect(await codeOf(run(testTcbInfo(PLATFORM, TEE_TCB_SVN), testQeIdentity(), v7))).toBe(
      'TCB_NOT_SUPPORTED',
    );
  });

  it('refuses collateral signed by an untrusted key or for another FMSPC', async () => {
    const other = createTestSgxPki();
    const quote = signTestQuote(qe, body());
    const tdx: TdxVerifierOptions = {
      trustedSgxRoots: [pki.root.pem],
      collateral: {
        tcbInfos: [
          signCollateral('tcbInfo', testTcbInfo(PLATFORM, TEE_TCB_SVN), other.tcbSigning.privateKey),
        ],
        qeIdentity: signCollateral('enclaveIdentity', testQeIdentity(), other.tcbSigning.privateKey),
        signingCerts: [other.tcbSigning.pem],
      },
    };
    expect(await codeOf(verifier.evaluate(evidence(quote), { reportData: REPORT_DATA, tdx }))).toBe(
      'CERT_CHAIN_INVALID',
    );
    const foreign = testTcbInfo({ ...PLATFORM, fmspc: Buffer.from('112233445566', 'hex') }, TEE_TCB_SVN);
    expect(await codeOf(run(foreign))).toBe('COLLATERAL_MISMATCH');
  });
});

describe('bad certificate extensions', () => {
  const withExtension = async (value: Buffer) => {
    const pck = issueTestPck(pki, PLATFORM, { extensions: [{ oid: OID_SGX_EXTENSIONS, value }] });
    const q = signTestQuote(createTestQuotingEnclave(pki, pck), body());
    return codeOf(verifier.evaluate(evidence(q), { reportData: REPORT_DATA, tdx: options }));
  };

  it('refuses PCK leaves with missing, duplicated, mistyped or oversize SGX entries', async () => {
    expect(await withExtension(sgxExtensionValue(PLATFORM, (e) => e.filter((_, i) => i !== 3)))).toBe(
      'CERT_MALFORMED',
    );
    expect(await withExtension(sgxExtensionValue(PLATFORM, (e) => [...e, e[3]!]))).toBe('CERT_MALFORMED');
    expect(await withExtension(sgxExtensionValue(PLATFORM, (e) => [...e.slice(0, 5)]))).toBe(
      'CERT_MALFORMED',
    );
    expect(await withExtension(sgxExtensionValue({ ...PLATFORM, fmspc: Buffer.alloc(7) }))).toBe(
      'CERT_MALFORMED',
    );
    expect(await withExtension(sgxExtensionValue({ ...PLATFORM, sgxType: 9 }))).toBe('CERT_MALFORMED');
    expect(await withExtension(derOctetString(Buffer.from('not der')))).toBe('CERT_MALFORMED');
    expect(await withExtension(Buffer.concat([sgxExtensionValue(PLATFORM), Buffer.from([0])]))).toBe(
      'CERT_MALFORMED',
    );
  });

  it('refuses a PCK leaf without SGX extensions', async () => {
    const pck = issueTestPck(pki, PLATFORM, { extensions: [] });
    const q = signTestQuote(createTestQuotingEnclave(pki, pck), body());
    expect(await codeOf(verifier.evaluate(evidence(q), { reportData: REPORT_DATA, tdx: options }))).toBe(
      'CERT_MALFORMED',
    );
  });

  it('refuses an expired PCK', async () => {
    const pck = issueTestPck(pki, PLATFORM, {
      notBefore: new Date(Date.now() - 10 * 86_400_000),
      notAfter: new Date(Date.now() - 86_400_000),
    });
    const q = signTestQuote(createTestQuotingEnclave(pki, pck), body());
    expect(await codeOf(verifier.evaluate(evidence(q), { reportData: REPORT_DATA, tdx: options }))).toBe(
      'CERT_NOT_VALID_AT_TIME',
    );
  });

  it('refuses a QE report signed by another PCK', async () => {
    const other = createTestQuotingEnclave(pki, issueTestPck(pki, PLATFORM));
    const mixed = { ...qe, qeReportSignature: other.qeReportSignature };
    const q = signTestQuote(mixed, body());
    expect(await codeOf(verifier.evaluate(evidence(q), { reportData: REPORT_DATA, tdx: options }))).toBe(
      'REPORT_SIGNATURE_INVALID',
    );
  });
});

describe('evidence shape', () => {
  it('refuses malformed evidence', async () => {
    const run = (ev: unknown) => codeOf(verifier.evaluate(ev, { reportData: REPORT_DATA, tdx: options }));
    expect(await run(null)).toBe('EVIDENCE_MALFORMED');
    expect(await run({ quote: '' })).toBe('EVIDENCE_MALFORMED');
    expect(await run({ quote: 'not base64!' })).toBe('EVIDENCE_MALFORMED');
    expect(await run({ quote: 'A'.repeat(200_000) })).toBe('EVIDENCE_TOO_LARGE');
    expect(await run({ quote: signTestQuote(qe, body()).toString('base64'), cc_eventlog: 5 })).toBe(
      'EVIDENCE_MALFORMED',
    );
    expect(await run({ quote: signTestQuote(qe, body()).toString('base64'), cc_eventlog: 'AAAA' })).toBe(
      'REPORT_MALFORMED',
    );
  });
});
