// The tdx attester against the mock TDX device (configfs-tsm, CCEL, measurements folder), and
// its evidence through the tdx verifier configured with the device's test root and collateral.
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type MockTdxDevice, startMockSnpDevice, startMockTdxDevice } from '@broker/mock-tee';
import { parseCcEventLog, parseTdxQuote, TdxVerifier, type VerificationError } from '@broker/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttesterError, EvidenceCollectionFailed } from '../attester.js';
import { platformContext } from '../platform.js';
import { EVENTLOG_HEADER, rtmrOfPcr, TdxAttester, tdxModule, trimCcel } from './index.js';

const INITDATA = createHash('sha256').update('[data]\n').digest();
let stateDir: string;
let device: MockTdxDevice;

function attester(extra: Record<string, string> = {}): TdxAttester {
  return new TdxAttester({ env: { ...device.env, AAEL_PATH: join(stateDir, 'no-aael'), ...extra } });
}

function aaelEntry(text: string): Buffer {
  const tagged = Buffer.concat([Buffer.alloc(8), Buffer.from(text)]);
  tagged.writeUInt32LE(0x4141454c, 0);
  tagged.writeUInt32LE(text.length, 4);
  const head = Buffer.alloc(14);
  head.writeUInt32LE(4, 0); // CC measurement register 4: RTMR3
  head.writeUInt32LE(6, 4); // EV_EVENT_TAG
  head.writeUInt32LE(1, 8);
  head.writeUInt16LE(0x0c, 12);
  const size = Buffer.alloc(4);
  size.writeUInt32LE(tagged.length);
  return Buffer.concat([head, createHash('sha384').update(tagged).digest(), size, tagged]);
}

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'tdx-attester-'));
  device = await startMockTdxDevice({ stateDir: join(stateDir, 'device'), initDataDigest: INITDATA });
});
afterAll(async () => {
  device.close();
  await rm(stateDir, { recursive: true, force: true });
});

describe('tdx attester on the mock device', () => {
  it('collects evidence that the tdx verifier accepts', async () => {
    const reportData = createHash('sha384').update('runtime data').digest();
    const evidence = await attester().getEvidence(reportData);
    expect(Object.keys(evidence)).toEqual(['cc_eventlog', 'quote']);
    const quote = parseTdxQuote(Buffer.from(evidence.quote, 'base64'));
    expect(quote.body.reportData.equals(Buffer.concat([reportData, Buffer.alloc(16)]))).toBe(true);
    // The CCEL is cut after its last event and closed with the end flag.
    const log = Buffer.from(evidence.cc_eventlog!, 'base64');
    expect(log.subarray(-8).equals(Buffer.alloc(8, 0xff))).toBe(true);
    expect(parseCcEventLog(log).entries).toHaveLength(device.bootEvents.length);
    const [r] = await new TdxVerifier().evaluate(evidence, {
      reportData,
      initDataHash: INITDATA,
      tdx: device.verifierOptions,
    });
    expect(r!.claims.tcb_status).toBe('UpToDate');
  });

  it('refuses more than 64 bytes of report data', async () => {
    await expect(attester().getEvidence(new Uint8Array(65))).rejects.toThrow(EvidenceCollectionFailed);
  });

  it('binds init-data to MRCONFIGID and fails closed on a mismatch, with or without the measurements folder', async () => {
    await attester().bindInitData(INITDATA);
    await expect(attester().bindInitData(createHash('sha256').update('other').digest())).rejects.toThrow(
      'Init data does not match!',
    );
    const viaQuote = attester({ BROKER_TDX_MEASUREMENTS: join(stateDir, 'absent') });
    expect(viaQuote.extendRuntimeMeasurement).toBeUndefined();
    await viaQuote.bindInitData(INITDATA);
    await expect(viaQuote.bindInitData(Buffer.alloc(32, 1))).rejects.toBeInstanceOf(AttesterError);
  });

  it('extends RTMR3 for AAEL events, and the verifier replays the log the agent kept', async () => {
    const a = attester();
    expect(typeof a.extendRuntimeMeasurement).toBe('function');
    const text = 'github.com/confidential-containers PullImage {"image":"busybox", "digest":"sha256:00"}';
    const entry = aaelEntry(text);
    const digest = entry.subarray(14, 62);
    const before = Buffer.from(await a.getRuntimeMeasurement(17));
    await a.extendRuntimeMeasurement!(digest, 17);
    const after = Buffer.from(await a.getRuntimeMeasurement(17));
    expect(after.equals(createHash('sha384').update(before).update(digest).digest())).toBe(true);
    // Reading through a quote gives the same register.
    expect(
      Buffer.from(
        await attester({ BROKER_TDX_MEASUREMENTS: join(stateDir, 'absent') }).getRuntimeMeasurement(17),
      ).equals(after),
    ).toBe(true);
    const aael = join(stateDir, 'aael');
    await writeFile(aael, entry);
    const reportData = Buffer.alloc(48, 7);
    const evidence = await attester({ AAEL_PATH: aael }).getEvidence(reportData);
    const [r] = await new TdxVerifier().evaluate(evidence, { reportData, tdx: device.verifierOptions });
    const logs = r!.claims.uefi_event_logs as {
      type_name: string;
      details: { data?: { operation: string } };
    }[];
    expect(logs.at(-1)!.details.data!.operation).toBe('PullImage');
    // An AAEL the RTMR never saw fails the replay.
    await writeFile(aael, Buffer.concat([entry, entry]));
    const replayed = await attester({ AAEL_PATH: aael }).getEvidence(reportData);
    const err = await new TdxVerifier()
      .evaluate(replayed, { reportData, tdx: device.verifierOptions })
      .catch((e: unknown) => e);
    expect((err as VerificationError).code).toBe('EVENT_LOG_MISMATCH');
  });

  it('sends a header and the AAEL when there is no CCEL, and null when there is neither', async () => {
    const aael = join(stateDir, 'aael-only');
    await writeFile(aael, aaelEntry('a b c'));
    const none = join(stateDir, 'none');
    const ev = await attester({ BROKER_TDX_CCEL: none, AAEL_PATH: aael }).getEvidence(new Uint8Array(0));
    const log = Buffer.from(ev.cc_eventlog!, 'base64');
    expect(log.subarray(0, 69).equals(EVENTLOG_HEADER)).toBe(true);
    expect(parseCcEventLog(log).entries.map((e) => e.type_name)).toEqual(['EV_EVENT_TAG']);
    const bare = await attester({ BROKER_TDX_CCEL: none }).getEvidence(new Uint8Array(0));
    expect(bare.cc_eventlog).toBeNull();
  });
});

describe('tdx detection', () => {
  it('detects the tdx_guest provider, and the device node', async () => {
    expect(
      (await tdxModule.detect(platformContext({ env: { BROKER_TSM_REPORT_ROOT: device.tsmRoot } }))).detected,
    ).toBe(true);
    expect(
      (
        await tdxModule.detect(
          platformContext({
            env: {
              BROKER_TSM_REPORT_ROOT: join(stateDir, 'nothing'),
              BROKER_TDX_GUEST_DEVICE: device.devicePath,
            },
          }),
        )
      ).detected,
    ).toBe(true);
    const root = join(stateDir, 'fakeroot');
    await mkdir(join(root, 'dev'), { recursive: true });
    expect(
      (
        await tdxModule.detect(
          platformContext({ root, env: { BROKER_TSM_REPORT_ROOT: join(stateDir, 'nothing') } }),
        )
      ).detected,
    ).toBe(false);
    await writeFile(join(root, 'dev', 'tdx_guest'), '');
    expect(
      (
        await tdxModule.detect(
          platformContext({ root, env: { BROKER_TSM_REPORT_ROOT: join(stateDir, 'nothing') } }),
        )
      ).detected,
    ).toBe(true);
  });

  it('does not take an SNP configfs-tsm for TDX', async () => {
    const snp = await startMockSnpDevice({ stateDir: join(stateDir, 'snp'), rootKeyBits: 2048 });
    try {
      const d = await tdxModule.detect(platformContext({ env: { BROKER_TSM_REPORT_ROOT: snp.tsmRoot } }));
      expect(d).toMatchObject({ detected: false, reason: 'configfs-tsm provider is sev_guest' });
      // Not a TDX report root: the ioctl path is next (here without a shim), as upstream falls back.
      const a = new TdxAttester({
        env: { BROKER_TSM_REPORT_ROOT: snp.tsmRoot },
        shimDir: join(stateDir, 'no-shims'),
      });
      await expect(a.source()).resolves.toBe('ioctl');
      await expect(a.getEvidence(new Uint8Array(0))).rejects.toThrow(
        /ioctl\(\) fallback failed: .*broker-tdx-report is missing/,
      );
      expect(snp.requests).toBe(0);
    } finally {
      snp.close();
    }
  });
});

describe('event log helpers', () => {
  it("has upstream's 69-byte header", () => {
    expect(EVENTLOG_HEADER.toString('hex')).toBe(
      `${'00'.repeat(4)}03000000${'00'.repeat(20)}25000000${'00'.repeat(24)}020000000c0030001200200000`,
    );
  });

  it('cuts a CCEL at its end flag and refuses truncated ones', () => {
    const table = Buffer.concat([EVENTLOG_HEADER, aaelEntry('x y z'), Buffer.alloc(100, 0xff)]);
    expect(trimCcel(table).length).toBe(table.length - 100);
    expect(() => trimCcel(Buffer.alloc(3))).toThrow(/not enough length/);
    expect(() => trimCcel(table.subarray(0, table.length - 100 + 4))).toThrow(/no end flag/);
    const badAlg = Buffer.from(table);
    badAlg.writeUInt16LE(0x99, 69 + 12);
    expect(() => trimCcel(badAlg)).toThrow(/unsupported digest algorithm/);
  });

  it('maps PCRs to RTMRs as upstream', () => {
    expect([1, 7, 2, 6, 8, 15, 16, 17, 0].map(rtmrOfPcr)).toEqual([0, 0, 1, 1, 2, 2, 3, 3, 3]);
  });
});
