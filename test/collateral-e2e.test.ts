// A KBS (the real executable) configured only with collateral service URLs — trustee's
// `dcap_verifier.collateral_service` and `snp_verifier.vcek_sources = [{ type = "KDS", base_url }]`
// — plus the mock hardware's test roots, against a mock PCCS and a mock KDS over HTTPS. The KBS
// trusts their TLS certificate through NODE_EXTRA_CA_CERTS, as an operator trusts a private PCCS.
// Evidence comes from the mock TDX and SNP devices through the real attesters and an RCAR client.
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getAttester } from '@broker/attester';
import { KbsClient } from '@broker/kbs-client';
import {
  type MockSnpDevice,
  type MockTdxDevice,
  startMockSnpDevice,
  startMockTdxDevice,
} from '@broker/mock-tee';
import {
  createTestTlsIdentity,
  MOCK_PCCS_PATHS,
  type MockHttpsService,
  signTestAmdCrl,
  startMockKds,
  startMockPccs,
} from '@broker/verifier/testing';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, runToEnd } from './helpers/process.js';
import { type KbsHandle, prepareKbs } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-collateral-e2e-'));
const tls = createTestTlsIdentity();
const caFile = join(dir, 'collateral-ca.pem');
let tdx: MockTdxDevice;
let snp: MockSnpDevice;
let pccs: MockHttpsService;
let kds: MockHttpsService;
let kbs: KbsHandle;

beforeAll(async () => {
  tdx = await startMockTdxDevice({ stateDir: join(dir, 'tdx') });
  snp = await startMockSnpDevice({ stateDir: join(dir, 'snp'), rootKeyBits: 2048, certTable: 'none' });
  const hw = tdx.hardware;
  const fmspc = '00A06F000000';
  pccs = await startMockPccs(tls, {
    current: {
      tcbInfo: (f) => (f === fmspc ? tdx.collateral.tcbInfo : undefined),
      qeIdentity: tdx.collateral.qeIdentity,
      signingChainPem: hw.pki.tcbSigning.pem + hw.pki.root.pem,
      pckCrlChainPem: hw.pki.pckCa.pem + hw.pki.root.pem,
      pckCrl: { platform: tdx.collateral.pckCrl },
      rootCaCrl: tdx.collateral.rootCaCrl,
    },
  });
  const roots = snp.roots;
  if (roots.arkPrivateKey === undefined) throw new Error('the SNP device did not create its roots here');
  kds = await startMockKds(tls, {
    current: {
      product: roots.productName,
      vcek: (hwid) => (hwid === roots.chipId.toString('hex') ? roots.vcekDer : undefined),
      certChainPem: roots.askPem + roots.arkPem,
      crl: signTestAmdCrl(roots.arkPrivateKey, []),
    },
  });
  mkdirSync(join(dir, 'kbs'), { recursive: true });
  kbs = await prepareKbs(join(dir, 'kbs'));
  const sgxRoot = join(dir, 'sgx-root.pem');
  writeFileSync(sgxRoot, hw.rootPem);
  appendFileSync(
    kbs.configPath,
    `
[attestation_service.verifier_config.dcap_verifier]
collateral_service = "${pccs.url}/sgx/certification/v4/"

[attestation_service.verifier_config.tdx_verifier]
trusted_sgx_root_paths = ["${sgxRoot}"]

[attestation_service.verifier_config.snp_verifier]
vcek_sources = [{ type = "KDS", base_url = "${kds.url}" }]
trusted_ark_paths = ["${snp.rootsBundlePath}"]
`,
  );
  writeFileSync(caFile, tls.caPem);
  // The child inherits the environment as it is when it starts.
  const before = process.env.NODE_EXTRA_CA_CERTS;
  process.env.NODE_EXTRA_CA_CERTS = caFile;
  try {
    await kbs.start();
  } finally {
    if (before === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
    else process.env.NODE_EXTRA_CA_CERTS = before;
  }
}, 120_000);

afterAll(async () => {
  await kbs?.stop();
  await pccs?.close();
  await kds?.close();
  tdx?.close();
  snp?.close();
  rmSync(dir, { recursive: true, force: true });
});

type Submods = Record<string, { 'ear.veraison.annotated-evidence': Record<string, Record<string, unknown>> }>;

async function attest(tee: 'tdx' | 'snp', env: NodeJS.ProcessEnv): Promise<Record<string, unknown>> {
  const client = new KbsClient({
    url: kbs.url,
    certPem: kbs.tls.certPem,
    attester: getAttester(tee, { env }),
  });
  try {
    const { token } = await client.attest();
    const claims = decodeJwt(token) as unknown as { submods: Submods };
    return claims.submods.cpu0!['ear.veraison.annotated-evidence'][tee]!;
  } finally {
    client.close();
  }
}

describe('the KBS with collateral from services only', () => {
  it('verifies a TDX quote from the mock device with PCCS collateral: 4 requests cold, 0 warm', async () => {
    const env = { ...tdx.env, AAEL_PATH: join(dir, 'no-aa-eventlog') };
    const claims = await attest('tdx', env);
    expect(claims).toMatchObject({ tcb_status: 'UpToDate', collateral_expiration_status: '0' });
    expect(pccs.requests).toEqual([
      `${MOCK_PCCS_PATHS.tcb}?fmspc=00A06F000000&update=early`,
      `${MOCK_PCCS_PATHS.qeIdentity}?update=early`,
      `${MOCK_PCCS_PATHS.pckCrl}?ca=platform&encoding=der`,
      MOCK_PCCS_PATHS.rootCaCrl,
    ]);
    pccs.resetRequests();
    await attest('tdx', env);
    expect(pccs.requests).toEqual([]);
  }, 60_000);

  it('verifies an SNP report from the mock device with its VCEK from KDS: 3 requests cold, 0 warm', async () => {
    const claims = await attest('snp', snp.env);
    expect(claims.chip_id).toBe(snp.roots.chipId.toString('hex'));
    expect(kds.requests.map((r) => r.split('?')[0])).toEqual([
      `/vcek/v1/${snp.roots.productName}/${snp.roots.chipId.toString('hex')}`,
      `/vcek/v1/${snp.roots.productName}/cert_chain`,
      `/vcek/v1/${snp.roots.productName}/crl`,
    ]);
    kds.resetRequests();
    await attest('snp', snp.env);
    expect(kds.requests).toEqual([]);
  }, 60_000);

  it('kbs-verify --collateral-service and --vcek-source kds do the same from the command line', async () => {
    const env = { ...process.env, NODE_EXTRA_CA_CERTS: caFile };
    const tdxEvidence = join(dir, 'tdx-evidence.json');
    const reportData = Buffer.alloc(64, 7);
    writeFileSync(
      tdxEvidence,
      JSON.stringify({ cc_eventlog: null, quote: tdx.quote(reportData).toString('base64') }),
    );
    const sgxRoot = join(dir, 'sgx-root.pem');
    pccs.resetRequests();
    const t = await runToEnd(
      binary('kbs-verify'),
      [
        '--tee',
        'tdx',
        '--evidence',
        tdxEvidence,
        '--report-data',
        reportData.toString('hex'),
        '--trusted-root',
        sgxRoot,
        '--collateral-service',
        pccs.url,
        '--tcb-update-type',
        'standard',
      ],
      { env },
    );
    expect(t.code, t.stderr).toBe(0);
    expect(JSON.parse(t.stdout)[0].claims.tcb_status).toBe('UpToDate');
    expect(pccs.requests[0]).toBe(`${MOCK_PCCS_PATHS.tcb}?fmspc=00A06F000000&update=standard`);
    pccs.override = () => ({ status: 503, body: '' });
    try {
      const down = await runToEnd(
        binary('kbs-verify'),
        [
          '--tee',
          'tdx',
          '--evidence',
          tdxEvidence,
          '--report-data',
          reportData.toString('hex'),
          '--trusted-root',
          sgxRoot,
          '--collateral-service',
          pccs.url,
        ],
        { env },
      );
      expect(down.code).toBe(1);
      expect(down.stderr).toContain(
        `COLLATERAL_UNAVAILABLE: TCB info: GET ${pccs.url}${MOCK_PCCS_PATHS.tcb}?fmspc=00A06F000000&update=early answered HTTP 503`,
      );
    } finally {
      pccs.override = undefined;
    }
    const snpReportData = Buffer.alloc(64, 9);
    const snpEvidence = join(dir, 'snp-evidence.json');
    writeFileSync(
      snpEvidence,
      JSON.stringify(await getAttester('snp', { env: snp.env }).getEvidence(snpReportData)),
    );
    kds.resetRequests();
    const v = await runToEnd(
      binary('kbs-verify'),
      [
        '--tee',
        'snp',
        '--evidence',
        snpEvidence,
        '--report-data',
        snpReportData.toString('hex'),
        '--trusted-ark',
        snp.rootsBundlePath,
        '--vcek-source',
        `kds=${kds.url}`,
      ],
      { env },
    );
    expect(v.code, v.stderr).toBe(0);
    expect(kds.requests).toHaveLength(3);
  }, 60_000);
});
