// The attestation service configured only with collateral service URLs (trustee's
// `dcap_verifier.collateral_service` and `snp_verifier.vcek_sources`), against a mock PCCS and a
// mock KDS over HTTPS that serve collateral from test PKIs (trusted through the test-root keys).
import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KvStorage, Namespace, SetOptions } from '@broker/kv-storage';
import { canonicalJson } from '@broker/protocol';
import {
  clearKdsCache,
  createHttpGet,
  parseSnpReport,
  SNP_REPORT_SIZE,
  sevJsonFromReport,
  type TcbVersion,
  VerificationError,
} from '@broker/verifier';
import {
  createTestAmdRoots,
  createTestQuotingEnclave,
  createTestSgxPki,
  createTestTlsIdentity,
  issueTestPck,
  issueTestVek,
  MOCK_PCCS_PATHS,
  type MockHttpsService,
  signSnpReport,
  signTestAmdCrl,
  signTestQuote,
  startMockKds,
  startMockPccs,
  type TestPlatform,
  testPccsCollateral,
} from '@broker/verifier/testing';
import { pino } from 'pino';
import { parse } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAttestationServiceConfig } from './config.js';
import { AttestationFailed } from './errors.js';
import { createAttestationService } from './service.js';
import type { AttestationService } from './service-api.js';

class MemoryKv implements KvStorage {
  readonly data = new Map<string, Uint8Array>();
  async get(ns: Namespace, key: string) {
    return this.data.get(`${ns}/${key}`);
  }
  async set(ns: Namespace, key: string, value: Uint8Array, options?: SetOptions) {
    if (options?.overwrite === false && this.data.has(`${ns}/${key}`)) return false;
    this.data.set(`${ns}/${key}`, value);
    return true;
  }
  async delete(ns: Namespace, key: string) {
    return this.data.delete(`${ns}/${key}`);
  }
  async list(ns: Namespace) {
    return [...this.data.keys()].filter((k) => k.startsWith(`${ns}/`)).map((k) => k.slice(ns.length + 1));
  }
  async close() {}
}

const dir = mkdtempSync(join(tmpdir(), 'kbs-collateral-'));
const tls = createTestTlsIdentity();
const httpGet = createHttpGet({ ca: tls.caPem });
const logger = pino({ level: 'silent' });

const teeKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
const runtimeData = { 'additional-evidence': '', nonce: 'bm9uY2U=', 'tee-pubkey': { kty: 'EC', ...teeKey } };
const reportData = createHash('sha384').update(canonicalJson(runtimeData)).digest();

// Intel side: a test SGX PKI and a quote binding the runtime data.
const PLATFORM: TestPlatform = {
  fmspc: Buffer.from('00a06f000000', 'hex'),
  tcbComponents: [5, 5, 13, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0],
  pceSvn: 13,
};
const TEE_TCB_SVN = [4, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const sgx = createTestSgxPki();
const qe = createTestQuotingEnclave(sgx, issueTestPck(sgx, PLATFORM));
const quote = signTestQuote(qe, {
  teeTcbSvn: Buffer.from(TEE_TCB_SVN),
  tdAttributes: Buffer.from('0000001000000000', 'hex'),
  xfam: Buffer.from('e702060000000000', 'hex'),
  mrTd: Buffer.alloc(48, 0x5a),
  mrConfigId: Buffer.alloc(48),
  reportData: Buffer.concat([reportData, Buffer.alloc(16)]),
});
const tdxEvidence = { cc_eventlog: null, quote: quote.toString('base64') };

// AMD side: a test ARK/ASK, a VCEK, and a Milan report without a certificate table.
const amd = createTestAmdRoots({ rsaBits: 2048 });
const tcb: TcbVersion = { bootloader: 4, tee: 0, snp: 22, microcode: 213 };
const chipId = createHash('sha512').update('kbs collateral chip').digest();
const vcek = issueTestVek(amd, { tcb, hwid: chipId });
function snpEvidence() {
  const b = Buffer.alloc(SNP_REPORT_SIZE);
  b.writeUInt32LE(3, 0);
  b.writeBigUInt64LE(0x30000n, 0x08);
  b.writeUInt32LE(1, 0x34);
  reportData.copy(b, 0x50);
  Buffer.from([tcb.bootloader, tcb.tee, 0, 0, 0, 0, tcb.snp, tcb.microcode]).copy(b, 0x180);
  b[0x188] = 0x19;
  b[0x189] = 0x01; // Milan
  b[0x18a] = 1;
  chipId.copy(b, 0x1a0);
  return {
    attestation_report: sevJsonFromReport(parseSnpReport(signSnpReport(b, vcek.privateKey))),
    cert_chain: null,
  };
}

let pccs: MockHttpsService;
let kds: MockHttpsService;
let service: AttestationService;

beforeAll(async () => {
  clearKdsCache();
  pccs = await startMockPccs(tls, { current: testPccsCollateral(sgx, PLATFORM, TEE_TCB_SVN) });
  kds = await startMockKds(tls, {
    current: {
      product: 'Milan',
      vcek: (hwid) => (hwid === chipId.toString('hex') ? vcek.der : undefined),
      certChainPem: amd.ask.pem + amd.ark.pem,
      crl: signTestAmdCrl(amd.ark.privateKey, []),
    },
  });
  const sgxRoot = join(dir, 'sgx-root.pem');
  const arkBundle = join(dir, 'amd-roots.pem');
  writeFileSync(sgxRoot, sgx.root.pem);
  writeFileSync(arkBundle, amd.bundlePem);
  // Only URLs, and the test roots the mock hardware chains to.
  const toml = `[attestation_service]
[attestation_service.verifier_config.dcap_verifier]
collateral_service = "${pccs.url}/sgx/certification/v4/"
tcb_update_type = "standard"
[attestation_service.verifier_config.tdx_verifier]
trusted_sgx_root_paths = ["${sgxRoot}"]
[attestation_service.verifier_config.snp_verifier]
vcek_sources = [{ type = "KDS", base_url = "${kds.url}" }]
trusted_ark_paths = ["${arkBundle}"]
`;
  const cfg = parseAttestationServiceConfig((parse(toml) as Record<string, unknown>).attestation_service);
  service = await createAttestationService(cfg, new MemoryKv(), logger, { httpGet });
});

afterAll(async () => {
  await pccs?.close();
  await kds?.close();
  rmSync(dir, { recursive: true, force: true });
});

const attest = (tee: 'tdx' | 'snp', evidence: unknown) =>
  service.verify({
    tee,
    evidence,
    runtimeData,
    runtimeDataHashAlgorithm: 'sha384',
    initData: null,
    additional: [],
    policyIds: ['default'],
  });

describe('attestation with collateral from services only', () => {
  it('verifies a TDX quote with PCCS collateral: 4 requests cold, none warm', async () => {
    await expect(attest('tdx', tdxEvidence)).resolves.toMatch(/^ey/);
    expect(pccs.requests).toEqual([
      `${MOCK_PCCS_PATHS.tcb}?fmspc=00A06F000000&update=standard`,
      `${MOCK_PCCS_PATHS.qeIdentity}?update=standard`,
      `${MOCK_PCCS_PATHS.pckCrl}?ca=platform&encoding=der`,
      MOCK_PCCS_PATHS.rootCaCrl,
    ]);
    pccs.resetRequests();
    await expect(attest('tdx', tdxEvidence)).resolves.toMatch(/^ey/);
    expect(pccs.requests).toEqual([]);
  });

  it('verifies an SNP report with its VCEK from KDS: 3 requests cold, none warm', async () => {
    await expect(attest('snp', snpEvidence())).resolves.toMatch(/^ey/);
    expect(kds.requests).toEqual([
      `/vcek/v1/Milan/${chipId.toString('hex')}?blSPL=04&teeSPL=00&snpSPL=22&ucodeSPL=213`,
      '/vcek/v1/Milan/cert_chain',
      '/vcek/v1/Milan/crl',
    ]);
    kds.resetRequests();
    await expect(attest('snp', snpEvidence())).resolves.toMatch(/^ey/);
    expect(kds.requests).toEqual([]);
  });

  it('keeps attesting from the cache while the services are down', async () => {
    pccs.override = () => ({ status: 500, body: '' });
    kds.override = () => ({ status: 500, body: '' });
    try {
      await expect(attest('tdx', tdxEvidence)).resolves.toMatch(/^ey/);
      await expect(attest('snp', snpEvidence())).resolves.toMatch(/^ey/);
    } finally {
      pccs.override = undefined;
      kds.override = undefined;
    }
  });

  it('fails closed with the URL and status when a service is down and nothing is cached', async () => {
    const cfg = parseAttestationServiceConfig(
      (
        parse(`[attestation_service]
[attestation_service.verifier_config.dcap_verifier]
collateral_service = "${pccs.url}"
[attestation_service.verifier_config.tdx_verifier]
trusted_sgx_root_paths = ["${join(dir, 'sgx-root.pem')}"]
`) as Record<string, unknown>
      ).attestation_service,
    );
    const failures: string[] = [];
    const cold = await createAttestationService(cfg, new MemoryKv(), logger, {
      httpGet,
      onCollateralFetchFailure: (source) => failures.push(source),
    });
    pccs.override = () => ({ status: 500, body: '' });
    try {
      const e = await cold
        .verify({
          tee: 'tdx',
          evidence: tdxEvidence,
          runtimeData,
          runtimeDataHashAlgorithm: 'sha384',
          initData: null,
          additional: [],
          policyIds: ['default'],
        })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(e).toBeInstanceOf(AttestationFailed);
      const cause = (e as Error).cause as VerificationError;
      expect(cause).toBeInstanceOf(VerificationError);
      expect(cause.code).toBe('COLLATERAL_UNAVAILABLE');
      expect(cause.message).toBe(
        `TCB info: GET ${pccs.url}${MOCK_PCCS_PATHS.tcb}?fmspc=00A06F000000&update=early answered HTTP 500`,
      );
      // The failed request is reported, so that monitoring sees the outage.
      expect(failures).toEqual(['pcs']);
    } finally {
      pccs.override = undefined;
    }
  });
});
