import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Tee } from '@broker/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Attester, AttesterLogger, AttesterModule } from './attester.js';
import { AttesterNotSupported } from './attester.js';
import {
  BUILTIN_ATTESTERS,
  detectAdditionalDevices,
  detectTee,
  explainTeeDetection,
  getAttester,
  PRIMARY_DETECTION_ORDER,
} from './registry.js';
import { SampleAttester } from './sample/index.js';
import { SampleDeviceAttester } from './sample-device/index.js';

function fakeModule(tee: Tee, detect: AttesterModule['detect']): AttesterModule {
  return {
    tee,
    detect,
    create: (): Attester => ({ tee, getEvidence: async () => ({ fake: tee }) }),
  };
}

function recordingLogger(): AttesterLogger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    debug: (m) => lines.push(`debug ${m}`),
    info: (m) => lines.push(`info ${m}`),
    warn: (m) => lines.push(`warn ${m}`),
  };
}

describe('TEE detection', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'attester-'));
    await mkdir(join(root, 'dev'));
    await writeFile(join(root, 'dev', 'tdx_guest'), '');
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('follows upstream order', () => {
    expect(PRIMARY_DETECTION_ORDER).toEqual([
      'tdx',
      'sgx',
      'az-tdx-vtpm',
      'az-snp-vtpm',
      'snp',
      'csv',
      'cca',
      'se',
      'tpm',
    ]);
  });

  it('falls back to sample with a warning when no built attester detects its platform', async () => {
    const log = recordingLogger();
    // A tree with no device nodes and an empty environment: the probes find nothing.
    const empty = join(root, 'dev');
    expect(await detectTee({ logger: log, root: empty, env: {} })).toBe('sample');
    expect(log.lines.some((l) => l.startsWith('warn No TEE platform detected'))).toBe(true);
    const why = await explainTeeDetection({ root: empty, env: {} });
    expect(why.fallback).toBe(true);
    const built = new Set(['tdx', 'az-tdx-vtpm', 'az-snp-vtpm', 'snp', 'cca', 'tpm']);
    expect(why.probes.map((p) => p.outcome)).toEqual(
      PRIMARY_DETECTION_ORDER.map((tee) => (built.has(tee) ? 'absent' : 'not-built')),
    );
  });

  it('picks the first detected TEE in order, not the first module listed', async () => {
    // Listed after the built-in ones, the fakes replace them.
    const modules = [
      ...BUILTIN_ATTESTERS,
      fakeModule('tpm', async () => ({ detected: true, reason: 'tpm device' })),
      fakeModule('snp', async () => ({ detected: true, reason: 'sev-guest' })),
    ];
    const result = await explainTeeDetection({ modules });
    expect(result.tee).toBe('snp');
    expect(result.fallback).toBe(false);
    expect(result.probes.at(-1)).toEqual({ tee: 'snp', outcome: 'detected', reason: 'sev-guest' });
    expect(result.probes.find((p) => p.tee === 'tpm')).toBeUndefined();
  });

  it('resolves probe paths under the configured root', async () => {
    const tdx = fakeModule('tdx', async (ctx) =>
      (await ctx.exists('/dev/tdx_guest'))
        ? { detected: true, reason: '/dev/tdx_guest' }
        : { detected: false, reason: 'none' },
    );
    expect(await detectTee({ modules: [tdx, ...BUILTIN_ATTESTERS], root })).toBe('tdx');
    expect(await detectTee({ modules: [tdx, ...BUILTIN_ATTESTERS], root: join(root, 'dev') })).toBe('sample');
  });

  it('treats a failing probe as absent and records why', async () => {
    const broken = fakeModule('tdx', async () => {
      throw new Error('configfs unreadable');
    });
    const result = await explainTeeDetection({ modules: [...BUILTIN_ATTESTERS, broken] });
    expect(result.tee).toBe('sample');
    expect(result.probes[0]).toEqual({ tee: 'tdx', outcome: 'error', reason: 'configfs unreadable' });
  });

  it('warns that a bare TPM is not bound to a TEE', async () => {
    const log = recordingLogger();
    const tpm = fakeModule('tpm', async () => ({ detected: true, reason: '/dev/tpmrm0' }));
    expect(await detectTee({ modules: [tpm], logger: log })).toBe('tpm');
    expect(log.lines).toContain('info TEE detected: tpm (/dev/tpmrm0)');
    expect(log.lines.some((l) => l.startsWith('warn A TPM was detected'))).toBe(true);
  });

  it('detects the sample device from ENABLE_SAMPLE_DEVICE, even when empty', async () => {
    expect(await detectAdditionalDevices({ env: {} })).toEqual([]);
    expect(await detectAdditionalDevices({ env: { ENABLE_SAMPLE_DEVICE: '' } })).toEqual(['sampledevice']);
  });

  it('warns about a device whose probe fails, and stays quiet about an absent one', async () => {
    const log = recordingLogger();
    const gpu = fakeModule('nvidia', async () => {
      throw new Error('a GPU is in CC mode, but nvattest not found');
    });
    expect(await detectAdditionalDevices({ modules: [gpu], logger: log, env: {} })).toEqual([]);
    expect(log.lines).toContain(
      'warn device probe nvidia: error (a GPU is in CC mode, but nvattest not found)',
    );
    const quiet = recordingLogger();
    const absent = fakeModule('nvidia', async () => ({ detected: false, reason: 'no GPU' }));
    expect(await detectAdditionalDevices({ modules: [absent], logger: quiet, env: {} })).toEqual([]);
    expect(quiet.lines.filter((l) => l.startsWith('warn'))).toEqual([]);
  });
});

describe('getAttester', () => {
  it('returns the built-in sample attesters', async () => {
    expect(getAttester('sample')).toBeInstanceOf(SampleAttester);
    const device = getAttester('sampledevice');
    expect(device).toBeInstanceOf(SampleDeviceAttester);
    expect(await device.getEvidence(new Uint8Array([1]))).toEqual({ svn: '2', report_data: 'AQ==' });
  });

  it('refuses a TEE this build has no attester for', () => {
    expect(() => getAttester('sgx')).toThrow(AttesterNotSupported);
    expect(() => getAttester('sgx')).toThrow('no attester for TEE "sgx" in this build');
  });
});
