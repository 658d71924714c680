// Mounted files are applied only once they have settled. Kubernetes replaces a ConfigMap or Secret
// atomically (a `..data` symlink swap), but an operator editing a file by hand, or a tool that truncates
// and rewrites in place, leaves it half-written for a moment; a rescan at that moment would apply the
// half. A file counts as settled when its identity, size, modification and change times have stayed the
// same for the settle window (as seen by this process, or its change time is already that old), and they
// are still the same once its content has been read. Until then the store keeps the previous value.
import { readFile, stat } from 'node:fs/promises';
import { MountedFileError } from './errors.js';

/** How long a mounted file must stay unchanged before it is applied; default of `settleMs`. */
export const DEFAULT_SETTLE_MS = 500;
/** At start a file still changing after this many settle windows fails the start. */
const START_SETTLE_ROUNDS = 20;

interface Seen {
  readonly signature: string;
  /** performance.now() when this signature was first seen. */
  readonly since: number;
}

export interface SettleClock {
  /** Monotonic milliseconds. */
  readonly monotonic: () => number;
  /** Wall-clock milliseconds, to compare with a file's change time. */
  readonly wall: () => number;
}

const SYSTEM_CLOCK: SettleClock = { monotonic: () => performance.now(), wall: () => Date.now() };

/** What a read found: the settled bytes, or the time until the file may have settled. */
export type SettledRead =
  | { readonly bytes: Buffer; readonly waitMs?: undefined }
  | { readonly bytes?: undefined; readonly waitMs: number };

export class SettledFiles {
  private readonly seen = new Map<string, Seen>();
  private visited = new Set<string>();

  constructor(
    readonly settleMs: number,
    private readonly maxBytes: number,
    private readonly clock: SettleClock = SYSTEM_CLOCK,
  ) {}

  /** Starts a scan: the files not read again before `endScan` are forgotten then. */
  beginScan(): void {
    this.visited = new Set();
  }

  endScan(): void {
    for (const path of this.seen.keys()) if (!this.visited.has(path)) this.seen.delete(path);
  }

  private async signature(path: string): Promise<{ signature: string; ctimeMs: number }> {
    const st = await stat(path, { bigint: true });
    if (st.size > BigInt(this.maxBytes)) {
      throw new MountedFileError(`${path} is larger than ${this.maxBytes} bytes`);
    }
    return {
      signature: `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`,
      ctimeMs: Number(st.ctimeNs / 1_000_000n),
    };
  }

  /** The file's content when it has settled; otherwise how long to wait before asking again. */
  async read(path: string): Promise<SettledRead> {
    this.visited.add(path);
    const before = await this.signature(path);
    const now = this.clock.monotonic();
    let seen = this.seen.get(path);
    if (seen?.signature !== before.signature) {
      seen = { signature: before.signature, since: now };
      this.seen.set(path, seen);
    }
    const quiet = Math.max(now - seen.since, this.clock.wall() - before.ctimeMs);
    if (quiet < this.settleMs) return { waitMs: Math.ceil(this.settleMs - quiet) };
    const bytes = await readFile(path);
    const after = await this.signature(path);
    if (after.signature !== before.signature || bytes.length > this.maxBytes) {
      // Written while being read: start the window again.
      this.seen.set(path, { signature: after.signature, since: this.clock.monotonic() });
      return { waitMs: this.settleMs };
    }
    return { bytes };
  }

  /** At start there is no previous value to keep serving: wait (a bounded while) for the file to settle. */
  async readWaiting(path: string): Promise<Buffer> {
    for (let round = 0; round < START_SETTLE_ROUNDS; round++) {
      const r = await this.read(path);
      if (r.bytes !== undefined) return r.bytes;
      await new Promise((resolve) => setTimeout(resolve, r.waitMs));
    }
    throw new MountedFileError(
      `${path} kept changing for ${(START_SETTLE_ROUNDS * this.settleMs) / 1000} s; it is applied once it stays unchanged for ${this.settleMs} ms`,
    );
  }
}
