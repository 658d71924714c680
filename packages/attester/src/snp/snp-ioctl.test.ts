// The snp attester on a kernel without configfs-tsm: the real broker-snp-report shim (linked
// dynamically for the test) asks /dev/sev-guest, which the mock TEE's LD_PRELOAD guest kernel
// serves from the same mock SNP device whose configfs-tsm root serves the other path. Evidence
// must be the same bytes either way and verify; every failure class gives a clear error and no
// evidence.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ERRNO,
  GUEST_IOCTLS,
  type MockGuestKernel,
  type MockSnpDevice,
  SNP_VMM_ERR_BUSY,
  SNP_VMM_ERR_INVALID_LEN,
  snpReportResponse,
  startMockGuestKernel,
  startMockSnpDevice,
} from '@broker/mock-tee';
import { SnpVerifier } from '@broker/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvidenceCollectionFailed } from '../attester.js';
import { IOCTL_SHIMS, type IoctlShimError, SHIM_EXIT, shimRequest } from '../ioctl-shim.js';
import { buildShims, hasInterpreter, runShimRaw } from '../testing/shims.js';
import { SnpAttester } from './index.js';

const INITDATA = createHash('sha256').update('[data]\n').digest();
let dir: string;
let shimDir: string;
let device: MockSnpDevice;
let kernel: MockGuestKernel;
const verifier = new SnpVerifier();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'snp-ioctl-'));
  shimDir = buildShims(join(dir, 'shims'));
  // AMD's 4096-bit roots: VCEK + ASK + ARK then outgrow the shim's first one-page buffer.
  device = await startMockSnpDevice({
    stateDir: join(dir, 'device'),
    initDataDigest: INITDATA,
    stableReports: true,
  });
  kernel = await startMockGuestKernel({ stateDir: join(dir, 'kernel'), snp: device });
});

afterAll(async () => {
  await kernel?.close();
  device?.close();
  await rm(dir, { recursive: true, force: true });
});

const lines: string[] = [];
const logger = { debug: () => undefined, info: (m: string) => lines.push(m), warn: () => undefined };
const viaIoctl = () => new SnpAttester({ tsmRoot: join(dir, 'no-tsm'), shimDir, env: kernel.env, logger });
const viaTsm = () => new SnpAttester({ tsmRoot: device.tsmRoot, shimDir, env: {} });
const extCalls = () => kernel.calls.filter((c) => c.command === GUEST_IOCTLS.SNP_GET_EXT_REPORT);

async function failure(p: Promise<unknown>): Promise<IoctlShimError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err === undefined) throw new Error('expected a failure, got evidence');
  return err as IoctlShimError;
}

describe('snp evidence through /dev/sev-guest', () => {
  it.each(['vcek', 'chain', 'none'] as const)(
    'is byte for byte the configfs-tsm evidence, and verifies (certificate table: %s)',
    async (table) => {
      device.config.certTable = table;
      try {
        const reportData = createHash('sha512').update(`runtime data ${table}`).digest();
        const before = extCalls().length;
        const ioctl = await viaIoctl().getEvidence(reportData);
        const tsm = await viaTsm().getEvidence(reportData);
        expect(JSON.stringify(ioctl)).toBe(JSON.stringify(tsm));
        const calls = extCalls().slice(before);
        // The whole chain needs two pages: one retry after SNP_GUEST_VMM_ERR_INVALID_LEN.
        expect(calls.map((c) => c.certsLen)).toEqual(table === 'chain' ? [4096, 8192] : [4096]);
        if (table === 'none') {
          expect(ioctl.cert_chain).toBeNull();
          return;
        }
        const [result] = await verifier.evaluate(ioctl, { reportData, trustedArks: [device.rootsBundlePem] });
        expect(result!.claims).toHaveProperty('measurement');
      } finally {
        device.config.certTable = 'vcek';
      }
    },
  );

  it('says in one log line which path it uses', async () => {
    lines.length = 0;
    const a = viaIoctl();
    await a.getEvidence(Buffer.alloc(64, 1));
    await a.getEvidence(Buffer.alloc(64, 2));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /evidence from \/dev\/sev-guest \(SNP_GET_EXT_REPORT\) through .*broker-snp-report/,
    );
    expect(await viaTsm().source()).toBe('configfs-tsm');
  });

  it('binds initdata with SNP_GET_REPORT and fails closed on a mismatch', async () => {
    await viaIoctl().bindInitData(INITDATA);
    expect(kernel.calls.at(-1)!.command).toBe(GUEST_IOCTLS.SNP_GET_REPORT);
    await expect(viaIoctl().bindInitData(Buffer.alloc(32, 1))).rejects.toThrow('HOSTDATA does not match.');
  });

  it('falls back to SNP_GET_REPORT when the kernel has no extended request', async () => {
    kernel.once(() => ({ errno: ERRNO.ENOTTY, exitinfo2: 0n }));
    const ev = await viaIoctl().getEvidence(Buffer.alloc(64, 3));
    expect(ev.cert_chain).toBeNull();
    expect(kernel.calls.at(-1)!.command).toBe(GUEST_IOCTLS.SNP_GET_REPORT);
    expect(JSON.stringify(ev.attestation_report)).toBe(
      JSON.stringify((await viaTsm().getEvidence(Buffer.alloc(64, 3))).attestation_report),
    );
  });

  it('retries with the larger buffer on ENOSPC, as kernels before 5.19 answer', async () => {
    kernel.once((req, answer) => {
      const back = Buffer.from(req.payload.subarray(1));
      back.writeUInt32LE(8192, 104);
      return { ...answer, errno: ERRNO.ENOSPC, exitinfo2: 0n, request: back, response: Buffer.alloc(0) };
    });
    const before = extCalls().length;
    const ev = await viaIoctl().getEvidence(Buffer.alloc(64, 4));
    expect(
      extCalls()
        .slice(before)
        .map((c) => c.certsLen),
    ).toEqual([4096, 8192]);
    expect(ev.cert_chain).toHaveLength(1);
  });
});

describe('snp ioctl failures: a clear error and no evidence', () => {
  const cases: [string, () => void, string, RegExp][] = [
    [
      'EIO without a firmware code',
      () => kernel.once(() => ({ errno: ERRNO.EIO, exitinfo2: 0n })),
      'ioctl',
      /SNP_GET_EXT_REPORT failed: Input\/output error/,
    ],
    [
      'the kernel refusing before the firmware (exitinfo2 all ones)',
      () => kernel.once(() => ({ errno: ERRNO.EINVAL, exitinfo2: (1n << 64n) - 1n })),
      'ioctl',
      /Invalid argument/,
    ],
    [
      'a firmware error in exitinfo2',
      () => kernel.once(() => ({ errno: ERRNO.EIO, exitinfo2: 0x16n })),
      'firmware',
      /firmware error 0x16/,
    ],
    [
      'a busy host',
      () => kernel.once(() => ({ errno: ERRNO.EAGAIN, exitinfo2: SNP_VMM_ERR_BUSY })),
      'host',
      /busy/,
    ],
    [
      'another VMM error',
      () => kernel.once(() => ({ errno: ERRNO.EIO, exitinfo2: 7n << 32n })),
      'host',
      /VMM error 7/,
    ],
    [
      'a report status from the firmware',
      () => kernel.once((_r, a) => ({ ...a, response: snpReportResponse(Buffer.alloc(0), 0x27) })),
      'firmware',
      /status 0x27/,
    ],
    [
      'a report of the wrong size',
      () =>
        kernel.once((_r, a) => {
          const r = Buffer.from(a.response!);
          r.writeUInt32LE(1000, 4);
          return { ...a, response: r };
        }),
      'malformed',
      /1000 bytes, not 1184/,
    ],
    [
      'a certificate buffer still too short after the retry',
      () => {
        const tooShort = (req: { payload: Buffer }) => {
          const back = Buffer.from(req.payload.subarray(1));
          back.writeUInt32LE(req.payload.readUInt32LE(1 + 104) * 2, 104);
          return { errno: ERRNO.EIO, exitinfo2: SNP_VMM_ERR_INVALID_LEN, request: back };
        };
        kernel.once(tooShort);
        kernel.once(tooShort);
      },
      'malformed',
      /still wants a larger certificate buffer/,
    ],
    [
      'an absurd certificate length',
      () =>
        kernel.once((req) => {
          const back = Buffer.from(req.payload.subarray(1));
          back.writeUInt32LE(1 << 20, 104);
          return { errno: ERRNO.EIO, exitinfo2: SNP_VMM_ERR_INVALID_LEN, request: back };
        }),
      'malformed',
      /asked for a certificate buffer of 1048576 bytes/,
    ],
  ];

  it.each(cases)('%s', async (_name, arrange, cls, message) => {
    arrange();
    const err = await failure(viaIoctl().getEvidence(Buffer.alloc(64, 5)));
    expect(err.failure).toBe(cls);
    expect(err.message).toMatch(message);
  });

  it('refuses a response the kernel cut short (the report reads as zeros)', async () => {
    kernel.once((_r, a) => ({ ...a, response: a.response!.subarray(0, 8) }));
    await expect(viaIoctl().getEvidence(Buffer.alloc(64, 5))).rejects.toThrow(
      /does not carry the requested report data/,
    );
  });

  it('refuses a report for other report data', async () => {
    kernel.once((_r, a) => ({ ...a, response: snpReportResponse(device.report(Buffer.alloc(64, 0xee))) }));
    await expect(viaIoctl().getEvidence(Buffer.alloc(64, 6))).rejects.toThrow(EvidenceCollectionFailed);
  });

  it('reports a missing device node', async () => {
    const a = new SnpAttester({ tsmRoot: join(dir, 'no-tsm'), shimDir, env: {} });
    const err = await failure(a.getEvidence(Buffer.alloc(64)));
    expect(err.failure).toBe('no-device');
    expect(err.message).toMatch(/cannot open \/dev\/sev-guest/);
  });

  it('writes nothing to stdout when it fails, and refuses bad requests', async () => {
    kernel.once(() => ({ errno: ERRNO.EIO, exitinfo2: 0n }));
    const shim = join(shimDir, IOCTL_SHIMS.snp);
    const run = (input: Buffer) => runShimRaw(shim, input, kernel.env);
    const failed = await run(shimRequest(1, 0, Buffer.alloc(64)));
    expect(failed.status).toBe(SHIM_EXIT.ioctl);
    expect(failed.stdout).toHaveLength(0);
    const short = await run(Buffer.alloc(10, 1));
    expect([short.status, short.stderr]).toEqual([
      SHIM_EXIT.usage,
      expect.stringMatching(/10 bytes, not 68/),
    ]);
    const vmpl = await run(shimRequest(1, 4, Buffer.alloc(64)));
    expect([vmpl.status, vmpl.stderr]).toEqual([SHIM_EXIT.usage, expect.stringMatching(/VMPL 4/)]);
    const long = await run(Buffer.concat([shimRequest(0, 0, Buffer.alloc(64)), Buffer.alloc(1)]));
    expect(long.status).toBe(SHIM_EXIT.usage);
  });
});

describe('the restated ABI', () => {
  // The shims restate the uapi structures (a musl build has no kernel headers); where Debian's
  // linux-libc-dev has the header, the kernel's own definitions must give the same numbers.
  it.skipIf(!existsSync('/usr/include/linux/sev-guest.h'))('matches <linux/sev-guest.h>', async () => {
    const src = join(dir, 'uapi.c');
    await writeFile(
      src,
      `#include <stdio.h>
#include <sys/ioctl.h>
#include <linux/sev-guest.h>
int main(void) {
  printf("%lu %lu %lu %lu %lu %lu\\n", (unsigned long)SNP_GET_REPORT, (unsigned long)SNP_GET_EXT_REPORT,
    sizeof(struct snp_guest_request_ioctl), sizeof(struct snp_report_req), sizeof(struct snp_ext_report_req),
    sizeof(struct snp_report_resp));
  return 0;
}
`,
    );
    execFileSync('gcc', ['-o', join(dir, 'uapi'), src]);
    const numbers = execFileSync(join(dir, 'uapi'), { encoding: 'utf8' }).trim().split(' ').map(Number);
    expect(numbers).toEqual([
      GUEST_IOCTLS.SNP_GET_REPORT,
      GUEST_IOCTLS.SNP_GET_EXT_REPORT,
      32,
      96,
      112,
      4000,
    ]);
  });
});

describe('the shipped build', () => {
  it('is static, so LD_PRELOAD cannot reach it (tests use the dynamic link of the same source)', async () => {
    const staticDir = buildShims(join(dir, 'static'), 'static');
    const shim = join(staticDir, IOCTL_SHIMS.snp);
    expect(hasInterpreter(shim)).toBe(false);
    expect(hasInterpreter(join(shimDir, IOCTL_SHIMS.snp))).toBe(true);
    const r = await runShimRaw(shim, shimRequest(1, 0, Buffer.alloc(64)), kernel.env);
    expect(r.status).toBe(SHIM_EXIT['no-device']);
    expect(r.stdout).toHaveLength(0);
  });
});
