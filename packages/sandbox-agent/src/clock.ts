/**
 * SetGuestDateTime: the guest's clock set to the host's, as kata's runtime asks when it hands out a VM
 * from its factory (a template VM resumes with the clock it was saved with). kata's agent calls
 * settimeofday(2) with the request's seconds and microseconds; Node.js has no binding for it, so
 * coreutils' `date -u -s @SEC.USEC` (which calls clock_settime) does it, without a shell. The values
 * are checked first, so `date` never sees a negative, out-of-range or absurd time.
 */
import { execFile } from 'node:child_process';
import { InvalidRequest, RuntimeFailed } from './errors.js';
import type { Decoded } from './proto.js';

/**
 * The range of times accepted, in seconds since the epoch: 2000-01-01 to 2200-01-01 (UTC). Earlier
 * clocks break TLS certificate checks in the guest; later ones are past what the kernel keeps
 * (year 2262) in sight, and neither is a host's clock.
 */
export const MIN_SEC = 946_684_800n;
export const MAX_SEC = 7_258_118_400n;
const USEC_PER_SEC = 1_000_000n;

export interface ClockOptions {
  /** The `date` executable [default: `date`, looked up on the PATH of `env`]. */
  readonly date?: string;
  /** The environment `date` runs in [default: the agent's]. */
  readonly env?: NodeJS.ProcessEnv;
}

/** What SetGuestDateTime did: the clock just before and just after, in milliseconds since the epoch. */
export interface ClockChange {
  readonly beforeMs: number;
  readonly afterMs: number;
}

/** A 64-bit field of a decoded request (bigint, or a number or string from other encoders). */
function int64(value: unknown, field: string): bigint {
  if (value === undefined || value === null) return 0n;
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  if (typeof value === 'string' && /^-?\d{1,19}$/.test(value)) return BigInt(value);
  throw new InvalidRequest(`invalid ${field} ${String(value)}: not a 64-bit integer`);
}

/** Checks the request's `Sec` and `Usec`; the time they name. */
export function checkDateTime(req: Decoded): { sec: bigint; usec: bigint } {
  const sec = int64(req.Sec, 'Sec');
  const usec = int64(req.Usec, 'Usec');
  if (sec < MIN_SEC || sec >= MAX_SEC)
    throw new InvalidRequest(
      `invalid Sec ${sec}: the time must lie between 2000-01-01 and 2200-01-01 (UTC), in seconds since the epoch`,
    );
  if (usec < 0n || usec >= USEC_PER_SEC)
    throw new InvalidRequest(`invalid Usec ${usec}: microseconds must be 0 to 999999`);
  return { sec, usec };
}

/** `date`'s arguments for the time `sec`.`usec` (UTC, microseconds written out to six digits). */
export function dateArguments(sec: bigint, usec: bigint): string[] {
  return ['-u', '-s', `@${sec}.${usec.toString().padStart(6, '0')}`];
}

/** SetGuestDateTime: checks the request, then sets the clock with `date`. */
export async function setGuestDateTime(req: Decoded, options: ClockOptions = {}): Promise<ClockChange> {
  const { sec, usec } = checkDateTime(req);
  const bin = options.date ?? 'date';
  const args = dateArguments(sec, usec);
  const beforeMs = Date.now();
  await new Promise<void>((resolve, reject) => {
    execFile(
      bin,
      args,
      { timeout: 30_000, maxBuffer: 64 * 1024, ...(options.env !== undefined && { env: options.env }) },
      (err, _stdout, stderr) => {
        if (!err) return resolve();
        const e = err as NodeJS.ErrnoException & { code?: unknown };
        const why =
          e.code === 'ENOENT'
            ? `${bin} was not found (coreutils' date sets the clock)`
            : stderr.trim() ||
              (typeof e.code === 'number' ? `${bin} exited with status ${e.code}` : e.message);
        reject(
          new RuntimeFailed(`setting the guest clock with ${bin} ${args.join(' ')} failed: ${why}`, {
            cause: err,
          }),
        );
      },
    );
  });
  return { beforeMs, afterMs: Date.now() };
}
