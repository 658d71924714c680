import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BROKER_AZURE_IMDS_URL, BROKER_TPM } from '@broker/attester';
import { TPM_ALG, Tpm } from '@broker/tpm';
import { requirePrograms } from '@broker/tpm/testing';
import { parseAmdRootBundle } from '@broker/verifier';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GUEST_ENV, mockTeeMain } from './cli.js';
import type { MockTee } from './device.js';
import { expectedPcrValues } from './manifest.js';
import { sampleManifest } from './sample-manifest.js';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    options: { stdout: (t: string) => out.push(t), stderr: (t: string) => err.push(t), rootKeyBits: 2048 },
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('mock-tee command line', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mock-tee-cli-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('names the settings as the attesters read them', () => {
    expect(GUEST_ENV).toEqual({ tpm: BROKER_TPM, imdsUrl: BROKER_AZURE_IMDS_URL });
  });

  it.each([
    [[], 2],
    [['help'], 2],
    [['--help'], 0],
    [['frobnicate'], 2],
    [['roots'], 2],
    [['start'], 2],
    [['roots', '--state'], 2],
    [['roots', '--state', 'x', '--bogus'], 2],
    [['roots', '--state', 'x', 'positional'], 2],
    [['start', '--state', 'x', '--tpm-port', 'http'], 2],
    [['start', '--state', 'x', '--imds-port', '70000'], 2],
    [['start', '--state', 'x', '--log-level', 'loud'], 2],
  ])('%j exits %i', async (argv, code) => {
    const c = capture();
    expect(await mockTeeMain(argv, c.options)).toBe(code);
    if (code === 2)
      expect(c.err.join('')).toMatch(/^mock-tee[^\n]*: [^\n]+\nRun 'mock-tee[^']*--help' for usage\.\n$/);
  });

  it('roots: a state folder that cannot be created fails at once, naming it', async () => {
    const c = capture();
    // Node's recursive mkdir spun here forever at full CPU.
    expect(await mockTeeMain(['roots', '--state', '/proc/broker-mock-tee-test'], c.options)).toBe(1);
    expect(c.err.join('')).toMatch(
      /^mock-tee: cannot create directory \/proc\/broker-mock-tee-test\/roots: /,
    );
  });

  it('roots: creates the hardware roots and prints the bundle the KBS trusts', async () => {
    const c = capture();
    expect(await mockTeeMain(['roots', '--state', join(dir, 'state-a')], c.options)).toBe(0);
    const path = c.out.join('').trim();
    expect(path).toBe(join(dir, 'state-a', 'roots', 'amd-roots.pem'));
    const bundle = parseAmdRootBundle(await readFile(path, 'utf8'));
    expect(bundle.ask).toBeDefined();
    // Again: the same roots.
    const again = capture();
    await mockTeeMain(['roots', '--state', join(dir, 'state-a')], again.options);
    expect(await readFile(again.out.join('').trim(), 'utf8')).toBe(await readFile(path, 'utf8'));
  });

  it('expected-pcrs: the sample, or a manifest file', async () => {
    const c = capture();
    expect(await mockTeeMain(['expected-pcrs'], c.options)).toBe(0);
    const doc = JSON.parse(c.out.join(''));
    expect(doc.image_tag).toBe('mock-podvm:0.1.0');
    expect(doc.measurements.sha256.pcr11).toBe(expectedPcrValues(sampleManifest()).get(11));
    expect(Object.keys(doc.measurements.sha256)).toEqual(['pcr03', 'pcr09', 'pcr11', 'pcr12']);
    const file = join(dir, 'm.json');
    await writeFile(file, JSON.stringify({ image_tag: 'x:1', pcrs: { '12': ['00'.repeat(32)] } }));
    const d = capture();
    expect(await mockTeeMain(['expected-pcrs', '--manifest', file], d.options)).toBe(0);
    expect(Object.keys(JSON.parse(d.out.join('')).measurements.sha256)).toEqual(['pcr12']);
    await writeFile(file, '{"image_tag": 1}');
    const e = capture();
    expect(await mockTeeMain(['expected-pcrs', '--manifest', file], e.options)).toBe(1);
    expect(e.err.join('')).toContain('image_tag');
  });

  it('start: runs swtpm behind the interposer, prints the guest settings, stops on abort', async () => {
    await requirePrograms('swtpm');
    const c = capture();
    const abort = new AbortController();
    let device: MockTee | undefined;
    const logLines: string[] = [];
    const running = mockTeeMain(['start', '--state', join(dir, 'state-b'), '--log-level', 'debug'], {
      ...c.options,
      signal: abort.signal,
      logDestination: { write: (line: string) => logLines.push(line) },
      onReady: (d) => {
        device = d;
      },
    });
    await expect.poll(() => device, { timeout: 60_000 }).toBeDefined();
    const settings = Object.fromEntries(
      c.out
        .join('')
        .trim()
        .split('\n')
        .map((l) => l.split(/=(.*)/s).slice(0, 2) as [string, string]),
    );
    expect(Object.keys(settings)).toEqual([
      'BROKER_TPM',
      'BROKER_AZURE_IMDS_URL',
      'TPM2TOOLS_TCTI',
      'MOCK_TEE_ROOTS',
      'MOCK_TEE_IMAGE_TAG',
    ]);
    expect(settings.MOCK_TEE_ROOTS).toBe(join(dir, 'state-b', 'roots', 'amd-roots.pem'));
    const tpm = Tpm.open(settings.BROKER_TPM!);
    const [pcr11] = await tpm.readPcrs(TPM_ALG.SHA256, [11]);
    await tpm.close();
    expect(Buffer.from(pcr11!).toString('hex')).toBe(expectedPcrValues(sampleManifest()).get(11));
    const imds = await fetch(`${settings.BROKER_AZURE_IMDS_URL}/metadata/THIM/amd/certification`, {
      headers: { Metadata: 'true' },
    });
    expect(imds.status).toBe(200);
    const swtpmPid = device!.swtpm.pid!;
    expect(alive(swtpmPid)).toBe(true);
    abort.abort();
    expect(await running).toBe(0);
    expect(alive(swtpmPid)).toBe(false);
    expect(logLines.map((l) => JSON.parse(l).msg)).toContain('mock TEE stopped');
  });

  it('start: ends with status 1 when swtpm dies under it', async () => {
    await requirePrograms('swtpm');
    const c = capture();
    let device: MockTee | undefined;
    const running = mockTeeMain(['start', '--state', join(dir, 'state-d'), '--log-level', 'off'], {
      ...c.options,
      onReady: (d) => {
        device = d;
      },
    });
    await expect.poll(() => device, { timeout: 60_000 }).toBeDefined();
    process.kill(device!.swtpm.pid!, 'SIGKILL');
    expect(await running).toBe(1);
    expect(c.err.join('')).toContain('swtpm exited');
  });

  it('start: a bad manifest fails before anything runs', async () => {
    const file = join(dir, 'bad.json');
    await writeFile(file, '[]');
    const c = capture();
    expect(
      await mockTeeMain(['start', '--state', join(dir, 'state-c'), '--manifest', file], {
        ...c.options,
        logDestination: pino.destination({ fd: 2 }),
      }),
    ).toBe(1);
    expect(c.err.join('')).toContain('measurement manifest');
  });
});
