import { createHash, createPublicKey, type KeyObject, X509Certificate } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { VerificationError, type VerificationErrorCode } from '../errors.js';
import { createHttpGet } from '../http/get.js';
import { type MockKdsContent, signTestAmdCrl, startMockKds } from '../testing/mock-kds.js';
import type { MockHttpsService } from '../testing/mock-service.js';
import { createTestTlsIdentity } from '../testing/tls.js';
import type { ExpectedData } from '../verifier.js';
import { SnpVerifier } from './index.js';
import { parseSnpReport, SNP_REPORT_SIZE, type TcbVersion } from './report.js';
import { sevJsonFromReport } from './serde.js';
import { createTestAmdRoots, issueTestVek, signSnpReport } from './test-roots.js';
import {
  clearKdsCache,
  DEFAULT_OFFLINE_STORE_PATH,
  fetchVcek,
  hardwareIdHex,
  kdsVcekUrl,
  offlineStoreFiles,
  type SnpVerifierOptions,
  tcbFilePrefix,
  type VcekSource,
} from './vcek-source.js';

const verifier = new SnpVerifier();
const roots = createTestAmdRoots();
const trustedArks = [roots.bundlePem];
const tcb: TcbVersion = { bootloader: 10, tee: 0, snp: 23, microcode: 25 };
const chipId = createHash('sha512').update('offline chip').digest();
const vcek = issueTestVek(roots, { tcb, hwid: chipId });
const reportData = createHash('sha384').update('runtime').digest();

/** A Genoa (v3) report; `turin` writes Turin's CPUID and TCB layout instead. */
function report(o: { keyInfo?: number; chip?: Buffer; turin?: boolean } = {}): Buffer {
  const b = Buffer.alloc(SNP_REPORT_SIZE);
  b.writeUInt32LE(3, 0);
  b.writeBigUInt64LE(0x30000n, 0x08);
  b.writeUInt32LE(1, 0x34);
  b.writeUInt32LE(o.keyInfo ?? 0, 0x48);
  reportData.copy(b, 0x50);
  if (o.turin) {
    Buffer.from([4, tcb.bootloader, tcb.tee, tcb.snp, 0, 0, 0, tcb.microcode]).copy(b, 0x180);
    b[0x188] = 0x1a;
    b[0x189] = 0x02;
  } else {
    Buffer.from([tcb.bootloader, tcb.tee, 0, 0, 0, 0, tcb.snp, tcb.microcode]).copy(b, 0x180);
    b[0x188] = 0x19;
    b[0x189] = 0xa0;
  }
  (o.chip ?? chipId).copy(b, 0x1a0);
  return b;
}

const signed = signSnpReport(report(), vcek.privateKey);
const tableless = { attestation_report: sevJsonFromReport(parseSnpReport(signed)), cert_chain: null };

async function failure(ev: unknown, expected: Partial<ExpectedData>): Promise<VerificationError> {
  try {
    await verifier.evaluate(ev, { reportData, trustedArks, ...expected });
  } catch (e) {
    if (e instanceof VerificationError) return e;
    throw e;
  }
  throw new Error('verification succeeded');
}

const codeOf = async (ev: unknown, expected: Partial<ExpectedData>): Promise<VerificationErrorCode> =>
  (await failure(ev, expected)).code;

describe('offline store layout (trustee OfflineStore)', () => {
  it('names files by TCB as trustee does', () => {
    expect(tcbFilePrefix({ bootloader: 2, tee: 0, snp: 6, microcode: 21 })).toBe('bl02_tee00_snp06_ucode21');
    expect(tcbFilePrefix({ bootloader: 3, tee: 1, snp: 8, microcode: 15, fmc: 5 })).toBe(
      'bl03_tee01_snp08_ucode15_fmc05',
    );
    expect(tcbFilePrefix({ bootloader: 3, tee: 1, snp: 8, microcode: 115 })).toBe(
      'bl03_tee01_snp08_ucode115',
    );
  });

  it('looks under <path>/vcek/<hwid>/, the TCB-named file first; Turin uses an 8-byte hwid', () => {
    const r = parseSnpReport(report());
    expect(offlineStoreFiles(r, 'Genoa', '/store')).toEqual([
      `/store/vcek/${chipId.toString('hex')}/bl10_tee00_snp23_ucode25_vcek.der`,
      `/store/vcek/${chipId.toString('hex')}/vcek.der`,
    ]);
    expect(offlineStoreFiles(r, 'Genoa')[1]).toBe(
      `${DEFAULT_OFFLINE_STORE_PATH}/vcek/${chipId.toString('hex')}/vcek.der`,
    );
    const turin = parseSnpReport(report({ turin: true }));
    expect(hardwareIdHex(turin, 'Turin')).toBe(chipId.subarray(0, 8).toString('hex'));
    expect(offlineStoreFiles(turin, 'Turin', '/s')[0]).toBe(
      `/s/vcek/${chipId.subarray(0, 8).toString('hex')}/bl10_tee00_snp23_ucode25_fmc04_vcek.der`,
    );
  });
});

describe('snp evidence without cert_chain, VCEK from an offline store', () => {
  let dir: string;
  let chipDir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vcek-store-'));
    chipDir = join(dir, 'store', 'vcek', chipId.toString('hex'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    await rm(join(dir, 'store'), { recursive: true, force: true });
    await mkdir(chipDir, { recursive: true });
  });
  const store = (): SnpVerifierOptions => ({
    vcekSources: [{ type: 'OfflineStore', path: join(dir, 'store') }],
  });

  it('verifies with the VCEK named for the TCB', async () => {
    await writeFile(join(chipDir, 'bl10_tee00_snp23_ucode25_vcek.der'), vcek.der);
    const [r] = await verifier.evaluate(tableless, { reportData, trustedArks, snp: store() });
    expect(r!.claims.chip_id).toBe(chipId.toString('hex'));
  });

  it("falls back to the chip's vcek.der", async () => {
    await writeFile(join(chipDir, 'vcek.der'), vcek.der);
    await expect(
      verifier.evaluate(tableless, { reportData, trustedArks, snp: store() }),
    ).resolves.toHaveLength(1);
  });

  it('still requires the VCEK to chain to a trusted ARK', async () => {
    await writeFile(join(chipDir, 'vcek.der'), vcek.der);
    expect(await codeOf(tableless, { trustedArks: [], snp: store() })).toBe('CERT_CHAIN_INVALID');
  });

  it("refuses another chip's VCEK and a VCEK for another TCB found in the store", async () => {
    const otherChip = issueTestVek(roots, { tcb, hwid: createHash('sha512').update('x').digest() });
    await writeFile(join(chipDir, 'vcek.der'), otherChip.der);
    expect(await codeOf(tableless, { snp: store() })).toBe('REPORT_SIGNATURE_INVALID');
    const sameKeyOtherTcb = issueTestVek(roots, {
      tcb: { ...tcb, snp: 22 },
      hwid: chipId,
      keyPair: { publicKey: createPublicKey(vcek.privateKey), privateKey: vcek.privateKey },
    });
    await writeFile(join(chipDir, 'vcek.der'), sameKeyOtherTcb.der);
    expect(await codeOf(tableless, { snp: store() })).toBe('TCB_MISMATCH');
  });

  it('refuses a store file with bad TCB extensions', async () => {
    const broken = issueTestVek(roots, {
      tcb,
      keyPair: { publicKey: createPublicKey(vcek.privateKey), privateKey: vcek.privateKey },
      extensions: [],
    });
    await writeFile(join(chipDir, 'vcek.der'), broken.der);
    expect(await codeOf(tableless, { snp: store() })).toBe('CERT_MALFORMED');
    await writeFile(join(chipDir, 'vcek.der'), Buffer.from('not a certificate'));
    expect(await codeOf(tableless, { snp: store() })).toBe('CERT_MALFORMED');
  });

  it('says which sources had nothing, and tries them in order', async () => {
    const e = await failure(tableless, { snp: store() });
    expect(e.code).toBe('VCEK_UNAVAILABLE');
    expect(e.message).toContain(join(chipDir, 'vcek.der'));
    await writeFile(join(chipDir, 'vcek.der'), vcek.der);
    const sources: VcekSource[] = [
      { type: 'OfflineStore', path: join(dir, 'empty') },
      ...store().vcekSources!,
    ];
    await expect(
      verifier.evaluate(tableless, { reportData, trustedArks, snp: { vcekSources: sources } }),
    ).resolves.toHaveLength(1);
  });

  it('refuses oversized files and folders in the store', async () => {
    await writeFile(join(chipDir, 'vcek.der'), Buffer.alloc(17 * 1024));
    expect((await failure(tableless, { snp: store() })).message).toMatch(/larger than/);
    await rm(join(chipDir, 'vcek.der'));
    await mkdir(join(chipDir, 'vcek.der'));
    expect(await codeOf(tableless, { snp: store() })).toBe('VCEK_UNAVAILABLE');
  });

  it('fetches nothing without configured sources, and never for a VLEK-signed report', async () => {
    expect((await failure(tableless, {})).message).toMatch(/no VCEK source/);
    expect(await codeOf(tableless, { snp: { vcekSources: [] } })).toBe('VCEK_UNAVAILABLE');
    const vlek = issueTestVek(roots, { kind: 'vlek', tcb });
    const vlekSigned = signSnpReport(report({ keyInfo: 1 << 2 }), vlek.privateKey);
    const ev = { attestation_report: sevJsonFromReport(parseSnpReport(vlekSigned)), cert_chain: null };
    await writeFile(join(chipDir, 'vcek.der'), vlek.der);
    expect((await failure(ev, { snp: store() })).message).toMatch(/VLEK/);
  });
});

describe('snp evidence without cert_chain, VCEK from a mock KDS over HTTPS', () => {
  const tls = createTestTlsIdentity();
  const httpGet = createHttpGet({ ca: tls.caPem });
  const content: { current: MockKdsContent } = { current: kdsContent() };
  let kds: MockHttpsService;
  const hwid = chipId.toString('hex');
  const vcekPath = `/vcek/v1/Genoa/${hwid}`;

  function kdsContent(o: { revoked?: string[]; crlKey?: KeyObject; chain?: string } = {}): MockKdsContent {
    return {
      product: 'Genoa',
      vcek: (id, spl) =>
        id === hwid && spl.get('blSPL') === '10' && spl.get('ucodeSPL') === '25' ? vcek.der : undefined,
      certChainPem: o.chain ?? roots.ask.pem + roots.ark.pem,
      crl: signTestAmdCrl(o.crlKey ?? roots.ark.privateKey, o.revoked ?? []),
    };
  }

  beforeAll(async () => {
    kds = await startMockKds(tls, content);
  });
  afterAll(async () => {
    await kds?.close();
  });
  beforeEach(() => {
    clearKdsCache();
    content.current = kdsContent();
    kds.override = undefined;
    kds.resetRequests();
  });
  const snpOptions = (o: Partial<SnpVerifierOptions> = {}): SnpVerifierOptions => ({
    vcekSources: [{ type: 'KDS', baseUrl: `${kds.url}/` }],
    httpGet,
    ...o,
  });

  it('asks KDS for the VCEK by product, hardware ID and TCB, its chain and CRL, and keeps them', async () => {
    const snp = snpOptions();
    await expect(verifier.evaluate(tableless, { reportData, trustedArks, snp })).resolves.toHaveLength(1);
    expect(kds.requests).toEqual([
      `${vcekPath}?blSPL=10&teeSPL=00&snpSPL=23&ucodeSPL=25`,
      '/vcek/v1/Genoa/cert_chain',
      '/vcek/v1/Genoa/crl',
    ]);
    kds.resetRequests();
    await expect(verifier.evaluate(tableless, { reportData, trustedArks, snp })).resolves.toHaveLength(1);
    expect(kds.requests).toEqual([]);
  });

  it('puts the FMC first and an 8-byte hardware ID in Turin URLs', () => {
    const turin = parseSnpReport(report({ turin: true }));
    expect(kdsVcekUrl(turin, 'Turin')).toBe(
      `https://kdsintf.amd.com/vcek/v1/Turin/${chipId.subarray(0, 8).toString('hex')}?fmcSPL=04&blSPL=10&teeSPL=00&snpSPL=23&ucodeSPL=25`,
    );
  });

  it('refuses a VCEK whose ASK the ARK has revoked', async () => {
    content.current = kdsContent({ revoked: [new X509Certificate(roots.ask.der).serialNumber] });
    const e = await failure(tableless, { snp: snpOptions() });
    expect(e.code).toBe('CERT_REVOKED');
    expect(e.message).toBe(`the ASK that issued the VCEK is revoked (KDS CRL ${kds.url}/vcek/v1/Genoa/crl)`);
  });

  it("fails closed on a chain or CRL that is not the trusted ARK's, a 500 and a hang, naming the URL", async () => {
    const other = createTestAmdRoots();
    content.current = kdsContent({ chain: other.ask.pem + other.ark.pem });
    let e = await failure(tableless, { snp: snpOptions() });
    expect(e.code).toBe('CERT_CHAIN_INVALID');
    expect(e.message).toContain(`${kds.url}/vcek/v1/Genoa/cert_chain`);
    clearKdsCache();
    content.current = kdsContent({ crlKey: other.ark.privateKey });
    e = await failure(tableless, { snp: snpOptions() });
    expect(e.code).toBe('COLLATERAL_INVALID');
    expect(e.message).toBe(`KDS CRL from ${kds.url}/vcek/v1/Genoa/crl is not signed by its issuer`);
    clearKdsCache();
    content.current = kdsContent();
    kds.override = (url, answer) => (url.pathname.endsWith('/crl') ? { status: 500, body: '' } : answer);
    e = await failure(tableless, { snp: snpOptions() });
    expect(e.code).toBe('COLLATERAL_UNAVAILABLE');
    expect(e.message).toBe(`KDS CRL: GET ${kds.url}/vcek/v1/Genoa/crl answered HTTP 500`);
    clearKdsCache();
    kds.override = (url, answer) => (url.pathname.endsWith('/cert_chain') ? 'hang' : answer);
    e = await failure(tableless, { snp: snpOptions({ kdsTimeoutMs: 300 }) });
    expect(e.code).toBe('COLLATERAL_UNAVAILABLE');
    expect(e.message).toContain('no complete answer within 300 ms');
  });

  it('moves on to the next source when KDS has no VCEK, and reports every failure', async () => {
    kds.override = (url, answer) => (url.pathname === vcekPath ? { status: 404, body: 'nope' } : answer);
    let e = await failure(tableless, { snp: snpOptions() });
    expect(e.code).toBe('VCEK_UNAVAILABLE');
    expect(e.message).toMatch(/HTTP 404/);
    kds.override = (url, answer) =>
      url.pathname === vcekPath ? { status: 200, body: new Uint8Array(20_000) } : answer;
    e = await failure(tableless, { snp: snpOptions() });
    expect(e.message).toMatch(/larger than/);
    kds.override = undefined;
    const sources: VcekSource[] = [
      { type: 'KDS', baseUrl: 'https://127.0.0.1:1' },
      { type: 'KDS', baseUrl: kds.url },
    ];
    await expect(
      verifier.evaluate(tableless, { reportData, trustedArks, snp: snpOptions({ vcekSources: sources }) }),
    ).resolves.toHaveLength(1);
  });

  it('keeps a KDS VCEK only once it verified a report', async () => {
    const otherChip = issueTestVek(roots, { tcb, hwid: createHash('sha512').update('other').digest() });
    content.current = { ...kdsContent(), vcek: () => otherChip.der };
    expect(await codeOf(tableless, { snp: snpOptions() })).toBe('REPORT_SIGNATURE_INVALID');
    content.current = kdsContent();
    kds.resetRequests();
    await expect(
      verifier.evaluate(tableless, { reportData, trustedArks, snp: snpOptions() }),
    ).resolves.toHaveLength(1);
    expect(kds.requests).toEqual([`${vcekPath}?blSPL=10&teeSPL=00&snpSPL=23&ucodeSPL=25`]);
  });

  it('does not ask KDS for a report with a masked chip ID', async () => {
    const masked = parseSnpReport(report({ chip: Buffer.alloc(64) }));
    await expect(fetchVcek(masked, 'Genoa', snpOptions())).rejects.toThrow(/masks its chip ID/);
    expect(kds.requests).toEqual([]);
  });
});
