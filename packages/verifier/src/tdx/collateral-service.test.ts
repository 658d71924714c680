// Intel collateral fetched from a PCCS (trustee's dcap_verifier collateral_service): a mock PCCS
// over HTTPS serves collateral signed by a test PKI; the tdx verifier fetches what the quote
// needs, caches it, and fails closed on anything the service gets wrong.
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { vector } from '@broker/cli/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AzTdxVtpmVerifier } from '../az-tdx-vtpm/index.js';
import { makeAzTdxTestEvidence } from '../az-tdx-vtpm/test-evidence.js';
import { createHttpGet } from '../http/get.js';
import { verificationFailure } from '../testing/failure.js';
import {
  MOCK_PCCS_PATHS,
  type MockPccsCollateral,
  startMockPccs,
  testPccsCollateral,
} from '../testing/mock-pccs.js';
import {
  type MockAnswer,
  type MockHttpsService,
  MockHttpsService as Service,
} from '../testing/mock-service.js';
import { createTestTlsIdentity } from '../testing/tls.js';
import {
  crlDistributionPoint,
  intelCollateralSource,
  PcsClientToolFile,
  PcsCollateralService,
} from './collateral-service.js';
import { TdxVerifier } from './index.js';
import { INTEL_SGX_ROOT_CA_PEM, INTEL_SGX_TCB_SIGNING_PEM } from './intel-roots.gen.js';
import {
  createTestQuotingEnclave,
  createTestSgxPki,
  issueTestPck,
  signTestQuote,
  type TestPlatform,
} from './test-pki.js';
import type { TdxVerifierOptions } from './verify.js';

const PLATFORM: TestPlatform = {
  fmspc: Buffer.from('00906ed50000', 'hex'),
  tcbComponents: [3, 3, 2, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0],
  pceSvn: 13,
};
const TEE_TCB_SVN = [4, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const REPORT_DATA = Buffer.alloc(64, 0x11);
const FMSPC = '00906ED50000';

const tls = createTestTlsIdentity();
const httpGet = createHttpGet({ ca: tls.caPem });
const pki = createTestSgxPki();
const pck = issueTestPck(pki, PLATFORM);
const qe = createTestQuotingEnclave(pki, pck);
const quote = signTestQuote(qe, {
  teeTcbSvn: Buffer.from(TEE_TCB_SVN),
  tdAttributes: Buffer.from('0000001000000000', 'hex'),
  xfam: Buffer.from('e702060000000000', 'hex'),
  mrTd: Buffer.alloc(48, 0x5a),
  mrConfigId: Buffer.alloc(48),
  reportData: REPORT_DATA,
});
const evidence = { cc_eventlog: null, quote: quote.toString('base64') };
const verifier = new TdxVerifier();
const good = testPccsCollateral(pki, PLATFORM, TEE_TCB_SVN);
const collateral: { current: MockPccsCollateral } = { current: good };
let pccs: MockHttpsService;

beforeAll(async () => {
  pccs = await startMockPccs(tls, collateral);
});
afterAll(async () => {
  await pccs?.close();
});
afterEach(() => {
  collateral.current = good;
  pccs.override = undefined;
  pccs.resetRequests();
});

function service(o: { timeoutMs?: number; now?: () => number } = {}): PcsCollateralService {
  return new PcsCollateralService({
    url: `${pccs.url}/sgx/certification/v4/`,
    httpGet,
    ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
    ...(o.now !== undefined ? { cache: { now: o.now } } : {}),
  });
}

const options = (s: PcsCollateralService | ReturnType<typeof intelCollateralSource>): TdxVerifierOptions => ({
  trustedSgxRoots: [pki.root.pem],
  collateralService: s,
});

const verify = (s: PcsCollateralService | ReturnType<typeof intelCollateralSource>) =>
  verifier.evaluate(evidence, { reportData: REPORT_DATA, tdx: options(s) });

describe('tdx collateral from a PCCS', () => {
  it("fetches the quote's collateral once (4 requests), then serves it from the cache (0 requests)", async () => {
    const s = service();
    const [cold] = await verify(s);
    expect(cold!.claims).toMatchObject({ tcb_status: 'UpToDate', pck_crl_num: 1, root_ca_crl_num: 1 });
    expect(pccs.requests).toEqual([
      `${MOCK_PCCS_PATHS.tcb}?fmspc=${FMSPC}&update=early`,
      `${MOCK_PCCS_PATHS.qeIdentity}?update=early`,
      `${MOCK_PCCS_PATHS.pckCrl}?ca=platform&encoding=der`,
      MOCK_PCCS_PATHS.rootCaCrl,
    ]);
    pccs.resetRequests();
    const [warm] = await verify(s);
    expect(warm!.claims).toMatchObject({ tcb_status: 'UpToDate' });
    expect(pccs.requests).toEqual([]);
    expect(s.cacheStats).toMatchObject({ hits: 4, loads: 4 });
  });

  it('asks for standard TCB info when tcb_update_type is standard, from the URL origin only', async () => {
    const s = new PcsCollateralService({
      url: `${pccs.url}/some/prefix/`,
      tcbUpdateType: 'standard',
      httpGet,
    });
    await verify(s);
    expect(pccs.requests[0]).toBe(`${MOCK_PCCS_PATHS.tcb}?fmspc=${FMSPC}&update=standard`);
  });

  it('refuses a quote whose PCK the PCK CA has revoked', async () => {
    const serial = new X509Certificate(pck.der).serialNumber;
    collateral.current = testPccsCollateral(pki, PLATFORM, TEE_TCB_SVN, { revokedPcks: [serial] });
    const e = await verificationFailure(verify(service()));
    expect(e.code).toBe('CERT_REVOKED');
    expect(e.message).toMatch(/PCK certificate is revoked/);
  });

  it('fails closed, naming the URL and status, when the service answers 500', async () => {
    pccs.override = (url, answer) =>
      url.pathname === MOCK_PCCS_PATHS.qeIdentity ? { status: 500, body: 'boom' } : answer;
    const e = await verificationFailure(verify(service()));
    expect(e.code).toBe('COLLATERAL_UNAVAILABLE');
    expect(e.message).toBe(
      `QE identity: GET ${pccs.url}${MOCK_PCCS_PATHS.qeIdentity}?update=early answered HTTP 500`,
    );
  });

  it('gives up on a service that never answers after the configured timeout', async () => {
    pccs.override = (url, answer) => (url.pathname === MOCK_PCCS_PATHS.tcb ? 'hang' : answer);
    const e = await verificationFailure(verify(service({ timeoutMs: 300 })));
    expect(e.code).toBe('COLLATERAL_UNAVAILABLE');
    expect(e.message).toContain(`GET ${pccs.url}${MOCK_PCCS_PATHS.tcb}?fmspc=${FMSPC}&update=early failed`);
    expect(e.message).toContain('no complete answer within 300 ms');
  });

  it('refuses a tampered TCB info body, and does not cache it', async () => {
    pccs.override = (url, answer) =>
      url.pathname === MOCK_PCCS_PATHS.tcb && answer !== undefined
        ? { ...answer, body: String(answer.body).replace('"pcesvn":13', '"pcesvn":12') }
        : answer;
    const s = service();
    const e = await verificationFailure(verify(s));
    expect(e.code).toBe('COLLATERAL_INVALID');
    expect(e.message).toBe(
      `TCB info from ${pccs.url}${MOCK_PCCS_PATHS.tcb}?fmspc=${FMSPC}&update=early is not signed by a trusted TCB signing certificate`,
    );
    pccs.override = undefined;
    await expect(verify(s)).resolves.toHaveLength(1);
  });

  it('refuses an issuer chain that does not reach a trusted root, and one that is not PEM', async () => {
    const other = createTestSgxPki();
    const forged = testPccsCollateral(other, PLATFORM, TEE_TCB_SVN);
    collateral.current = { ...good, tcbInfo: forged.tcbInfo, signingChainPem: forged.signingChainPem };
    const e = await verificationFailure(verify(service()));
    expect(e.code).toBe('CERT_CHAIN_INVALID');
    expect(e.message).toContain(`TCB info from ${pccs.url}`);
    expect(e.message).toContain('issuer chain does not chain to a trusted SGX root');
    // The right document with a chain swapped for another PKI's: still refused.
    collateral.current = { ...good, signingChainPem: forged.signingChainPem };
    expect((await verificationFailure(verify(service()))).code).toBe('CERT_CHAIN_INVALID');
    pccs.override = (url, answer) =>
      url.pathname === MOCK_PCCS_PATHS.tcb && answer !== undefined
        ? { ...answer, headers: { 'TCB-Info-Issuer-Chain': '%ZZnot-pem' } }
        : answer;
    expect((await verificationFailure(verify(service()))).code).toBe('CERT_MALFORMED');
    pccs.override = (url, answer) =>
      url.pathname === MOCK_PCCS_PATHS.tcb && answer !== undefined ? { ...answer, headers: {} } : answer;
    expect((await verificationFailure(verify(service()))).message).toMatch(
      /has no tcb-info-issuer-chain header/,
    );
  });

  it('refuses a PCK CRL that its issuer did not sign', async () => {
    const other = createTestSgxPki();
    collateral.current = { ...good, pckCrl: testPccsCollateral(other, PLATFORM, TEE_TCB_SVN).pckCrl };
    const e = await verificationFailure(verify(service()));
    expect(e.code).toBe('COLLATERAL_INVALID');
    expect(e.message).toBe(
      `PCK CRL from ${pccs.url}${MOCK_PCCS_PATHS.pckCrl}?ca=platform&encoding=der is not signed by its issuer`,
    );
  });

  it('refreshes in the background, and serves valid cached collateral while the service is down', async () => {
    let clock = Date.now();
    const s = service({ now: () => clock });
    await verify(s);
    expect(pccs.requests).toHaveLength(4);
    // Two days on (past the 24 h refresh age, before nextUpdate): served, and refreshed behind.
    clock += 2 * 86_400_000;
    pccs.resetRequests();
    await verify(s);
    await s.settled();
    expect(pccs.requests).toHaveLength(4);
    expect(s.cacheStats.refreshes).toBe(4);
    // Another two days on, the service is down: the refresh fails, the cache still answers.
    clock += 2 * 86_400_000;
    pccs.override = () => ({ status: 503, body: '' });
    await expect(verify(s)).resolves.toHaveLength(1);
    await s.settled();
    expect(s.cacheStats.refreshFailures).toBe(4);
    // Past nextUpdate (30 days after issue) nothing cached may be served: fail closed.
    clock += 30 * 86_400_000;
    const e = await verificationFailure(verify(s));
    expect(e.code).toBe('COLLATERAL_UNAVAILABLE');
    expect(e.message).toMatch(/answered HTTP 503/);
  });

  it('shares one fetch between concurrent verifications', async () => {
    const s = service();
    await Promise.all([verify(s), verify(s), verify(s)]);
    expect(pccs.requests).toHaveLength(4);
  });
});

describe('hostile collateral answers', () => {
  const tcbPath = MOCK_PCCS_PATHS.tcb;
  const answerTcb = (f: (a: MockAnswer) => MockAnswer) => {
    pccs.override = (url, answer) => (url.pathname === tcbPath && answer !== undefined ? f(answer) : answer);
  };

  it.each<[string, (a: MockAnswer) => MockAnswer, string, RegExp]>([
    [
      'an oversize body',
      (a) => ({ ...a, body: 'x'.repeat(300 * 1024) }),
      'COLLATERAL_UNAVAILABLE',
      /larger than 262144 bytes/,
    ],
    ['a body that is not JSON', (a) => ({ ...a, body: '{"tcbInfo":' }), 'COLLATERAL_INVALID', /is not JSON/],
    [
      'a repeated tcbInfo member',
      (a) => ({ ...a, body: String(a.body).replace('{"tcbInfo":', '{"tcbInfo":{},"tcbInfo":') }),
      'COLLATERAL_INVALID',
      /no single tcbInfo member/,
    ],
    [
      'a chain of five certificates',
      (a) => ({ ...a, headers: { 'TCB-Info-Issuer-Chain': encodeURIComponent(pki.root.pem.repeat(5)) } }),
      'EVIDENCE_TOO_LARGE',
      /more than 4 certificates/,
    ],
    [
      'a redirect',
      () => ({ status: 302, headers: { location: 'https://elsewhere.test/' }, body: '' }),
      'COLLATERAL_UNAVAILABLE',
      /answered HTTP 302/,
    ],
  ])('refuses %s', async (_name, f, code, message) => {
    answerTcb(f);
    const e = await verificationFailure(verify(service()));
    expect(e.code).toBe(code);
    expect(e.message).toMatch(message);
  });

  it('refuses a PCS Client Tool file that is not its JSON', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pcs-hostile-'));
    try {
      for (const [text, msg] of [
        ['not json', /is not JSON/],
        ['{"collaterals": []}', /no "collaterals" object/],
        [
          `{"collaterals": {"tcbinfos": [{"fmspc": "${FMSPC}", "tdx_tcbinfo": {"tcbInfo": "x", "signature": "00"}}]}}`,
          /no TDX TCB info/,
        ],
      ] as const) {
        const file = join(dir, 'c.json');
        writeFileSync(file, text);
        const e = await verificationFailure(verify(intelCollateralSource({ url: pathToFileURL(file).href })));
        expect(e.message).toMatch(msg);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('az-tdx-vtpm with collateral from a PCCS', () => {
  it('verifies the TD quote behind the vTPM with fetched collateral, and refuses a revoked PCK', async () => {
    const nonce = Buffer.alloc(32, 0x42);
    const ev = makeAzTdxTestEvidence(qe, { nonce, td: { teeTcbSvn: Buffer.from(TEE_TCB_SVN) } });
    const az = new AzTdxVtpmVerifier();
    const [r] = await az.evaluate(ev, { reportData: nonce, tdx: options(service()) });
    expect(r!.claims).toMatchObject({ tcb_status: 'UpToDate' });
    expect(pccs.requests).toHaveLength(4);
    const serial = new X509Certificate(pck.der).serialNumber;
    collateral.current = testPccsCollateral(pki, PLATFORM, TEE_TCB_SVN, { revokedPcks: [serial] });
    expect(
      (await verificationFailure(az.evaluate(ev, { reportData: nonce, tdx: options(service()) }))).code,
    ).toBe('CERT_REVOKED');
  });
});

describe('Intel PCS specifics', () => {
  it("takes the root CA CRL from the root certificate's distribution point", () => {
    expect(crlDistributionPoint(new X509Certificate(INTEL_SGX_ROOT_CA_PEM))).toBe(
      'https://certificates.trustedservices.intel.com/IntelSGXRootCA.der',
    );
    const s = new PcsCollateralService({
      url: 'https://api.trustedservices.intel.com/sgx/certification/v4/',
    });
    expect(s.isIntelPcs).toBe(true);
    expect(s.tcbInfoUrl(Buffer.from('50806f000000', 'hex'))).toBe(
      'https://api.trustedservices.intel.com/tdx/certification/v4/tcb?fmspc=50806F000000&update=early',
    );
    expect(
      new PcsCollateralService({ url: 'https://pccs.example:8081/sgx/certification/v4/' }).isIntelPcs,
    ).toBe(false);
    expect(() => new PcsCollateralService({ url: 'ftp://x' })).toThrow(/expected an https/);
  });
});

describe("the PCS Client Tool's file (file://)", () => {
  const dir = mkdtempSync(join(tmpdir(), 'pcs-file-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function toolFile(extra: Record<string, unknown> = {}): string {
    const doc = (text: string) => JSON.parse(text) as Record<string, unknown>;
    const file = join(dir, `collateral-${Math.random().toString(16).slice(2)}.json`);
    writeFileSync(
      file,
      // Python's json.dump spacing, as the tool writes it: signatures still hold after re-serializing.
      JSON.stringify(
        {
          collaterals: {
            version: '3.0',
            tcbinfos: [{ fmspc: FMSPC, tdx_tcbinfo: doc(good.tcbInfo(FMSPC)!) }],
            tdqeidentity: doc(good.qeIdentity),
            pckcacrl: { platformCrl: good.pckCrl.platform!.toString('hex') },
            rootcacrl: good.rootCaCrl.toString('hex'),
            certificates: {
              'TCB-Info-Issuer-Chain': encodeURIComponent(good.signingChainPem),
              'SGX-Enclave-Identity-Issuer-Chain': encodeURIComponent(good.signingChainPem),
            },
            ...extra,
          },
        },
        null,
        1,
      ),
    );
    return file;
  }

  it('verifies with the collateral the file holds, and names the file when the FMSPC is missing', async () => {
    const file = toolFile();
    const source = intelCollateralSource({ url: pathToFileURL(file).href });
    expect(source).toBeInstanceOf(PcsClientToolFile);
    const [r] = await verify(source);
    expect(r!.claims).toMatchObject({ tcb_status: 'UpToDate', pck_crl_num: 1 });
    const empty = toolFile({ tcbinfos: [] });
    const e = await verificationFailure(verify(intelCollateralSource({ url: pathToFileURL(empty).href })));
    expect(e.code).toBe('COLLATERAL_MISMATCH');
    expect(e.message).toBe(`no TCB info for the PCK's FMSPC ${FMSPC} in ${empty}`);
  });

  it('early prefers the _early entry; standard never reads it', async () => {
    const broken = { enclaveIdentity: { id: 'TD_QE' }, signature: '00' };
    const file = toolFile({ tdqeidentity_early: broken });
    expect(
      (await verificationFailure(verify(intelCollateralSource({ url: pathToFileURL(file).href })))).code,
    ).toBe('COLLATERAL_INVALID');
    await expect(
      verify(intelCollateralSource({ url: pathToFileURL(file).href, tcbUpdateType: 'standard' })),
    ).resolves.toHaveLength(1);
  });

  it('says which file is missing', async () => {
    const e = await verificationFailure(
      verify(intelCollateralSource({ url: pathToFileURL(join(dir, 'nope.json')).href })),
    );
    expect(e.code).toBe('COLLATERAL_UNAVAILABLE');
    expect(e.message).toContain(join(dir, 'nope.json'));
  });
});

describe("trustee's tdx_quote_4.dat against a service serving trustee's tcbInfo.json", () => {
  const VECTORS = vector('trustee/tdx');
  let intel: Service;

  beforeAll(async () => {
    const tcbInfo = readFileSync(join(VECTORS, 'tcbInfo.json'), 'utf8');
    const qeIdentity = readFileSync(join(VECTORS, 'enclaveIdentity.json'), 'utf8');
    const chain = encodeURIComponent(INTEL_SGX_TCB_SIGNING_PEM + INTEL_SGX_ROOT_CA_PEM);
    // Whatever FMSPC is asked, this service answers with the one document it has.
    intel = await Service.start(tls, (url): MockAnswer | undefined =>
      url.pathname === MOCK_PCCS_PATHS.tcb
        ? { status: 200, headers: { 'TCB-Info-Issuer-Chain': chain }, body: tcbInfo }
        : url.pathname === MOCK_PCCS_PATHS.qeIdentity
          ? { status: 200, headers: { 'SGX-Enclave-Identity-Issuer-Chain': chain }, body: qeIdentity }
          : undefined,
    );
  });
  afterAll(async () => {
    await intel?.close();
  });

  it("asks for the quote's own FMSPC and refuses the TCB info for another by name", async () => {
    const quote4 = readFileSync(join(VECTORS, 'tdx_quote_4.dat'));
    const s = new PcsCollateralService({ url: intel.url, httpGet });
    const e = await verificationFailure(
      new TdxVerifier().evaluate(
        { cc_eventlog: null, quote: quote4.toString('base64') },
        {
          reportData: quote4.subarray(48 + 520, 48 + 584),
          now: new Date('2025-11-01T00:00:00Z'),
          tdx: { collateralService: s },
        },
      ),
    );
    expect(intel.requests).toEqual([`${MOCK_PCCS_PATHS.tcb}?fmspc=50806F000000&update=early`]);
    expect(e.code).toBe('COLLATERAL_MISMATCH');
    expect(e.message).toBe(
      `TCB info from ${intel.url}${MOCK_PCCS_PATHS.tcb}?fmspc=50806F000000&update=early is for FMSPC 00A06D080000, not the PCK's FMSPC 50806F000000`,
    );
  });
});
