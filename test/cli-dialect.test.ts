// One dialect for every command of dist/bin, run as real processes: --help (stdout, exit 0, the exit
// statuses), --version (`<command> <version> (broker <git describe>)`), an unknown option (one line
// naming it and `Run '<command> --help' for usage.`, exit 2), a missing file (its path, exit 1), stack
// traces that name the TypeScript source, and socket or state folders that cannot be created.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { binary, runToEnd } from './helpers/process.js';

const EXECUTABLES = ['broker-tools', 'broker-guest'];
/** Every command name the executables answer to: the dispatch tables are the only list. */
const COMMANDS = EXECUTABLES.flatMap((exe) =>
  execFileSync(binary(exe), ['--list-commands'], { encoding: 'utf8' }).trim().split('\n'),
);
const MISSING = '/nonexistent/broker-cli-dialect/file';
const dir = mkdtempSync(join(tmpdir(), 'broker-cli-dialect-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Without RUST_BACKTRACE (this workshop sets it), failures are the one line the dialect promises. */
const env = { PATH: process.env.PATH ?? '', HOME: dir };

/** A command line that reads MISSING before doing anything else. */
const READS_MISSING: Record<string, string[]> = {
  kbs: ['-c', MISSING],
  'kbs-client': ['--cert-file', MISSING, 'attest'],
  'kbs-verify': ['--tee', 'sample', '--evidence', MISSING],
  rego: ['eval', '-d', MISSING, 'true'],
  secret: [
    'seal',
    '--signing-kid',
    'k',
    '--signing-jwk-path',
    MISSING,
    'vault',
    '-r',
    'kbs:///a/b/c',
    '-p',
    'x',
  ],
  brokerctl: ['render', MISSING, '--cluster-domain', 'cluster.local'],
  initdata: ['check', MISSING],
  'mock-tee': ['expected-pcrs', '--manifest', MISSING],
  'image-policy': ['check', '--policy', MISSING, 'dir:/x'],
  'image-pull': ['--policy', MISSING, 'dir:/x', join(dir, 'bundle')],
  'reference-values': [
    ...['--platform', 'azure', '--tee', 'az-snp-vtpm', '--initdata', MISSING],
    ...['--measurements', MISSING, '--image-tag', 'x', '--format', 'rvps-message'],
  ],
  'attestation-service': ['--config-file', MISSING],
  'rvps-tool': ['register', '--path', MISSING],
  'kbs-storage': ['copy', '--from', MISSING, '--to', MISSING],
  'attestation-agent': ['-c', MISSING],
  'confidential-data-hub': ['-c', MISSING],
  'process-user-data': ['provision-files', '--user-data', MISSING, '--tpm', 'none'],
  'encrypted-disk': ['--initdata', MISSING],
};
/**
 * Upstream's clients print `Error: …` (kbs-client as trustee's, secret as guest-components'); secret
 * also prints upstream's warning line before it.
 */
const UPSTREAM_ERROR_PREFIX: Record<string, string[]> = { 'kbs-client': [], secret: ['Warning: '] };

describe.each(EXECUTABLES)('%s itself', (exe) => {
  it('answers --help, --version and an unknown command in the dialect', async () => {
    const help = await runToEnd(binary(exe), ['--help'], { env });
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toContain('Exit status:');
    const version = await runToEnd(binary(exe), ['--version'], { env });
    expect(version).toMatchObject({ code: 0, stderr: '' });
    expect(version.stdout).toMatch(new RegExp(`^${exe} \\d+\\.\\d+\\.\\d+ \\(broker [^\\s)]+\\)\\n$`));
    const unknown = await runToEnd(binary(exe), ['frobnicate'], { env });
    expect(unknown).toEqual({
      code: 2,
      stdout: '',
      stderr: `${exe}: unknown command 'frobnicate'\nRun '${exe} --help' for usage.\n`,
    });
  });
});

describe.each(COMMANDS)('%s', (name) => {
  it('prints its help with the exit statuses on stdout, exit 0', async () => {
    const r = await runToEnd(binary(name), ['--help'], { env });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Usage/);
    expect(r.stdout).toMatch(/\nExit status:\n {2}0 {2}.+\n {2}1 {2}.+\n {2}2 {2}.+/);
  });

  it('prints `<command> <version> (broker <git describe>)`, exit 0', async () => {
    const r = await runToEnd(binary(name), ['--version'], { env });
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(new RegExp(`^${name} \\d+\\.\\d+\\.\\d+ \\(broker [^\\s)]+\\)\\n$`));
  });

  it('names an unknown option in one line and points at --help, exit 2', async () => {
    const r = await runToEnd(binary(name), ['--no-such-option'], { env });
    expect(r).toEqual({
      code: 2,
      stdout: '',
      stderr: `${name}: unknown option '--no-such-option'\nRun '${name} --help' for usage.\n`,
    });
  });

  const missing = READS_MISSING[name];
  // Registered only for the commands that read a file given on their command line.
  if (missing !== undefined) {
    it('names a missing file in exactly one line, exit 1', async () => {
      const r = await runToEnd(binary(name), missing, { env });
      expect(r.code).toBe(1);
      const before = UPSTREAM_ERROR_PREFIX[name];
      const prefix = before === undefined ? `${name}: ` : 'Error: ';
      expect(r.stderr.trim().split('\n')).toEqual([
        ...(before ?? []).map((p) => expect.stringMatching(new RegExp(`^${p}`))),
        expect.stringMatching(new RegExp(`^${prefix}.*${MISSING}.*; check`)),
      ]);
    });
  }
});

/** Each service and logging tool, started so that it reaches its logger. */
const LOGGING: [string, string[]][] = [
  ['kbs', ['-c', MISSING]],
  ['attestation-agent', []],
  ['confidential-data-hub', []],
  ['api-server-rest', ['--bind', '127.0.0.1:0']],
  ['agent-policy-gate', ['serve', '--no-initdata']],
  ['sealed-secret-init', ['--root', MISSING]],
  ['encrypted-disk', ['--initdata', MISSING]],
  ['mock-tee', ['start', '--state', join(dir, 'state')]],
  ['kbs-client', ['attest']],
];

describe.each(LOGGING)('%s with a RUST_LOG that is not a level', (name, args) => {
  it('names the variable and the allowed levels once, exit 1', async () => {
    const r = await runToEnd(binary(name), args, { env: { ...env, RUST_LOG: 'verbose' } });
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /RUST_LOG: "verbose" is not a log level: use one of off, error, warn, info, debug, trace/,
    );
  });
});

describe('stack traces', () => {
  it('name the TypeScript source file and line (source maps in the executable)', async () => {
    const r = await runToEnd(binary('kbs'), ['-c', MISSING], { env: { ...env, RUST_BACKTRACE: '1' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/ at .*packages\/kbs\/src\/cli\.ts:\d+:\d+\)?\n/);
  });
});

// Node's recursive mkdir never returned for these (procfs refuses new entries with ENOENT), spinning
// at full CPU and ignoring SIGTERM; each must now end by itself with status 1, naming the folder.
describe('a socket or state folder that cannot be created', () => {
  it('attestation-agent', async () => {
    const config = join(dir, 'aa.toml');
    writeFileSync(config, '');
    const r = await runToEnd(
      binary('attestation-agent'),
      ['-c', config, '--attestation_sock', 'unix:///proc/broker-dialect/aa/aa.sock'],
      { env },
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^attestation-agent: cannot create directory \/proc\/broker-dialect\/aa: /);
  });

  it('confidential-data-hub', async () => {
    const config = join(dir, 'cdh.toml');
    writeFileSync(
      config,
      'socket = "unix:///proc/broker-dialect/cdh/cdh.sock"\n[kbc]\nname = "offline_fs_kbc"\n',
    );
    const r = await runToEnd(binary('confidential-data-hub'), ['-c', config], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^confidential-data-hub: .*cannot create directory \/proc\/broker-dialect\/cdh: /,
    );
  });

  it('mock-tee roots', async () => {
    const r = await runToEnd(binary('mock-tee'), ['roots', '--state', '/proc/broker-dialect/state'], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^mock-tee: cannot create directory \/proc\/broker-dialect\/state\/roots: /);
  });
});
