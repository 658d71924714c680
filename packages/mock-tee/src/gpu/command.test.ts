import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CcaAttester } from '@broker/attester';
import { CcaVerifier } from '@broker/verifier';
import { afterAll, describe, expect, it } from 'vitest';
import { mockTeeMain } from '../cli.js';
import { toolWrapper } from './client.js';
import { GPU_STATE_FILES } from './index.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-mock-tee-gpu-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `mock-tee ARGV` in the foreground until its settings are printed; `stop()` ends it. */
async function foreground(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const abort = new AbortController();
  const exit = mockTeeMain(argv, {
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    signal: abort.signal,
  });
  while (out.length === 0) {
    const early = await Promise.race([exit, new Promise((r) => setTimeout(r, 20, 'running'))]);
    if (early !== 'running') throw new Error(`exited ${String(early)}: ${err.join('')}`);
  }
  const settings = Object.fromEntries(
    out
      .join('')
      .trim()
      .split('\n')
      .map((l) => l.split('=', 2) as [string, string]),
  );
  return {
    settings,
    stop: async () => {
      abort.abort();
      return exit;
    },
  };
}

describe('mock-tee gpu and cca', () => {
  it.each([
    [['gpu'], 2],
    [['gpu', '--state', 'x', '--cc', 'maybe'], 2],
    [['cca'], 2],
    [['cca', '--state', 'x', 'extra'], 2],
    [['gpu-tool'], 2],
  ])('%j exits %i', async (argv, code) => {
    expect(await mockTeeMain(argv, { stdout: () => undefined, stderr: () => undefined })).toBe(code);
  });

  it('runs the GPU until stopped and prints where its tools and test root are', async () => {
    const state = join(dir, 'gpu');
    const gpu = await foreground(['gpu', '--state', state, '--cc', 'off']);
    try {
      expect(gpu.settings).toEqual({
        BROKER_NVIDIA_SMI: join(state, GPU_STATE_FILES.bin, 'nvidia-smi'),
        BROKER_NVATTEST: join(state, GPU_STATE_FILES.bin, 'nvattest'),
        MOCK_TEE_GPU_ROOT: join(state, GPU_STATE_FILES.root),
      });
      const { stdout } = await promisify(execFile)(gpu.settings.BROKER_NVIDIA_SMI!, ['conf-compute', '-f']);
      expect(stdout).toBe('CC status: OFF\n');
      // The single executable's stand-in path: `mock-tee gpu-tool TOOL SOCKET ARGS…`.
      const out: string[] = [];
      const socket = join(state, GPU_STATE_FILES.socket);
      const io = { stdout: (t: string) => out.push(t), stderr: () => undefined };
      expect(await mockTeeMain(['gpu-tool', 'nvidia-smi', socket, '-L'], io)).toBe(0);
      expect(out.join('')).toMatch(/^GPU 0: NVIDIA H100 80GB HBM3 \(UUID: GPU-/);
    } finally {
      expect(await gpu.stop()).toBe(0);
    }
    const errs: string[] = [];
    const down = ['gpu-tool', 'nvattest', join(state, GPU_STATE_FILES.socket), 'version'];
    expect(await mockTeeMain(down, { stdout: () => undefined, stderr: (t) => errs.push(t) })).toBe(9);
    expect(errs.join('')).toMatch(/the simulated GPU is not running/);
  });

  it('writes stand-ins that hand the executable its tool, socket and arguments, quoted', async () => {
    const seen = join(dir, 'argv.txt');
    const exe = join(dir, "fake exe's");
    writeFileSync(exe, `#!/bin/sh\nfor a in "$@"; do printf '%s\\n' "$a"; done > '${seen}'\n`);
    chmodSync(exe, 0o755);
    const wrapper = join(dir, 'nvattest');
    writeFileSync(wrapper, toolWrapper('nvattest', "/tmp/a b'c.sock", exe));
    chmodSync(wrapper, 0o755);
    await promisify(execFile)(wrapper, ['collect-evidence', '--nonce', 'a b']);
    const { readFileSync } = await import('node:fs');
    expect(readFileSync(seen, 'utf8').split('\n').slice(0, -1)).toEqual([
      'mock-tee',
      'gpu-tool',
      'nvattest',
      "/tmp/a b'c.sock",
      'collect-evidence',
      '--nonce',
      'a b',
    ]);
  });

  it('runs the realm until stopped and prints its report root and CCA_CONFIG_FILE', async () => {
    const state = join(dir, 'cca');
    const realm = await foreground(['cca', '--state', state]);
    try {
      const env = { BROKER_TSM_REPORT_ROOT: realm.settings.BROKER_TSM_REPORT_ROOT! };
      const reportData = Buffer.alloc(48, 3);
      const evidence = await new CcaAttester({ env }).getEvidence(reportData);
      const configPath = realm.settings.CCA_CONFIG_FILE!;
      await expect(
        new CcaVerifier().evaluate(evidence, { reportData, cca: { configPath } }),
      ).resolves.toHaveLength(1);
    } finally {
      expect(await realm.stop()).toBe(0);
    }
  });
});
