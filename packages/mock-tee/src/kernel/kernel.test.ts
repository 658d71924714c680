// The simulated guest kernel's server, spoken to directly over its socket (the preload library's
// side of the wire), and the QGS message handling: the kernel ABI's answers and refusals.

import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeTdReport, parseTdReport } from '@broker/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MockSnpDevice, startMockSnpDevice } from '../snp/index.js';
import { type MockTdxDevice, startMockTdxDevice } from '../tdx/index.js';
import { answerQgsMessage, QGS_MSG } from '../tdx/qgs.js';
import {
  ERRNO,
  GUEST_IOCTLS,
  type MockGuestKernel,
  SNP_VMM_ERR_INVALID_LEN,
  startMockGuestKernel,
} from './index.js';

let dir: string;
let snp: MockSnpDevice;
let tdx: MockTdxDevice;
let kernel: MockGuestKernel;
let snpOnly: MockGuestKernel;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'guest-kernel-'));
  snp = await startMockSnpDevice({ stateDir: join(dir, 'snp'), rootKeyBits: 2048, stableReports: true });
  tdx = await startMockTdxDevice({ stateDir: join(dir, 'tdx') });
  kernel = await startMockGuestKernel({ stateDir: join(dir, 'kernel'), snp, tdx });
  snpOnly = await startMockGuestKernel({ stateDir: join(dir, 'snp-only'), snp });
});

afterAll(async () => {
  await Promise.all([kernel?.close(), snpOnly?.close()]);
  snp?.close();
  tdx?.close();
  await rm(dir, { recursive: true, force: true });
});

interface Answer {
  errno: number;
  exitinfo2: bigint;
  parts: Buffer[];
}

/** One exchange as the preload library makes it; undefined when the server hangs up unanswered. */
function call(
  k: MockGuestKernel,
  device: 1 | 2,
  command: number,
  payload: Uint8Array = Buffer.alloc(0),
  magic = 'MTKQ',
) {
  return new Promise<Answer | undefined>((resolve, reject) => {
    const s = connect(k.socketPath);
    const chunks: Buffer[] = [];
    s.on('data', (c) => chunks.push(c));
    s.on('error', reject);
    s.on('close', () => {
      const b = Buffer.concat(chunks);
      if (b.length === 0) return resolve(undefined);
      const parts: Buffer[] = [];
      let at = 16;
      for (let i = 0; i < 3; i++) {
        const n = b.readUInt32LE(at);
        parts.push(b.subarray(at + 4, at + 4 + n));
        at += 4 + n;
      }
      resolve({ errno: b.readInt32LE(4), exitinfo2: b.readBigUInt64LE(8), parts });
    });
    const head = Buffer.alloc(16);
    head.write(magic, 0, 'latin1');
    head.writeUInt32LE(device, 4);
    head.writeUInt32LE(command, 8);
    head.writeUInt32LE(payload.length, 12);
    s.write(Buffer.concat([head, payload]));
  });
}

/** msg_version, then snp_ext_report_req (or snp_report_req when `certsLen` is undefined). */
function snpRequest(
  userData: Buffer,
  options: { vmpl?: number; certsLen?: number; version?: number } = {},
): Buffer {
  const ext = options.certsLen !== undefined;
  const req = Buffer.alloc(1 + (ext ? 112 : 96));
  req[0] = options.version ?? 1;
  userData.copy(req, 1);
  req.writeUInt32LE(options.vmpl ?? 0, 65);
  if (ext) {
    req.writeBigUInt64LE(0x7000n, 97);
    req.writeUInt32LE(options.certsLen!, 105);
  }
  return req;
}

describe('the simulated sev-guest', () => {
  it('opens devices it has and refuses the others', async () => {
    expect((await call(kernel, 1, 0))!.errno).toBe(0);
    expect((await call(snpOnly, 2, 0))!.errno).toBe(ERRNO.ENOENT);
  });

  it('answers SNP_GET_REPORT with a MSG_REPORT_RSP', async () => {
    const data = Buffer.alloc(64, 3);
    const a = (await call(kernel, 1, GUEST_IOCTLS.SNP_GET_REPORT, snpRequest(data)))!;
    expect(a.errno).toBe(0);
    const resp = a.parts[1]!;
    expect([resp.length, resp.readUInt32LE(0), resp.readUInt32LE(4)]).toEqual([4000, 0, 1184]);
    expect(resp.subarray(32, 32 + 1184)).toEqual(snp.report(data));
  });

  it('asks for a larger certificate buffer as a 6.x kernel does, then fills it', async () => {
    const data = Buffer.alloc(64, 4);
    const none = (await call(kernel, 1, GUEST_IOCTLS.SNP_GET_EXT_REPORT, snpRequest(data, { certsLen: 0 })))!;
    expect([none.errno, none.exitinfo2]).toEqual([ERRNO.EIO, SNP_VMM_ERR_INVALID_LEN]);
    expect(none.parts[0]!.readUInt32LE(104)).toBe(4096);
    const page = (await call(
      kernel,
      1,
      GUEST_IOCTLS.SNP_GET_EXT_REPORT,
      snpRequest(data, { certsLen: 4096 }),
    ))!;
    expect(page.errno).toBe(0);
    const table = snp.certTable();
    expect(page.parts[2]).toEqual(Buffer.concat([table, Buffer.alloc(4096 - table.length)]));
  });

  it('refuses what the kernel refuses', async () => {
    const data = Buffer.alloc(64);
    const errno = async (command: number, payload: Buffer) =>
      (await call(kernel, 1, command, payload))!.errno;
    expect(await errno(GUEST_IOCTLS.SNP_GET_EXT_REPORT, snpRequest(data, { certsLen: 5000 }))).toBe(
      ERRNO.EINVAL,
    );
    expect(await errno(GUEST_IOCTLS.SNP_GET_EXT_REPORT, snpRequest(data, { certsLen: 32 * 1024 }))).toBe(
      ERRNO.EINVAL,
    );
    expect(await errno(GUEST_IOCTLS.SNP_GET_REPORT, snpRequest(data, { version: 0 }))).toBe(ERRNO.EINVAL);
    expect(await errno(GUEST_IOCTLS.SNP_GET_REPORT, Buffer.alloc(10))).toBe(ERRNO.EINVAL);
    expect(await errno(GUEST_IOCTLS.SNP_GET_DERIVED_KEY, Buffer.alloc(0))).toBe(ERRNO.ENOTTY);
    const vmpl = (await call(kernel, 1, GUEST_IOCTLS.SNP_GET_REPORT, snpRequest(data, { vmpl: 4 })))!;
    expect([vmpl.errno, vmpl.parts[1]!.readUInt32LE(0)]).toEqual([0, 0x16]);
  });

  it('hangs up on a request that is not its wire format', async () => {
    expect(await call(kernel, 1, 0, Buffer.alloc(0), 'XXXX')).toBeUndefined();
  });
});

describe('the simulated tdx_guest', () => {
  it('answers TDX_CMD_GET_REPORT0 with the TD report, and ENOTTY to GetQuote unless enabled', async () => {
    const data = Buffer.alloc(64, 5);
    const a = (await call(kernel, 2, GUEST_IOCTLS.TDX_CMD_GET_REPORT0, data))!;
    const report = parseTdReport(a.parts[1]!);
    expect([report.type, report.reportData, report.mrTd]).toEqual([0x81, data, tdx.td.mrTd]);
    expect((await call(kernel, 2, GUEST_IOCTLS.TDX_CMD_GET_QUOTE, Buffer.alloc(64)))!.errno).toBe(
      ERRNO.ENOTTY,
    );
    expect((await call(kernel, 2, GUEST_IOCTLS.TDX_CMD_GET_REPORT0, Buffer.alloc(10)))!.errno).toBe(
      ERRNO.EFAULT,
    );
  });
});

describe('QGS messages', () => {
  const quote = () => Buffer.from('a quote');
  const request = (report: Buffer, patch?: (m: Buffer) => void) => {
    const m = Buffer.alloc(24 + report.length);
    m.writeUInt16LE(1, 0);
    m.writeUInt16LE(1, 2);
    m.writeUInt32LE(0, 4);
    m.writeUInt32LE(m.length, 8);
    m.writeUInt32LE(report.length, 16);
    report.copy(m, 24);
    patch?.(m);
    return m;
  };
  const errorOf = (answer: Buffer) => answer.readUInt32LE(12);
  const e = QGS_MSG.errors;
  const td = encodeTdReport({ reportData: Buffer.alloc(64) });

  it('quotes a well-formed GET_QUOTE_REQ', () => {
    const a = answerQgsMessage(request(td), quote);
    expect([a.readUInt32LE(4), a.readUInt32LE(8), errorOf(a), a.readUInt32LE(20)]).toEqual([
      1,
      a.length,
      0,
      7,
    ]);
    expect(a.subarray(24).toString()).toBe('a quote');
  });

  it('answers hostile requests with an error code and no quote', () => {
    const cases: [Buffer, number][] = [
      [Buffer.alloc(10), e.invalidParameter],
      [request(td, (m) => m.writeUInt16LE(2, 0)), e.invalidVersion],
      [request(td, (m) => m.writeUInt32LE(2, 4)), e.invalidType],
      [request(td, (m) => m.writeUInt32LE(9, 8)), e.invalidSize],
      [request(td, (m) => m.writeUInt32LE(1, 12)), e.invalidCode],
      [request(td, (m) => m.writeUInt32LE(0, 16)), e.invalidCode],
      [request(td, (m) => m.writeUInt32LE(8, 20)), e.invalidSize],
      [request(Buffer.alloc(1024)), e.unexpected],
    ];
    for (const [msg, code] of cases) {
      const a = answerQgsMessage(msg, (r) => tdx.quoteTdReport(r));
      expect([errorOf(a), a.readUInt32LE(20), a.length]).toEqual([code, 0, 24]);
    }
  });
});
