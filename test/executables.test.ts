// The single executables carry their own runtime: every command runs from any directory with no Node
// on the PATH and an empty environment, and the guest services come up that way too.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, binary, start, waitForListen } from './helpers/process.js';

const EMPTY_ENV = { PATH: '/nonexistent' };
const dir = mkdtempSync(join(tmpdir(), 'broker-exe-'));

describe('single executables without Node', () => {
  const commands = readdirSync(BIN).filter((n) => !n.startsWith('broker-'));

  it('links every command the multi-call executables report', () => {
    const listed = ['broker-tools', 'broker-guest'].flatMap((exe) =>
      execFileSync(binary(exe), ['--list-commands'], { encoding: 'utf8', env: EMPTY_ENV }).trim().split('\n'),
    );
    expect([...listed].sort()).toEqual([...commands].sort());
    for (const c of commands) expect(realpathSync(join(BIN, c))).toMatch(/broker-(tools|guest)$/);
  });

  it('runs each command from another directory with an empty environment', () => {
    for (const c of commands) {
      const r = spawnSync(join(BIN, c), ['--help'], { cwd: dir, env: EMPTY_ENV, encoding: 'utf8' });
      expect(r.status, `${c}: ${r.stderr}`).toBe(0);
      expect(`${r.stdout}${r.stderr}`.toLowerCase(), c).toMatch(/usage/);
    }
  });

  it('starts the attestation agent on its socket with no Node installed', async () => {
    writeFileSync(join(dir, 'aa.toml'), '');
    const sock = join(dir, 'run', 'aa.sock');
    const aa = start(
      binary('attestation-agent'),
      ['-c', join(dir, 'aa.toml'), '--attestation_sock', `unix://${sock}`],
      {
        env: EMPTY_ENV,
        cwd: dir,
      },
    );
    try {
      await waitForListen({ path: sock }, aa);
    } finally {
      expect(await aa.stop()).toBe(0);
    }
  });
});
