// scripts/install-deps.sh, run on a copy of the repository's layout with a PATH of our choosing: the build's
// set asks Debian for nothing, the test set names what it needs in one line where there is no apt-get,
// and installs only what dpkg reports missing (apt-get and dpkg-query are stand-ins that record calls).
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './helpers/process.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-install-deps-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A copy of the script beside a node_modules that is newer than the lockfile (so no npm ci). */
function layout(): string {
  const root = mkdtempSync(join(dir, 'repo-'));
  mkdirSync(join(root, 'scripts'));
  copyFileSync(join(ROOT, 'scripts', 'install-deps.sh'), join(root, 'scripts', 'install-deps.sh'));
  mkdirSync(join(root, 'node_modules', '.bin'), { recursive: true });
  symlinkSync(process.execPath, join(root, 'node_modules', '.bin', 'node'));
  writeFileSync(join(root, 'package-lock.json'), '{}');
  writeFileSync(join(root, 'node_modules', '.package-lock.json'), '{}');
  const old = new Date(Date.now() - 3600_000);
  utimesSync(join(root, 'package-lock.json'), old, old);
  return root;
}

/** A PATH holding only the tools the script may use, plus `extra` scripts. */
function pathWith(extra: Record<string, string> = {}): string {
  const bin = mkdtempSync(join(dir, 'bin-'));
  for (const tool of ['bash', 'dirname', 'id', 'grep']) {
    const found = spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
    expect(found, tool).not.toBe('');
    symlinkSync(found, join(bin, tool));
  }
  for (const [name, body] of Object.entries(extra)) {
    writeFileSync(join(bin, name), `#!${join(bin, 'bash')}\n${body}\n`);
    chmodSync(join(bin, name), 0o755);
  }
  return bin;
}

function run(root: string, path: string, ...args: string[]) {
  return spawnSync('/usr/bin/env', ['bash', join(root, 'scripts', 'install-deps.sh'), ...args], {
    encoding: 'utf8',
    env: { PATH: path, HOME: dir },
  });
}

describe('install-deps.sh', () => {
  it('asks Debian only for a C compiler for the build', () => {
    const calls = join(dir, 'apt-calls-build');
    const extra = {
      'dpkg-query':
        'for a; do last=$a; done; case $last in musl-tools) exit 1;; esac; printf "install ok installed"',
      'apt-get': `echo "$*" >>${calls}`,
      sudo: 'exec "$@"',
    };
    const r = run(layout(), pathWith(extra));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`installing Debian packages: musl-tools\n${process.version}\n`);
    expect(readFileSync(calls, 'utf8')).toBe(
      'update -qq\ninstall -y -qq --no-install-recommends musl-tools\n',
    );
  });

  it('builds without Debian where gcc is there, and names the build packages where it is not', () => {
    const withGcc = run(layout(), pathWith({ gcc: 'exit 0' }));
    expect(withGcc.stderr).toBe('');
    expect(withGcc.status).toBe(0);
    const without = run(layout(), pathWith());
    expect(without.status).toBe(1);
    expect(without.stderr).toBe(
      'install-deps: no Debian package manager (apt-get, dpkg-query) here: install the Debian packages gcc libc6-dev musl-tools (or their equivalents), then run this again\n',
    );
  });

  it('names what the tests need in one line when there is no Debian package manager', () => {
    const r = run(layout(), pathWith(), 'test');
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^install-deps: no Debian package manager \(apt-get, dpkg-query\) here: install/,
    );
    for (const p of [
      'gcc',
      'qemu-system-x86',
      'chromium',
      'golang-go',
      'redis-server',
      'swtpm',
      'postgresql',
    ]) {
      expect(lines[0]).toContain(` ${p} `);
    }
  });

  it('installs only the test peers dpkg reports missing', () => {
    const calls = join(dir, 'apt-calls');
    const extra = {
      // chromium and swtpm are missing; everything else is installed.
      'dpkg-query':
        'for a; do last=$a; done; case $last in chromium|swtpm) exit 1;; esac; printf "install ok installed"',
      'apt-get': `echo "$*" >>${calls}`,
      sudo: 'exec "$@"',
    };
    const r = run(layout(), pathWith(extra), 'test');
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('installing Debian packages: swtpm chromium');
    const recorded = readFileSync(calls, 'utf8').trim().split('\n');
    expect(recorded).toEqual(['update -qq', 'install -y -qq --no-install-recommends swtpm chromium']);
  });

  it('refuses an unknown set', () => {
    const r = run(layout(), pathWith(), 'everything');
    expect(r.status).toBe(2);
    expect(r.stderr).toBe("install-deps: unknown set 'everything' (one of: build, test, images)\n");
  });
});
