// The az-tdx-vtpm attester against swtpm standing in for Azure's vTPM (AK at 0x81000003, the HCL
// report at NV 0x01400001) and the mock TEE's TD quote service; its evidence is then verified by
// the az-tdx-vtpm verifier configured with the mock's test SGX root and collateral.
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type MockTdxDevice, startMockTdxDevice, TdQuoteServer } from '@broker/mock-tee';
import { pcr8FromInitDataDigest } from '@broker/protocol';
import { attestationKeyTemplate, publicKeyFromTpmt, TPM_ALG, TPM_RH, TPMA_NV, Tpm } from '@broker/tpm';
import { type SwtpmInstance, startSwtpm } from '@broker/tpm/testing';
import { AzTdxVtpmVerifier, encodeTdReport, type VerificationError } from '@broker/verifier';
import { buildTdxHclReport } from '@broker/verifier/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvidenceCollectionFailed } from '../attester.js';
import { platformContext } from '../platform.js';
import {
  AZURE_AK_HANDLE,
  AzTdxVtpmAttester,
  azTdxVtpmModule,
  fetchTdQuote,
  HCL_REPORT_NV_INDEX,
  tdReportOf,
} from './index.js';

let swtpm: SwtpmInstance;
let stateDir: string;
let device: MockTdxDevice;
let quotes: TdQuoteServer;
let akJwk: { n: string; e: string };

/** What Azure's paravisor would do on the user-data write: an HCL report over these claims. */
async function provisionReport(userData: Uint8Array): Promise<Buffer> {
  const padded = Buffer.alloc(64);
  padded.set(userData);
  // The stand-in claims carry the AK only: swtpm's NV indices hold at most 2048 bytes.
  const claims = Buffer.from(
    JSON.stringify({
      keys: [{ kid: 'HCLAkPub', key_ops: ['sign'], kty: 'RSA', e: akJwk.e, n: akJwk.n }],
      'user-data': padded.toString('hex').toUpperCase(),
    }),
  );
  const reportData = Buffer.alloc(64);
  createHash('sha256').update(claims).digest().copy(reportData);
  const td = encodeTdReport({
    reportData,
    mrTd: device.td.mrTd,
    tdAttributes: device.td.tdAttributes,
    teeTcbSvn: device.td.teeTcbSvn,
  });
  const hcl = buildTdxHclReport(td, claims).subarray(0, 1236 + claims.length);
  const tpm = Tpm.open(swtpm.address);
  try {
    if ((await tpm.nvReadPublicIfDefined(HCL_REPORT_NV_INDEX)) !== undefined) {
      await tpm.nvUndefineSpace(TPM_RH.OWNER, HCL_REPORT_NV_INDEX);
    }
    await tpm.nvDefineSpace(TPM_RH.OWNER, {
      nvIndex: HCL_REPORT_NV_INDEX,
      nameAlg: TPM_ALG.SHA256,
      attributes: TPMA_NV.OWNERWRITE | TPMA_NV.OWNERREAD,
      authPolicy: new Uint8Array(),
      dataSize: hcl.length,
    });
    await tpm.nvWriteAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX, hcl);
  } finally {
    await tpm.close();
  }
  return hcl;
}

beforeAll(async () => {
  swtpm = await startSwtpm();
  stateDir = await mkdtemp(join(tmpdir(), 'az-tdx-attester-'));
  device = await startMockTdxDevice({ stateDir });
  quotes = new TdQuoteServer({ hardware: device.hardware });
  await quotes.listen();
  const tpm = Tpm.open(swtpm.address);
  try {
    const ak = await tpm.createPrimary(TPM_RH.OWNER, attestationKeyTemplate('rsa2048'));
    await tpm.evictControl(TPM_RH.OWNER, ak.handle, AZURE_AK_HANDLE);
    await tpm.flushContext(ak.handle);
    const jwk = publicKeyFromTpmt(ak.public).export({ format: 'jwk' });
    akJwk = { n: jwk.n!, e: jwk.e! };
  } finally {
    await tpm.close();
  }
});

afterAll(async () => {
  device?.close();
  await quotes?.close();
  await swtpm?.stop();
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
});

describe('az-tdx-vtpm attester', () => {
  const attester = () =>
    new AzTdxVtpmAttester({
      env: { BROKER_TPM: swtpm.address, BROKER_AZURE_IMDS_URL: quotes.url },
      reportSettleMs: 200,
    });

  it('collects v2 evidence that the verifier accepts with the test root, PCR8 carrying the initdata', async () => {
    const reportData = createHash('sha384').update('runtime').digest();
    await provisionReport(reportData);
    const initdata = createHash('sha256').update('initdata').digest();
    await attester().bindInitData(initdata);
    const evidence = await attester().getEvidence(reportData);
    expect(Object.keys(evidence)).toEqual(['version', 'tpm_quote', 'hcl_report', 'td_quote']);
    expect(evidence.tpm_quote.pcrs).toHaveLength(24);
    expect(quotes.quotes).toBeGreaterThan(0);
    const [r] = await new AzTdxVtpmVerifier().evaluate(evidence, {
      reportData,
      initDataHash: initdata,
      tdx: device.verifierOptions,
    });
    expect(r!.claims.report_data).toBe(reportData.toString('hex'));
    expect(r!.claims.init_data).toBe(Buffer.from(pcr8FromInitDataDigest(initdata)).toString('hex'));
    expect(r!.claims.tcb_status).toBe('UpToDate');
    // Another session's nonce, or another initdata: refused.
    const other = await new AzTdxVtpmVerifier()
      .evaluate(evidence, { reportData: Buffer.alloc(48, 1), tdx: device.verifierOptions })
      .catch((e: unknown) => e);
    expect((other as VerificationError).code).toBe('REPORT_DATA_MISMATCH');
    const wrongInit = await new AzTdxVtpmVerifier()
      .evaluate(evidence, { reportData, initDataHash: Buffer.alloc(32, 2), tdx: device.verifierOptions })
      .catch((e: unknown) => e);
    expect((wrongInit as VerificationError).code).toBe('INIT_DATA_MISMATCH');
  });

  it('is detected from the TDX HCL report in the vTPM', async () => {
    await provisionReport(Buffer.alloc(0));
    const d = await azTdxVtpmModule.detect(platformContext({ env: { BROKER_TPM: swtpm.address } }));
    expect(d.detected).toBe(true);
    expect((await azTdxVtpmModule.detect(platformContext({ env: {}, root: stateDir }))).detected).toBe(false);
  });

  it('refuses oversize report data and an SNP HCL report', async () => {
    await expect(attester().getEvidence(new Uint8Array(65))).rejects.toThrow(EvidenceCollectionFailed);
    const snpish = buildTdxHclReport(encodeTdReport({}), Buffer.from('{}'));
    snpish.writeUInt32LE(2, 1216 + 8);
    expect(() => tdReportOf(snpish)).toThrow(/not TDX/);
  });

  it('reports quote service failures', async () => {
    await expect(fetchTdQuote(quotes.url, new Uint8Array(10))).rejects.toThrow(/not 1024/);
    const report = encodeTdReport({});
    report[0] = 0; // not a TD report: the service answers 400
    await expect(fetchTdQuote(quotes.url, report)).rejects.toThrow(/HTTP 400/);
    await expect(fetchTdQuote('http://127.0.0.1:9', encodeTdReport({}), { timeoutMs: 2000 })).rejects.toThrow(
      /failed/,
    );
  });
});
