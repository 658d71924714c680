// The guest kernel's /dev/sev-guest and /dev/tdx_guest, simulated for programs that issue the
// ioctls themselves (the attester's shims): `native/guest-kernel-preload.c`, loaded with
// LD_PRELOAD into a dynamically linked program, forwards open and ioctl on those paths to this
// server over a Unix socket, and copies the answers back into the caller's structures. The server
// answers as a Linux 6.x guest kernel and its host would (include/uapi/linux/sev-guest.h,
// tdx-guest.h), from the mock SNP and TDX devices, so the reports are the ones their configfs-tsm
// roots hand out. Tests replace single answers with `once(...)` to play a failing kernel.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MockTeeError } from '../errors.js';
import type { MockSnpDevice } from '../snp/index.js';
import type { MockTdxDevice } from '../tdx/index.js';
import { answerQgsMessage } from '../tdx/qgs.js';

/** The ioctl numbers the simulated kernel knows (`_IOWR`/`_IOR` with the ABI's struct sizes). */
export const GUEST_IOCTLS = Object.freeze({
  SNP_GET_REPORT: 0xc0205300,
  SNP_GET_DERIVED_KEY: 0xc0205301,
  SNP_GET_EXT_REPORT: 0xc0205302,
  TDX_CMD_GET_REPORT0: 0xc4405401,
  /** Intel's backport kernels only; upstream Linux never had it. */
  TDX_CMD_GET_QUOTE: 0x80105404,
  TDX_CMD_GET_QUOTE_V3: 0xc0105404,
});

/** errno values the simulated kernel answers with (Linux x86-64). */
export const ERRNO = Object.freeze({
  ENOENT: 2,
  EIO: 5,
  EFAULT: 14,
  EBUSY: 16,
  EINVAL: 22,
  ENOSPC: 28,
  ENOTTY: 25,
  EAGAIN: 11,
  EACCES: 13,
});

/** SNP_GUEST_VMM_ERR_INVALID_LEN in exitinfo2's upper half: the certificate buffer is too small. */
export const SNP_VMM_ERR_INVALID_LEN = 1n << 32n;
export const SNP_VMM_ERR_BUSY = 2n << 32n;
/** SEV_FW_BLOB_MAX_SIZE: the kernel refuses larger certificate buffers. */
export const SEV_FW_BLOB_MAX_SIZE = 16 * 1024;
const PAGE = 4096;
const SNP_RESP_SIZE = 4000;
const SNP_REPORT_REQ_SIZE = 96;
const SNP_EXT_REPORT_REQ_SIZE = 112;
const TDX_QUOTE_HDR_SIZE = 24;
/** The GetQuote buffer's status when the host could not make a quote. */
export const GET_QUOTE_ERROR = 0x8000000000000000n;

export type GuestDevice = 'sev-guest' | 'tdx_guest';

/** One call into the simulated kernel: `command` 0 is the open, else the ioctl number. */
export interface GuestKernelRequest {
  readonly device: GuestDevice;
  readonly command: number;
  /** What the caller's structures held: SNP: msg_version then the request struct; TDX: report data or the GetQuote buffer. */
  readonly payload: Buffer;
}

/** What the kernel does to the caller: the errno (0 = success) and the memory it writes back. */
export interface GuestKernelAnswer {
  readonly errno: number;
  /** SNP only: written to the ioctl structure's exitinfo2. */
  readonly exitinfo2: bigint;
  /** Written back over the request structure (SNP: certs_len after INVALID_LEN). */
  readonly request?: Buffer;
  /** SNP: resp_data (4000 bytes); TDX: the TD report (1024) or the whole GetQuote buffer. */
  readonly response?: Buffer;
  /** SNP: the certificate buffer's content. */
  readonly certs?: Buffer;
}

/** Replaces the next ioctl's answer; gets the request and what the kernel would have answered. */
export type GuestKernelHook = (request: GuestKernelRequest, answer: GuestKernelAnswer) => GuestKernelAnswer;

export interface StartMockGuestKernelOptions {
  /** Holds the socket and the built preload library. */
  readonly stateDir: string;
  /** Serves /dev/sev-guest from this device; absent: opening it fails with ENOENT. */
  readonly snp?: MockSnpDevice;
  /** Serves /dev/tdx_guest from this device; absent: ENOENT. */
  readonly tdx?: MockTdxDevice;
  /** Also answer the legacy TDX_CMD_GET_QUOTE (Intel's backport kernels); upstream kernels answer ENOTTY. */
  readonly tdxGetQuote?: boolean;
}

export interface GuestKernelCall {
  readonly device: GuestDevice;
  readonly command: number;
  /** SNP_GET_EXT_REPORT: the certificate buffer length the caller offered. */
  readonly certsLen?: number;
}

const here = dirname(fileURLToPath(import.meta.url));
/** The preload library's source (a file of this package, never shipped). */
export const GUEST_KERNEL_PRELOAD_SOURCE = join(here, '../../native/guest-kernel-preload.c');

/** Compiles the preload library into `outDir` (gcc, glibc); returns its path. */
export function buildGuestKernelPreload(outDir: string): string {
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, 'guest-kernel-preload.so');
  execFileSync(
    'gcc',
    [
      '-std=c11',
      '-Wall',
      '-Wextra',
      '-Werror',
      '-O1',
      '-shared',
      '-fPIC',
      '-o',
      out,
      GUEST_KERNEL_PRELOAD_SOURCE,
      '-ldl',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return out;
}

const ok = (fields: Partial<GuestKernelAnswer> = {}): GuestKernelAnswer => ({
  errno: 0,
  exitinfo2: 0n,
  ...fields,
});
const refuse = (errno: number, exitinfo2 = 0n): GuestKernelAnswer => ({ errno, exitinfo2 });

function encodeAnswer(a: GuestKernelAnswer): Buffer {
  const head = Buffer.alloc(16);
  head.write('MTKA', 0, 'latin1');
  head.writeInt32LE(a.errno, 4);
  head.writeBigUInt64LE(BigInt.asUintN(64, a.exitinfo2), 8);
  const parts = [a.request, a.response, a.certs].map((p) => {
    const len = Buffer.alloc(4);
    len.writeUInt32LE(p?.length ?? 0);
    return Buffer.concat([len, p ?? Buffer.alloc(0)]);
  });
  return Buffer.concat([head, ...parts]);
}

/** MSG_REPORT_RSP: status, report size, 24 reserved bytes, the report. */
export function snpReportResponse(report: Uint8Array, status = 0): Buffer {
  const resp = Buffer.alloc(SNP_RESP_SIZE);
  resp.writeUInt32LE(status, 0);
  resp.writeUInt32LE(status === 0 ? report.length : 0, 4);
  if (status === 0) resp.set(report, 32);
  return resp;
}

/** The simulated guest kernel; see the file comment. */
export class MockGuestKernel {
  readonly socketPath: string;
  readonly preloadPath: string;
  readonly #server: Server;
  readonly #options: StartMockGuestKernelOptions;
  readonly #hooks: GuestKernelHook[] = [];
  readonly #sockets = new Set<Socket>();
  /** Every open and ioctl, in order. */
  readonly calls: GuestKernelCall[] = [];

  private constructor(options: StartMockGuestKernelOptions, socketPath: string, preloadPath: string) {
    this.#options = options;
    this.socketPath = socketPath;
    this.preloadPath = preloadPath;
    this.#server = createServer((s) => this.#serve(s));
  }

  static async start(options: StartMockGuestKernelOptions): Promise<MockGuestKernel> {
    const preload = buildGuestKernelPreload(options.stateDir);
    const socketPath = join(options.stateDir, 'guest-kernel.sock');
    rmSync(socketPath, { force: true });
    const kernel = new MockGuestKernel(options, socketPath, preload);
    await new Promise<void>((resolve, reject) => {
      kernel.#server.once('error', reject);
      kernel.#server.listen(socketPath, () => resolve());
    });
    return kernel;
  }

  /** What a program needs in its environment to see the simulated devices. */
  get env(): { readonly LD_PRELOAD: string; readonly MOCK_TEE_GUEST_KERNEL: string } {
    return { LD_PRELOAD: this.preloadPath, MOCK_TEE_GUEST_KERNEL: this.socketPath };
  }

  /** Lets `hook` decide the next ioctl's answer (opens are not hooked). */
  once(hook: GuestKernelHook): void {
    this.#hooks.push(hook);
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #serve(socket: Socket): void {
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
    socket.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    let done = false;
    socket.on('data', (chunk: Buffer) => {
      if (done) return;
      buf = Buffer.concat([buf, chunk]);
      if (buf.length < 16) return;
      const len = buf.readUInt32LE(12);
      if (buf.subarray(0, 4).toString('latin1') !== 'MTKQ' || len > 1 << 20) {
        socket.destroy();
        return;
      }
      if (buf.length < 16 + len) return;
      done = true;
      const deviceId = buf.readUInt32LE(4);
      const request: GuestKernelRequest = {
        device: deviceId === 1 ? 'sev-guest' : 'tdx_guest',
        command: buf.readUInt32LE(8),
        payload: Buffer.from(buf.subarray(16, 16 + len)),
      };
      this.#answer(request).then(
        (a) => socket.end(encodeAnswer(a)),
        () => socket.end(encodeAnswer(refuse(ERRNO.EIO))),
      );
    });
  }

  async #answer(request: GuestKernelRequest): Promise<GuestKernelAnswer> {
    const certsLen =
      request.device === 'sev-guest' && request.command === GUEST_IOCTLS.SNP_GET_EXT_REPORT
        ? request.payload.length >= 1 + SNP_EXT_REPORT_REQ_SIZE
          ? request.payload.readUInt32LE(1 + 104)
          : undefined
        : undefined;
    this.calls.push({
      device: request.device,
      command: request.command,
      ...(certsLen !== undefined && { certsLen }),
    });
    if (request.command === 0) {
      const present = request.device === 'sev-guest' ? this.#options.snp : this.#options.tdx;
      return present === undefined ? refuse(ERRNO.ENOENT) : ok();
    }
    const answer = request.device === 'sev-guest' ? this.#snp(request) : await this.#tdx(request);
    const hook = this.#hooks.shift();
    return hook === undefined ? answer : hook(request, answer);
  }

  /** sev-guest's ioctls as a 6.x kernel with a host that keeps `device.certTable()` handles them. */
  #snp({ command, payload }: GuestKernelRequest): GuestKernelAnswer {
    const device = this.#options.snp;
    if (device === undefined) return refuse(ERRNO.ENOENT);
    const ext = command === GUEST_IOCTLS.SNP_GET_EXT_REPORT;
    if (!ext && command !== GUEST_IOCTLS.SNP_GET_REPORT) return refuse(ERRNO.ENOTTY);
    const size = ext ? SNP_EXT_REPORT_REQ_SIZE : SNP_REPORT_REQ_SIZE;
    if (payload.length < 1 + size) return refuse(ERRNO.EINVAL);
    if (payload[0] === 0) return refuse(ERRNO.EINVAL); // msg_version must be non-zero
    const req = payload.subarray(1, 1 + size);
    const userData = req.subarray(0, 64);
    const vmpl = req.readUInt32LE(64);
    let certs: Buffer | undefined;
    if (ext) {
      const certsAddress = req.readBigUInt64LE(96);
      const certsLen = req.readUInt32LE(104);
      const wanted = certsLen !== 0 && certsAddress !== 0n;
      if (wanted && (certsLen > SEV_FW_BLOB_MAX_SIZE || certsLen % PAGE !== 0)) return refuse(ERRNO.EINVAL);
      const table = device.certTable();
      const offered = wanted ? certsLen : 0;
      if (table.length > offered) {
        // The host needs more pages: the kernel reissues a plain request (so no IV is reused),
        // writes the needed length back and fails with EIO and INVALID_LEN.
        const back = Buffer.from(req);
        back.writeUInt32LE(Math.ceil(table.length / PAGE) * PAGE, 104);
        return { errno: ERRNO.EIO, exitinfo2: SNP_VMM_ERR_INVALID_LEN, request: back };
      }
      if (offered > 0) {
        certs = Buffer.alloc(offered);
        table.copy(certs);
      }
    }
    // The firmware checks the request: VMPL 0-3, reserved bytes zero (SEV-SNP ABI status 0x16).
    if (vmpl > 3 || req.subarray(68, 96).some((b) => b !== 0)) {
      return ok({ response: snpReportResponse(Buffer.alloc(0), 0x16) });
    }
    const response = snpReportResponse(device.report(userData, vmpl));
    return ok(certs === undefined ? { response } : { response, certs });
  }

  /** tdx_guest's ioctls: the TD report, and Intel's GetQuote where enabled. */
  async #tdx({ command, payload }: GuestKernelRequest): Promise<GuestKernelAnswer> {
    const device = this.#options.tdx;
    if (device === undefined) return refuse(ERRNO.ENOENT);
    if (command === GUEST_IOCTLS.TDX_CMD_GET_REPORT0) {
      if (payload.length !== 64) return refuse(ERRNO.EFAULT);
      return ok({ response: await device.tdReport(payload) });
    }
    const getQuote =
      command === GUEST_IOCTLS.TDX_CMD_GET_QUOTE || command === GUEST_IOCTLS.TDX_CMD_GET_QUOTE_V3;
    if (!getQuote || this.#options.tdxGetQuote !== true) return refuse(ERRNO.ENOTTY);
    if (payload.length < TDX_QUOTE_HDR_SIZE + 4 || payload.readBigUInt64LE(0) !== 1n)
      return refuse(ERRNO.EINVAL);
    const inLen = payload.readUInt32LE(16);
    const data = payload.subarray(TDX_QUOTE_HDR_SIZE);
    if (inLen < 4 || inLen > data.length || data.readUInt32BE(0) !== inLen - 4) return refuse(ERRNO.EINVAL);
    const response = answerQgsMessage(data.subarray(4, inLen), (r) => device.quoteTdReport(r));
    const out = Buffer.from(payload);
    if (TDX_QUOTE_HDR_SIZE + 4 + response.length > out.length) {
      out.writeBigUInt64LE(GET_QUOTE_ERROR, 8);
      return ok({ response: out });
    }
    out.writeBigUInt64LE(0n, 8);
    out.writeUInt32LE(4 + response.length, 20);
    out.writeUInt32BE(response.length, TDX_QUOTE_HDR_SIZE);
    response.copy(out, TDX_QUOTE_HDR_SIZE + 4);
    return ok({ response: out });
  }
}

/** Starts the simulated kernel (building the preload library into `stateDir`). */
export function startMockGuestKernel(options: StartMockGuestKernelOptions): Promise<MockGuestKernel> {
  if (options.snp === undefined && options.tdx === undefined) {
    throw new MockTeeError('USAGE', 'the guest kernel needs an SNP or a TDX device');
  }
  return MockGuestKernel.start(options);
}
