// kbs-verify with collateral services: --collateral-service (Intel PCS/PCCS) and --vcek-source kds,
// against the mock PCCS and KDS over HTTPS.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliIo, main } from './cli.js';
import { createHttpGet } from './http/get.js';
import { parseSnpReport, SNP_REPORT_SIZE } from './snp/report.js';
import { sevJsonFromReport } from './snp/serde.js';
import { createTestAmdRoots, issueTestVek, signSnpReport } from './snp/test-roots.js';
import { clearKdsCache } from './snp/vcek-source.js';
import {
  createTestQuotingEnclave,
  createTestSgxPki,
  issueTestPck,
  signTestQuote,
  type TestPlatform,
} from './tdx/test-pki.js';
import { signTestAmdCrl, startMockKds } from './testing/mock-kds.js';
import { MOCK_PCCS_PATHS, startMockPccs, testPccsCollateral } from './testing/mock-pccs.js';
import type { MockHttpsService } from './testing/mock-service.js';
import { createTestTlsIdentity } from './testing/tls.js';

const tls = createTestTlsIdentity();
const PLATFORM: TestPlatform = {
  fmspc: Buffer.from('00906ed50000', 'hex'),
  tcbComponents: Array(16).fill(1),
  pceSvn: 5,
};
const TEE_TCB_SVN = Array(16).fill(0);
const sgx = createTestSgxPki();
const quote = signTestQuote(createTestQuotingEnclave(sgx, issueTestPck(sgx, PLATFORM)), {
  reportData: Buffer.alloc(64, 0xab),
  tdAttributes: Buffer.from('0000001000000000', 'hex'),
});
const amd = createTestAmdRoots();
const chipId = createHash('sha512').update('cli chip').digest();
const tcb = { bootloader: 3, tee: 0, snp: 8, microcode: 115 };
const vcek = issueTestVek(amd, { tcb, hwid: chipId });
function snpReport(): Buffer {
  const b = Buffer.alloc(SNP_REPORT_SIZE);
  b.writeUInt32LE(3, 0);
  b.writeBigUInt64LE(0x30000n, 0x08);
  b.writeUInt32LE(1, 0x34);
  Buffer.from([tcb.bootloader, tcb.tee, 0, 0, 0, 0, tcb.snp, tcb.microcode]).copy(b, 0x180);
  b[0x188] = 0x19;
  b[0x189] = 0x01;
  chipId.copy(b, 0x1a0);
  return signSnpReport(b, vcek.privateKey);
}

let pccs: MockHttpsService;
let kds: MockHttpsService;
beforeAll(async () => {
  pccs = await startMockPccs(tls, { current: testPccsCollateral(sgx, PLATFORM, TEE_TCB_SVN) });
  kds = await startMockKds(tls, {
    current: {
      product: 'Milan',
      vcek: () => vcek.der,
      certChainPem: amd.ask.pem + amd.ark.pem,
      crl: signTestAmdCrl(amd.ark.privateKey, []),
    },
  });
});
afterAll(async () => {
  await pccs?.close();
  await kds?.close();
});

function io(files: Record<string, string>) {
  const out: string[] = [];
  const err: string[] = [];
  const cli: CliIo = {
    out: (s) => out.push(s),
    err: (s) => err.push(s),
    readFile: (p) => {
      const f = files[p];
      if (f === undefined) throw Object.assign(new Error(`ENOENT: ${p}`), { code: 'ENOENT' });
      return Buffer.from(f);
    },
    httpGet: createHttpGet({ ca: tls.caPem }),
  };
  return { cli, out: () => out.join(''), err: () => err.join('') };
}

const tdxFiles = {
  'ev.json': JSON.stringify({ cc_eventlog: null, quote: quote.toString('base64') }),
  'root.pem': sgx.root.pem,
};

describe('kbs-verify --collateral-service', () => {
  it('fetches the TDX collateral from a PCCS, with the TCB update type asked for', async () => {
    pccs.resetRequests();
    const t = io(tdxFiles);
    const base = ['--tee', 'tdx', '--evidence', 'ev.json', '--trusted-root', 'root.pem'];
    const code = await main(
      [...base, '--collateral-service', `${pccs.url}/sgx/certification/v4/`, '--tcb-update-type', 'standard'],
      t.cli,
    );
    expect(code, t.err()).toBe(0);
    expect(JSON.parse(t.out())[0].claims.tcb_status).toBe('UpToDate');
    expect(pccs.requests[0]).toBe(`${MOCK_PCCS_PATHS.tcb}?fmspc=00906ED50000&update=standard`);
    expect(pccs.requests).toHaveLength(4);
  });

  it('exits 1 naming the URL and status when the service fails, 2 on conflicting options', async () => {
    pccs.override = () => ({ status: 500, body: '' });
    try {
      const t = io(tdxFiles);
      const base = ['--tee', 'tdx', '--evidence', 'ev.json', '--trusted-root', 'root.pem'];
      expect(await main([...base, '--collateral-service', pccs.url], t.cli)).toBe(1);
      expect(t.err()).toContain(
        `COLLATERAL_UNAVAILABLE: TCB info: GET ${pccs.url}${MOCK_PCCS_PATHS.tcb}?fmspc=00906ED50000&update=early answered HTTP 500`,
      );
    } finally {
      pccs.override = undefined;
    }
    const t2 = io({ ...tdxFiles, 'qe.json': '{}', 'tcb.json': '{}' });
    const both = ['--tee', 'tdx', '--evidence', 'ev.json', '--collateral-service', pccs.url];
    expect(await main([...both, '--tcb-info', 'tcb.json', '--qe-identity', 'qe.json'], t2.cli)).toBe(2);
    expect(t2.err()).toContain('exclude each other');
    expect(await main(['--tee', 'tdx', '--evidence', 'ev.json', '--tcb-update-type', 'late'], t2.cli)).toBe(
      2,
    );
    expect(
      await main(['--tee', 'tdx', '--evidence', 'ev.json', '--collateral-service', 'ftp://x'], t2.cli),
    ).toBe(2);
  });
});

describe('kbs-verify --vcek-source kds', () => {
  it('gets the VCEK, chain and CRL from KDS for snp evidence without cert_chain', async () => {
    clearKdsCache();
    kds.resetRequests();
    const t = io({
      'ev.json': JSON.stringify({
        attestation_report: sevJsonFromReport(parseSnpReport(snpReport())),
        cert_chain: null,
      }),
      'ark.pem': amd.bundlePem,
    });
    const code = await main(
      [
        '--tee',
        'snp',
        '--evidence',
        'ev.json',
        '--trusted-ark',
        'ark.pem',
        '--vcek-source',
        `kds=${kds.url}`,
      ],
      t.cli,
    );
    expect(code, t.err()).toBe(0);
    expect(kds.requests.map((r) => r.split('?')[0])).toEqual([
      `/vcek/v1/Milan/${chipId.toString('hex')}`,
      '/vcek/v1/Milan/cert_chain',
      '/vcek/v1/Milan/crl',
    ]);
    expect(await main(['--tee', 'snp', '--evidence', 'ev.json', '--vcek-source', 'amd'], t.cli)).toBe(2);
  });
});
