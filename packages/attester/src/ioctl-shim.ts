/**
 * Runs the ioctl shims (`shims/`, README "ioctl shims"): Node cannot issue an
 * ioctl, so on kernels without configfs-tsm the SNP and TDX attesters hand the
 * report data to a small static program that talks to /dev/sev-guest or
 * /dev/tdx_guest and answers on stdout. This module owns the framing (see
 * shims/shim.h): a 68-byte request in; an answer `magic, u32 flags, u32 len1,
 * u32 len2, part1, part2` out, checked to the byte; one exit code per failure
 * class, turned into an `IoctlShimError` with the shim's own message.
 */
import { spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import { AttesterError, type AttesterErrorCode } from './attester.js';

/** The shims' file names; `make build` puts them in dist/bin beside broker-guest. */
export const IOCTL_SHIMS = Object.freeze({ snp: 'broker-snp-report', tdx: 'broker-tdx-report' } as const);
/** Our addition: the folder holding the shims (default: the folder of the running executable). */
export const BROKER_ATTESTER_SHIM_DIR = 'BROKER_ATTESTER_SHIM_DIR';
/** A report with its certificate table or a quote is a few KiB; the shims cap theirs far below. */
export const MAX_SHIM_OUTPUT = 256 * 1024;
/** The quote service may take a while for a first quote; a hung device must not hang the agent. */
export const DEFAULT_SHIM_TIMEOUT_MS = 60_000;

const REQUEST_SIZE = 68;
const MAX_STDERR = 4096;

/** The shims' exit codes (shims/shim.h). */
export const SHIM_EXIT = Object.freeze({
  usage: 2,
  'no-device': 3,
  ioctl: 4,
  firmware: 5,
  host: 6,
  malformed: 7,
  transport: 8,
  output: 9,
  unsupported: 10,
} as const);
export type ShimFailure = keyof typeof SHIM_EXIT | 'not-found' | 'crashed' | 'timeout' | 'framing';

/** A shim run failed; `failure` is its class. Nothing the shim wrote to stdout is used. */
export class IoctlShimError extends AttesterError {
  override readonly code: AttesterErrorCode = 'IOCTL_SHIM_FAILED';
  override readonly name: string = 'IoctlShimError';
  readonly failure: ShimFailure;
  constructor(failure: ShimFailure, message: string, options?: ErrorOptions) {
    super(message, options);
    this.failure = failure;
  }
}

export interface ShimAnswer {
  readonly flags: number;
  readonly part1: Buffer;
  readonly part2: Buffer;
}

export interface ShimLocation {
  readonly shimDir?: string;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** Where a shim is: `shimDir`, else `BROKER_ATTESTER_SHIM_DIR`, else beside the running executable. */
export function shimPath(name: string, where: ShimLocation = {}): string {
  const fromEnv = (where.env ?? process.env)[BROKER_ATTESTER_SHIM_DIR];
  const dir =
    where.shimDir ?? (fromEnv !== undefined && isAbsolute(fromEnv) ? fromEnv : dirname(process.execPath));
  return join(dir, name);
}

/** The 68-byte request: version 1, operation or flags, argument, zero, report data (exactly 64 bytes). */
export function shimRequest(op: number, arg: number, reportData: Uint8Array): Buffer {
  if (reportData.length !== 64) throw new RangeError('shim report data is exactly 64 bytes');
  const req = Buffer.alloc(REQUEST_SIZE);
  req[0] = 1;
  req[1] = op;
  req[2] = arg;
  req.set(reportData, 4);
  return req;
}

/** Parses an answer strictly: the magic, and lengths that add up to exactly what was written. */
export function parseShimAnswer(out: Buffer, magic: string): ShimAnswer {
  if (out.length < 16 || out.subarray(0, 4).toString('latin1') !== magic) {
    throw new IoctlShimError('framing', `the ioctl shim's answer does not start with ${magic}`);
  }
  const flags = out.readUInt32LE(4);
  const len1 = out.readUInt32LE(8);
  const len2 = out.readUInt32LE(12);
  if (16 + len1 + len2 !== out.length) {
    throw new IoctlShimError(
      'framing',
      `the ioctl shim's answer is ${out.length} bytes, its header announces ${16 + len1 + len2}`,
    );
  }
  return { flags, part1: out.subarray(16, 16 + len1), part2: out.subarray(16 + len1) };
}

function failureOf(code: number | null): ShimFailure {
  const entry = Object.entries(SHIM_EXIT).find(([, c]) => c === code);
  return entry === undefined ? 'crashed' : (entry[0] as ShimFailure);
}

export interface RunShimOptions extends ShimLocation {
  readonly args?: readonly string[];
  readonly timeoutMs?: number;
}

/**
 * Runs shim `name` with `request` on stdin; resolves with its stdout only when
 * it exited 0. The environment is inherited (the agent's own).
 */
export async function runShim(
  name: string,
  request: Buffer,
  magic: string,
  options: RunShimOptions = {},
): Promise<ShimAnswer> {
  const path = shimPath(name, options);
  try {
    await access(path, constants.X_OK);
  } catch (err) {
    throw new IoctlShimError('not-found', `the ioctl shim ${path} is missing or not executable`, {
      cause: err,
    });
  }
  const env = { ...(options.env ?? process.env) };
  const { code, signal, stdout, stderr, overflow, timedOut } = await new Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    stdout: Buffer;
    stderr: string;
    overflow: boolean;
    timedOut: boolean;
  }>((resolve, reject) => {
    const child = spawn(path, [...(options.args ?? [])], { stdio: ['pipe', 'pipe', 'pipe'], env });
    const out: Buffer[] = [];
    let outBytes = 0;
    let overflow = false;
    let err = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, options.timeoutMs ?? DEFAULT_SHIM_TIMEOUT_MS);
    child.stdout.on('data', (c: Buffer) => {
      outBytes += c.length;
      if (outBytes > MAX_SHIM_OUTPUT) {
        overflow = true;
        child.kill('SIGKILL');
        return;
      }
      out.push(c);
    });
    child.stderr.on('data', (c: Buffer) => {
      if (err.length < MAX_STDERR) err += c.toString('utf8');
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(
        new IoctlShimError('crashed', `the ioctl shim ${path} could not run: ${e.message}`, { cause: e }),
      );
    });
    child.on('close', (c, s) => {
      clearTimeout(timer);
      resolve({ code: c, signal: s, stdout: Buffer.concat(out), stderr: err, overflow, timedOut });
    });
    // A shim that exits early closes stdin; the write error is the exit code's story, not ours.
    child.stdin.on('error', () => undefined);
    child.stdin.end(request);
  });
  const said = stderr.split('\n').find((l) => l.trim() !== '') ?? '';
  const detail = said.slice(0, 512);
  if (timedOut) throw new IoctlShimError('timeout', `the ioctl shim ${path} did not finish in time`);
  if (overflow)
    throw new IoctlShimError('framing', `the ioctl shim ${path} wrote more than ${MAX_SHIM_OUTPUT} bytes`);
  if (code !== 0) {
    const failure = failureOf(code);
    const how = signal !== null ? `was killed by ${signal}` : `failed (${failure}, exit ${code})`;
    throw new IoctlShimError(failure, detail !== '' ? detail : `the ioctl shim ${path} ${how}`);
  }
  return parseShimAnswer(stdout, magic);
}
