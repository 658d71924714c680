// broker-guest compiles only the bundle of the command it runs (packages/executables/src/launcher.cjs):
// each daemon its own, with the code cache the build made under the executable's V8 flags; anything
// else the full bundle, which dispatches as always.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { binary } from './helpers/process.js';

const env = { PATH: '/nonexistent', BROKER_LAUNCH_DEBUG: '1' };

function launched(cmd: string, args: string[]): { bundle: string; cache: string; stdout: string } {
  const r = spawnSync(cmd, args, { env, encoding: 'utf8' });
  const m = /^launcher: bundle (\S+), code cache (used|rejected)$/m.exec(r.stderr);
  expect(m, r.stderr).not.toBeNull();
  // The SEA's own code cache of the launcher, made under the executable's V8 flags, is accepted too
  // (a blob made under other flags warned at every start).
  expect(r.stderr).not.toMatch(/Code cache data rejected/);
  return { bundle: m![1]!, cache: m![2]!, stdout: r.stdout };
}

describe('broker-guest launcher', () => {
  const daemons = ['attestation-agent', 'confidential-data-hub', 'api-server-rest', 'agent-policy-gate'];

  it('runs each daemon from its own bundle and code cache, by link or by first argument', () => {
    for (const d of daemons) {
      const byLink = launched(binary(d), ['--version']);
      expect(byLink).toMatchObject({ bundle: d, cache: 'used' });
      expect(byLink.stdout).toMatch(new RegExp(`^${d} `));
      expect(launched(binary('broker-guest'), [d, '--version'])).toMatchObject({ bundle: d, cache: 'used' });
    }
  });

  it('runs everything else from the full bundle', () => {
    expect(launched(binary('sealed-secret-init'), ['--version']).bundle).toBe('all');
    expect(launched(binary('broker-guest'), ['--list-commands']).stdout.split('\n')).toContain(
      'process-user-data',
    );
    expect(launched(binary('broker-guest'), ['--together', 'api-server-rest']).bundle).toBe('all');
    // A link under another name whose first argument names a daemon: dispatch reads the link's name.
    const dir = mkdtempSync(join(tmpdir(), 'broker-launcher-'));
    symlinkSync(binary('broker-guest'), join(dir, 'sealed-secret-init'));
    const r = launched(join(dir, 'sealed-secret-init'), ['attestation-agent']);
    expect(r.bundle).toBe('all');
  });
});
