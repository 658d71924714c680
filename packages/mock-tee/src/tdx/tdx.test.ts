import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  encodeTdReport,
  parseCcEventLog,
  parseTdxQuote,
  replayRegister,
  TdxVerifier,
  type VerificationError,
} from '@broker/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MockTeeError } from '../errors.js';
import {
  loadOrCreateTdxHardware,
  type MockTdxDevice,
  startMockTdxDevice,
  TDX_STATE_FILES,
  TdQuoteServer,
} from './index.js';

let stateDir: string;
let device: MockTdxDevice;
const INITDATA = createHash('sha256').update('initdata').digest();

/** What the kernel's configfs-tsm does for one request, done by hand on the mock's folder tree. */
async function requestQuote(root: string, inblob: Buffer): Promise<Buffer> {
  const dir = join(root, `.tmp${Math.random().toString(16).slice(2)}`);
  await mkdir(dir);
  try {
    for (let i = 0; ; i++) {
      try {
        expect(await readFile(join(dir, 'provider'), 'utf8')).toBe('tdx_guest\n');
        break;
      } catch (e) {
        if (i > 500 || (e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    await writeFile(join(dir, 'inblob'), inblob);
    for (let i = 0; ; i++) {
      try {
        return await readFile(join(dir, 'outblob'));
      } catch (e) {
        if (i > 500 || (e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
        await new Promise((r) => setTimeout(r, 5));
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'mock-tdx-'));
  device = await startMockTdxDevice({ stateDir, initDataDigest: INITDATA });
});
afterAll(async () => {
  device.close();
  await rm(stateDir, { recursive: true, force: true });
});

describe('mock TDX device', () => {
  it('answers configfs-tsm requests with quotes the tdx verifier accepts with its test root', async () => {
    const reportData = createHash('sha512').update('nonce').digest();
    const quote = await requestQuote(device.tsmRoot, reportData);
    expect(device.requests).toBe(1);
    const q = parseTdxQuote(quote);
    expect(q.body.reportData.equals(reportData)).toBe(true);
    expect(q.body.mrConfigId.equals(Buffer.concat([INITDATA, Buffer.alloc(16)]))).toBe(true);
    const ccel = await readFile(device.ccelPath);
    const [r] = await new TdxVerifier().evaluate(
      { cc_eventlog: ccel.toString('base64'), quote: quote.toString('base64') },
      { reportData, initDataHash: INITDATA, tdx: device.verifierOptions },
    );
    expect(r!.claims.tcb_status).toBe('UpToDate');
    // The device's CRLs are consulted (and revoke nothing).
    expect(r!.claims.pck_crl_num).toBe(1);
    expect((r!.claims.uefi_event_logs as unknown[]).length).toBe(device.bootEvents.length);
    // Without the test root, the same quote is not trusted.
    const err = await new TdxVerifier()
      .evaluate(
        { quote: quote.toString('base64') },
        { reportData, tdx: { collateral: device.verifierOptions.collateral } },
      )
      .catch((e: unknown) => e);
    expect((err as VerificationError).code).toBe('CERT_CHAIN_INVALID');
  });

  it('writes a CCEL whose log replays to the RTMRs it reports', async () => {
    const log = parseCcEventLog(await readFile(device.ccelPath));
    for (let i = 0; i < 3; i++) expect(replayRegister(log, i + 1).equals(device.td.rtmrs[i]!)).toBe(true);
  });

  it('serves MRCONFIGID and extends RTMRs through the measurements folder', async () => {
    expect((await readFile(join(device.measurementsPath, 'mrconfigid'))).equals(device.td.mrConfigId)).toBe(
      true,
    );
    const before = Buffer.from(device.td.rtmrs[3]);
    const digest = createHash('sha384').update('event').digest();
    await writeFile(join(device.measurementsPath, 'rtmr3:sha384'), digest);
    // A quote made after the write sees the extend.
    const quote = await requestQuote(device.tsmRoot, Buffer.alloc(64));
    const expected = createHash('sha384').update(before).update(digest).digest();
    expect(parseTdxQuote(quote).body.rtmrs[3].equals(expected)).toBe(true);
    expect((await readFile(join(device.measurementsPath, 'rtmr3:sha384'))).equals(expected)).toBe(true);
  });

  it('refuses an inblob that is not 64 bytes, as the kernel does', async () => {
    const errors: unknown[] = [];
    const dir = await mkdtemp(join(tmpdir(), 'mock-tdx-bad-'));
    const d = await startMockTdxDevice({ stateDir: dir, onError: (e) => errors.push(e) });
    try {
      const t = join(d.tsmRoot, 'x');
      await mkdir(t);
      for (let i = 0; i < 500; i++) {
        if ((await readFile(join(t, 'provider'), 'utf8').catch(() => '')) !== '') break;
        await new Promise((r) => setTimeout(r, 5));
      }
      await writeFile(join(t, 'inblob'), Buffer.alloc(10));
      for (let i = 0; i < 500 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(errors[0]).toBeInstanceOf(MockTeeError);
      expect(d.requests).toBe(0);
    } finally {
      d.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps its hardware root across restarts and writes the collateral files', async () => {
    const again = await loadOrCreateTdxHardware(join(stateDir, TDX_STATE_FILES.hardware));
    expect(again.rootPem).toBe(device.hardware.rootPem);
    expect(again.qe.attestationPublic.equals(device.hardware.qe.attestationPublic)).toBe(true);
    expect(await readFile(join(stateDir, TDX_STATE_FILES.tcbInfo), 'utf8')).toBe(device.collateral.tcbInfo);
    expect(await readFile(join(stateDir, TDX_STATE_FILES.sgxRoot), 'utf8')).toBe(device.hardware.rootPem);
  });

  it('refuses conflicting MRCONFIGID options', async () => {
    await expect(
      startMockTdxDevice({ stateDir, initDataDigest: INITDATA, mrConfigId: Buffer.alloc(48) }),
    ).rejects.toMatchObject({ code: 'USAGE' });
  });
});

describe('mock TD quote service', () => {
  it('turns a TD report into a quote, and refuses anything else', async () => {
    const server = new TdQuoteServer({ hardware: device.hardware });
    await server.listen();
    try {
      const report = encodeTdReport({ reportData: Buffer.alloc(64, 3), mrTd: Buffer.alloc(48, 1) });
      const post = (body: string) =>
        fetch(`${server.url}/acc/tdquote`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
      const res = await post(JSON.stringify({ report: report.toString('base64url') }));
      expect(res.status).toBe(200);
      const { quote } = (await res.json()) as { quote: string };
      const q = parseTdxQuote(Buffer.from(quote, 'base64url'));
      expect(q.body.reportData.equals(Buffer.alloc(64, 3))).toBe(true);
      expect(q.body.mrTd.equals(Buffer.alloc(48, 1))).toBe(true);
      expect(server.quotes).toBe(1);
      expect((await post('{"report":"AAAA"}')).status).toBe(400);
      expect((await post('nope')).status).toBe(400);
      expect((await fetch(`${server.url}/acc/tdquote`)).status).toBe(405);
      expect((await fetch(`${server.url}/other`)).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});
