/**
 * Pull progress for people: on a terminal, one line per layer redrawn in
 * place (at most ten times a second); elsewhere, a line when a layer starts
 * and when it is done, so logs stay readable.
 */
import type { PullProgressEvent } from './pull.js';

export interface ProgressOutput {
  write(text: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
}

const REDRAW_MS = 100;

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`;
}

function short(digest: string): string {
  return digest.slice(0, digest.indexOf(':') + 13);
}

function bar(fraction: number, width: number): string {
  const f = Math.max(0, Math.min(1, fraction));
  const full = Math.round(f * width);
  return `[${'='.repeat(Math.max(0, full - 1))}${full > 0 ? (f >= 1 ? '=' : '>') : ''}${' '.repeat(width - full)}]`;
}

/** Returns a progress callback for `pullImage` writing to `out` (usually `process.stderr`). */
export function progressPrinter(
  out: ProgressOutput,
  now: () => number = Date.now,
): (e: PullProgressEvent) => void {
  const tty = out.isTTY === true;
  let lastDraw = 0;
  let open = false;
  return (e) => {
    switch (e.kind) {
      case 'manifest':
        out.write(`Pulling ${e.reference} (manifest ${short(e.digest)})\n`);
        return;
      case 'policy':
        out.write(
          `Signature policy: ${e.decision.allowed ? 'accepted' : 'rejected'} (scope ${e.decision.scope === null ? 'default' : JSON.stringify(e.decision.scope)})\n`,
        );
        return;
      case 'layer': {
        const label = `Layer ${e.index + 1}/${e.count} ${short(e.digest)}`;
        const sizes = `${formatBytes(e.bytes)} / ${formatBytes(e.size)}`;
        if (!tty) {
          if (e.bytes === 0 && !e.done) out.write(`${label}: ${formatBytes(e.size)}\n`);
          else if (e.done) out.write(`${label}: done\n`);
          return;
        }
        const t = now();
        if (!e.done && open && t - lastDraw < REDRAW_MS) return;
        lastDraw = t;
        const width = Math.max(10, Math.min(40, (out.columns ?? 80) - label.length - sizes.length - 4));
        out.write(
          `\r\x1b[K${label} ${bar(e.size === 0 ? 1 : e.bytes / e.size, width)} ${sizes}${e.done ? '\n' : ''}`,
        );
        open = !e.done;
        return;
      }
    }
  };
}
