// The tdx attester on a kernel without configfs-tsm: the real broker-tdx-report shim (linked
// dynamically for the test) asks /dev/tdx_guest for the TD report through the mock TEE's
// LD_PRELOAD guest kernel and has it quoted by a QGS on loopback TCP (vsock's stand-in), or
// through the legacy GetQuote ioctl. The quotes come from the same mock TDX device whose
// configfs-tsm root serves the other path: the evidence must be the same bytes and verify, and
// every failure gives a clear error and no evidence.
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ERRNO,
  encodeQgsQuoteResponse,
  GUEST_IOCTLS,
  type MockGuestKernel,
  type MockTdxDevice,
  QGS_MSG,
  QgsServer,
  startMockGuestKernel,
  startMockTdxDevice,
} from '@broker/mock-tee';
import { TdxVerifier } from '@broker/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IOCTL_SHIMS, type IoctlShimError, SHIM_EXIT, shimRequest } from '../ioctl-shim.js';
import { buildShims, runShimRaw } from '../testing/shims.js';
import { TdxAttester } from './index.js';

const INITDATA = createHash('sha256').update('[data]\n').digest();
let dir: string;
let shimDir: string;
let device: MockTdxDevice;
/** An upstream kernel: TDX_CMD_GET_REPORT0 only. */
let kernel: MockGuestKernel;
/** Intel's backport kernel: also TDX_CMD_GET_QUOTE. */
let legacy: MockGuestKernel;
let qgs: QgsServer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tdx-ioctl-'));
  shimDir = buildShims(join(dir, 'shims'));
  device = await startMockTdxDevice({
    stateDir: join(dir, 'device'),
    initDataDigest: INITDATA,
    stableQuotes: true,
  });
  kernel = await startMockGuestKernel({ stateDir: join(dir, 'kernel'), tdx: device });
  legacy = await startMockGuestKernel({ stateDir: join(dir, 'legacy'), tdx: device, tdxGetQuote: true });
  qgs = await QgsServer.start({ quote: (r) => device.quoteTdReport(r) });
});

afterAll(async () => {
  await Promise.all([kernel?.close(), legacy?.close(), qgs?.close()]);
  device?.close();
  await rm(dir, { recursive: true, force: true });
});

const lines: string[] = [];
const logger = { debug: () => undefined, info: (m: string) => lines.push(m), warn: () => undefined };
const noAael = () => join(dir, 'no-aael');
function viaIoctl(extra: Record<string, string> = {}, k: MockGuestKernel = kernel): TdxAttester {
  const env = {
    ...device.env,
    BROKER_TSM_REPORT_ROOT: join(dir, 'no-tsm'),
    AAEL_PATH: noAael(),
    BROKER_TDX_QGS: qgs.address,
    ...k.env,
    ...extra,
  };
  return new TdxAttester({ env, shimDir, logger });
}
const viaTsm = () => new TdxAttester({ env: { ...device.env, AAEL_PATH: noAael() } });

async function shimFailure(p: Promise<unknown>): Promise<IoctlShimError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err === undefined) throw new Error('expected a failure, got evidence');
  return ((err as Error).cause ?? err) as IoctlShimError;
}

describe('tdx evidence through /dev/tdx_guest', () => {
  it('is byte for byte the configfs-tsm evidence over the QGS, and verifies', async () => {
    const reportData = createHash('sha384').update('runtime data').digest();
    const before = qgs.requests;
    const ioctl = await viaIoctl().getEvidence(reportData);
    const tsm = await viaTsm().getEvidence(reportData);
    expect(JSON.stringify(ioctl)).toBe(JSON.stringify(tsm));
    expect(qgs.requests).toBe(before + 1);
    const [r] = await new TdxVerifier().evaluate(ioctl, {
      reportData,
      initDataHash: INITDATA,
      tdx: device.verifierOptions,
    });
    expect(r!.claims.tcb_status).toBe('UpToDate');
  });

  it('uses the legacy GetQuote ioctl when no QGS port is configured', async () => {
    const reportData = Buffer.alloc(64, 9);
    const before = qgs.requests;
    const ev = await viaIoctl({ BROKER_TDX_QGS: '' }, legacy).getEvidence(reportData);
    expect(qgs.requests).toBe(before);
    expect(legacy.calls.at(-1)!.command).toBe(GUEST_IOCTLS.TDX_CMD_GET_QUOTE);
    expect(JSON.stringify(ev)).toBe(JSON.stringify(await viaTsm().getEvidence(reportData)));
  });

  it('says in one log line which path it uses', async () => {
    lines.length = 0;
    const a = viaIoctl();
    await a.getEvidence(Buffer.alloc(8, 1));
    await a.getEvidence(Buffer.alloc(8, 2));
    expect(lines).toEqual([
      expect.stringMatching(/quotes from \/dev\/tdx_guest .*QGS at tcp:127\.0\.0\.1:\d+.*broker-tdx-report/),
    ]);
    expect(await viaTsm().source()).toBe('configfs-tsm');
  });

  it('reads MRCONFIGID and the RTMRs from the TD report, as upstream, and fails closed on a mismatch', async () => {
    const a = viaIoctl({ BROKER_TDX_MEASUREMENTS: join(dir, 'absent') });
    await a.bindInitData(INITDATA);
    expect(kernel.calls.at(-1)!.command).toBe(GUEST_IOCTLS.TDX_CMD_GET_REPORT0);
    await expect(a.bindInitData(Buffer.alloc(32, 1))).rejects.toThrow('Init data does not match!');
    for (const pcr of [1, 2, 8, 17]) {
      expect(Buffer.from(await a.getRuntimeMeasurement(pcr))).toEqual(
        Buffer.from(await viaTsm().getRuntimeMeasurement(pcr)),
      );
    }
  });
});

describe('tdx ioctl failures: a clear error and no evidence', () => {
  const framed = (m: Buffer) => {
    const prefix = Buffer.alloc(4);
    prefix.writeUInt32BE(m.length);
    return Buffer.concat([prefix, m]);
  };
  const cases: [string, () => void, string, RegExp][] = [
    [
      'TDX_CMD_GET_REPORT0 failing with EIO',
      () => kernel.once(() => ({ errno: ERRNO.EIO, exitinfo2: 0n })),
      'ioctl',
      /TDX_CMD_GET_REPORT0 failed: Input\/output error/,
    ],
    [
      'a TD report of another type',
      () => kernel.once((_r, a) => ({ ...a, response: Buffer.alloc(1024) })),
      'malformed',
      /type is 0x00, not 0x81/,
    ],
    [
      'the QGS refusing',
      () => qgs.once(() => framed(encodeQgsQuoteResponse({ errorCode: QGS_MSG.errors.unexpected }))),
      'host',
      /refused the request: error 0x12001/,
    ],
    [
      'QGS sizes that do not add up',
      () =>
        qgs.once((_q, a) => {
          const m = Buffer.from(a.subarray(4));
          m.writeUInt32LE(m.readUInt32LE(20) + 1, 20);
          return framed(m);
        }),
      'malformed',
      /sizes do not add up/,
    ],
    [
      'a QGS answer of another type',
      () =>
        qgs.once((_q, a) => {
          const m = Buffer.from(a.subarray(4));
          m.writeUInt32LE(3, 4);
          return framed(m);
        }),
      'malformed',
      /message type 3/,
    ],
    [
      'a QGS answer longer than the buffer',
      () => qgs.once(() => Buffer.from([0, 1, 0, 0])),
      'malformed',
      /announced 65536 bytes/,
    ],
    [
      'a QGS answer cut short',
      () => qgs.once((_q, a) => ({ thenHangUp: a.subarray(0, 100) })),
      'transport',
      /hung up after 96 of \d+ bytes/,
    ],
    ['the QGS hanging up', () => qgs.once(() => 'hang-up'), 'transport', /hung up after 0 of 4 bytes/],
    [
      'an empty quote reported as success',
      () => qgs.once(() => framed(encodeQgsQuoteResponse({ quote: Buffer.alloc(0) }))),
      'malformed',
      /empty quote/,
    ],
  ];

  it.each(cases)('%s', async (_name, arrange, cls, message) => {
    arrange();
    const err = await shimFailure(viaIoctl().getEvidence(Buffer.alloc(64, 5)));
    expect(err.failure).toBe(cls);
    expect(err.message).toMatch(message);
  });

  const legacyCases: [string, (buf: Buffer) => Buffer | 'errno', string, RegExp][] = [
    [
      'GetQuote in flight',
      (b) => {
        b.writeBigUInt64LE(0xffffffffffffffffn, 8);
        return b;
      },
      'host',
      /in flight/,
    ],
    [
      'the host quote service unavailable',
      (b) => {
        b.writeBigUInt64LE(0x8000000000000001n, 8);
        return b;
      },
      'host',
      /unavailable/,
    ],
    [
      'an out_len beyond the buffer',
      (b) => {
        b.writeUInt32LE(1 << 20, 20);
        return b;
      },
      'malformed',
      /does not fit the buffer/,
    ],
    [
      'a length prefix that disagrees with out_len',
      (b) => {
        b.writeUInt32BE(b.readUInt32BE(24) - 1, 24);
        return b;
      },
      'malformed',
      /disagrees with out_len/,
    ],
    [
      'GetQuote failing with EBUSY',
      () => 'errno',
      'ioctl',
      /TDX_CMD_GET_QUOTE failed: Device or resource busy/,
    ],
  ];

  it.each(legacyCases)('%s (legacy GetQuote)', async (_name, mutate, cls, message) => {
    // GET_REPORT0 first, unchanged; then the GetQuote answer.
    legacy.once((_r, a) => a);
    legacy.once((_r, a) => {
      const out = mutate(Buffer.from(a.response!));
      return out === 'errno' ? { errno: ERRNO.EBUSY, exitinfo2: 0n } : { ...a, response: out };
    });
    const err = await shimFailure(viaIoctl({ BROKER_TDX_QGS: '' }, legacy).getEvidence(Buffer.alloc(64, 6)));
    expect(err.failure).toBe(cls);
    expect(err.message).toMatch(message);
  });

  it('has no quote path on an upstream kernel without a QGS port', async () => {
    const err = await shimFailure(viaIoctl({ BROKER_TDX_QGS: '' }).getEvidence(Buffer.alloc(64)));
    expect(err.failure).toBe('unsupported');
    expect(err.message).toMatch(/no quote path/);
  });

  it('reports an unreachable QGS and a missing device node', async () => {
    const closed = await QgsServer.start({ quote: () => Buffer.alloc(0) });
    const address = closed.address;
    await closed.close();
    const unreachable = await shimFailure(
      viaIoctl({ BROKER_TDX_QGS: address }).getEvidence(Buffer.alloc(64)),
    );
    expect([unreachable.failure, unreachable.message]).toEqual([
      'transport',
      expect.stringMatching(/cannot connect/),
    ]);
    const a = new TdxAttester({
      env: { BROKER_TSM_REPORT_ROOT: join(dir, 'no-tsm'), AAEL_PATH: noAael() },
      shimDir,
    });
    const absent = await shimFailure(a.getEvidence(Buffer.alloc(64)));
    expect([absent.failure, absent.message]).toEqual([
      'no-device',
      expect.stringMatching(/cannot open \/dev\/tdx_guest/),
    ]);
  });
});

describe('the tdx shim on its own', () => {
  const shim = () => join(shimDir, IOCTL_SHIMS.tdx);

  it("reads the vsock port from tdx-attest.conf as Intel's library does", async () => {
    const conf = join(dir, 'tdx-attest.conf');
    await writeFile(conf, '# the QGS on the host\n  port = 4050  \n');
    const r = await runShimRaw(shim(), shimRequest(2, 0, Buffer.alloc(64)), kernel.env, ['--config', conf]);
    // vsock needs a hypervisor: the attempt itself shows the port was taken.
    expect(r.status).toBe(SHIM_EXIT.transport);
    expect(r.stdout).toHaveLength(0);
    // A comment stays a comment however long (a fixed-size line reader would see " port = 4050").
    await writeFile(conf, `#port = 4050\nport = 40x50\n#${'x'.repeat(254)} port = 4050\n`);
    const none = await runShimRaw(shim(), shimRequest(2, 0, Buffer.alloc(64)), kernel.env, [
      '--config',
      conf,
    ]);
    expect([none.status, none.stderr]).toEqual([
      SHIM_EXIT.unsupported,
      expect.stringMatching(/no quote path/),
    ]);
  });

  it('refuses bad requests and addresses', async () => {
    const run = (input: Buffer, args: string[] = []) => runShimRaw(shim(), input, kernel.env, args);
    expect((await run(shimRequest(3, 0, Buffer.alloc(64)))).status).toBe(SHIM_EXIT.usage);
    expect((await run(shimRequest(2, 1, Buffer.alloc(64)))).status).toBe(SHIM_EXIT.usage);
    expect((await run(Buffer.alloc(67, 1))).status).toBe(SHIM_EXIT.usage);
    for (const bad of [
      'tcp:localhost:1',
      'tcp:127.0.0.1:0',
      'vsock:2',
      'udp:1.2.3.4:5',
      'tcp:127.0.0.1:70000',
    ]) {
      const r = await run(shimRequest(2, 0, Buffer.alloc(64)), ['--qgs', bad]);
      expect([bad, r.status]).toEqual([bad, SHIM_EXIT.usage]);
    }
    expect((await run(shimRequest(1, 0, Buffer.alloc(64)), ['--bogus'])).status).toBe(SHIM_EXIT.usage);
  });
});
