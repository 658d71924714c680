// The TD-preserving claims of DCAP's quote verification library (supplemental data minor version 5,
// which trustee's claims expose as tcb_date_current, tcb_status_current and advisory_ids_current):
// a TDX 1.5 quote's TEE_TCB_SVN2 is the TCB the TD runs on after a TD-preserving module update,
// rated like TEE_TCB_SVN, and a launch TCB that is out of date under a current one that is not
// becomes TDRelaunchAdvised. The statuses and advisory id of the second case are those of
// trustee's own test of these claims (intel_dcap/claims.rs, parse_supplemental_data_minor_version_5).
import { beforeAll, describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { TdxVerifier } from './index.js';
import type { TdReportBodyFields } from './quote.js';
import { relaunchStatus } from './tcb.js';
import {
  createTestQuotingEnclave,
  createTestSgxPki,
  issueTestPck,
  signCollateral,
  signTestQuote,
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
/** TEE_TCB_SVN: byte 0 the module's SVN, byte 1 its major version, then the other components. */
const svn = (module: number) => Buffer.from([module, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
const REPORT_DATA = Buffer.alloc(64, 7);

let pki: TestSgxPki;
let qe: TestQuotingEnclave;
const verifier = new TdxVerifier();

/** Collateral whose TDX_01 module levels are: SVN 4 UpToDate, SVN 2 OutOfDate with INTEL-SA-1234. */
function options(platformStatus = 'UpToDate'): TdxVerifierOptions {
  const info = testTcbInfo(PLATFORM, [...svn(4)]) as {
    tdxModuleIdentities: { tcbLevels: unknown[] }[];
    tcbLevels: { tcbStatus: string }[];
  };
  info.tdxModuleIdentities[0]!.tcbLevels = [
    { tcb: { isvsvn: 4 }, tcbDate: '2024-03-14T00:00:00Z', tcbStatus: 'UpToDate' },
    {
      tcb: { isvsvn: 2 },
      tcbDate: '2023-08-09T00:00:00Z',
      tcbStatus: 'OutOfDate',
      advisoryIDs: ['INTEL-SA-1234'],
    },
  ];
  info.tcbLevels[0]!.tcbStatus = platformStatus;
  return {
    trustedSgxRoots: [pki.root.pem],
    collateral: {
      tcbInfos: [signCollateral('tcbInfo', info, pki.tcbSigning.privateKey)],
      qeIdentity: signCollateral('enclaveIdentity', testQeIdentity(), pki.tcbSigning.privateKey),
      signingCerts: [pki.tcbSigning.pem],
    },
  };
}

function quote(launch: Buffer, current?: Buffer): unknown {
  const body: TdReportBodyFields = {
    teeTcbSvn: launch,
    reportData: REPORT_DATA,
    ...(current !== undefined ? { teeTcbSvn2: current } : {}),
  };
  const q =
    current === undefined
      ? signTestQuote(qe, body)
      : signTestQuote(qe, body, { version: 5, bodyKind: 'tdx15' });
  return { cc_eventlog: null, quote: q.toString('base64') };
}

async function claims(evidence: unknown, opts = options()) {
  const [r] = await verifier.evaluate(evidence, { reportData: REPORT_DATA, tdx: opts });
  const c = r!.claims;
  return {
    tcb_status: c.tcb_status,
    advisory_ids: c.advisory_ids,
    tcb_date: c.tcb_date,
    tcb_status_current: c.tcb_status_current,
    advisory_ids_current: c.advisory_ids_current,
    tcb_date_current: c.tcb_date_current,
  };
}

beforeAll(() => {
  pki = createTestSgxPki();
  qe = createTestQuotingEnclave(pki, issueTestPck(pki, PLATFORM));
});

describe('tdx TD-preserving claims', () => {
  it('a TD launched on an out-of-date module and updated in place: TDRelaunchAdvised, current UpToDate', async () => {
    expect(await claims(quote(svn(2), svn(4)))).toEqual({
      tcb_status: 'TDRelaunchAdvised',
      advisory_ids: ['INTEL-SA-1234'],
      tcb_date: '2024-03-13T00:00:00Z',
      tcb_status_current: 'UpToDate',
      advisory_ids_current: [],
      tcb_date_current: '2024-03-13T00:00:00Z',
    });
  });

  it('a TD whose current module is still out of date: OutOfDate both, the advisory in both lists', async () => {
    const c = await claims(quote(svn(2), svn(3)));
    expect(c.tcb_status).toBe('OutOfDate');
    expect(c.tcb_status_current).toBe('OutOfDate');
    expect(c.advisory_ids_current).toEqual(['INTEL-SA-1234']);
  });

  it('a platform that needs configuration: TDRelaunchAdvisedConfigurationNeeded', async () => {
    const c = await claims(quote(svn(2), svn(4)), options('ConfigurationNeeded'));
    expect(c.tcb_status).toBe('TDRelaunchAdvisedConfigurationNeeded');
    expect(c.tcb_status_current).toBe('ConfigurationNeeded');
  });

  it('a quote without TEE_TCB_SVN2 (TDX 1.0 body): the current TCB is the launch TCB', async () => {
    expect(await claims(quote(svn(2)))).toEqual({
      tcb_status: 'OutOfDate',
      advisory_ids: ['INTEL-SA-1234'],
      tcb_date: '2024-03-13T00:00:00Z',
      tcb_status_current: 'OutOfDate',
      advisory_ids_current: ['INTEL-SA-1234'],
      tcb_date_current: '2024-03-13T00:00:00Z',
    });
    expect((await claims(quote(svn(4)))).tcb_status_current).toBe('UpToDate');
  });

  it('a current TCB below every level fails the quote, as the library does', async () => {
    const err = await verifier
      .evaluate(quote(svn(4), svn(1)), { reportData: REPORT_DATA, tdx: options() })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(VerificationError);
    expect((err as VerificationError).code).toBe('TCB_NOT_SUPPORTED');
  });

  it.each([
    ['OutOfDate', 'UpToDate', 'TDRelaunchAdvised'],
    ['OutOfDate', 'SWHardeningNeeded', 'TDRelaunchAdvised'],
    ['OutOfDateConfigurationNeeded', 'UpToDate', 'TDRelaunchAdvisedConfigurationNeeded'],
    ['OutOfDate', 'ConfigurationAndSWHardeningNeeded', 'TDRelaunchAdvisedConfigurationNeeded'],
    ['OutOfDate', 'OutOfDate', 'OutOfDate'],
    ['UpToDate', 'OutOfDate', 'UpToDate'],
    ['ConfigurationNeeded', 'UpToDate', 'ConfigurationNeeded'],
  ] as const)('launch %s, current %s: %s', (launch, current, expected) => {
    expect(relaunchStatus(launch, current)).toBe(expected);
  });
});
