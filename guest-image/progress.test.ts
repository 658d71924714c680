// guest-image/progress.sh: on a terminal (util-linux `script` gives the step a pty) a step's line is drawn
// in place with its latest log line and ends with its time; on a pipe nothing is printed.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const here = import.meta.dirname;
const dir = mkdtempSync(join(tmpdir(), 'broker-progress-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const log = join(dir, 'debootstrap.log');
writeFileSync(log, 'I: Retrieving InRelease\nI: Retrieving libc6 2.36-9\n');
const steps = `. '${join(here, 'progress.sh')}'
progress_start 'debootstrap bookworm' '${log}'
progress_end
progress_start 'rootfs.tar'
progress_abort
echo after >&2`;

describe('progress.sh', () => {
  it('draws the step, its latest log line and its time on a terminal', () => {
    const r = spawnSync('script', ['-qec', `bash -c "${steps.replaceAll('"', '\\"')}"`, '/dev/null'], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', COLUMNS: '100' },
    });
    expect(r.status, r.stderr).toBe(0);
    const out = r.stdout.replaceAll('\r\n', '\n');
    expect(out).toMatch(/^\r\x1b\[Kdebootstrap bookworm \(\d+ s\): I: Retrieving libc6 2\.36-9/);
    expect(out).toMatch(/\r\x1b\[Kdebootstrap bookworm: done in \d+ s\n/);
    // A step stopped by a failure leaves a clean line for the message, and no "done".
    expect(out).toMatch(/\r\x1b\[Krootfs\.tar \(\d+ s\)\r\x1b\[Kafter\n$/);
    expect(out).not.toContain('rootfs.tar: done');
  });

  it('prints nothing when stderr is not a terminal', () => {
    const r = spawnSync('bash', ['-c', steps], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('after\n');
    expect(r.stdout).toBe('');
  });
});
