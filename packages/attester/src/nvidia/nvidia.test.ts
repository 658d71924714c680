import { createHash } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type MockGpu, startMockGpu } from '@broker/mock-tee';
import { NvidiaVerifier, VerificationError } from '@broker/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttesterError, type AttesterLogger } from '../attester.js';
import { platformContext } from '../platform.js';
import { detectAdditionalDevices, getAttester } from '../registry.js';
import {
  MAX_NVIDIA_DEVICES,
  NvidiaAttester,
  type NvidiaEvidence,
  nvidiaModule,
  nvidiaNonce,
  parseCcStatus,
} from './index.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-nvidia-attester-'));
let gpu: MockGpu;
const verifier = new NvidiaVerifier();
const sha384 = (s: string) => createHash('sha384').update(s).digest();

beforeAll(async () => {
  gpu = await startMockGpu({ stateDir: join(dir, 'gpu') });
});
afterAll(async () => {
  await gpu?.close();
  rmSync(dir, { recursive: true, force: true });
});

const env = () => ({ PATH: process.env.PATH, ...gpu.env });
const attester = (timeoutMs?: number) =>
  new NvidiaAttester({ env: env(), ...(timeoutMs !== undefined && { timeoutMs }) });

function script(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
  throw new Error('verification succeeded');
}

function nvattestJson(evidences: unknown[], extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ evidences, result_code: 0, result_message: 'Ok', ...extra });
}

/** One well-formed nvattest evidence entry for `nonce`, with members overridden. */
function entry(nonce: Buffer, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    version: '1.0',
    arch: 'HOPPER',
    nonce: nonce.toString('hex'),
    evidence: gpu.device.report(nonce).toString('base64'),
    certificate: Buffer.from(gpu.device.chainPem).toString('base64'),
    ...over,
  };
}

describe('nvidia attester on the simulated Hopper', () => {
  it('collects evidence the nvidia verifier accepts with the test root, and only with it', async () => {
    // What the KBS client hands a device: SHA-384 of the runtime data, 48 bytes; the GPU signs the first 32.
    const reportData = sha384('{"nonce":"n","tee-pubkey":{}}');
    const evidence = await attester().getEvidence(reportData);
    expect(gpu.calls.at(-1)).toEqual({
      tool: 'nvattest',
      argv: ['collect-evidence', '--device', 'gpu', '--nonce', reportData.subarray(0, 32).toString('hex')],
    });
    expect(evidence.device_evidence_list).toHaveLength(1);
    const [device] = evidence.device_evidence_list;
    expect(Object.keys(device!)).toEqual(['arch', 'uuid', 'evidence', 'certificate']);
    expect(device).toMatchObject({ arch: 'HOPPER', uuid: 'unknown' });
    expect(device!.evidence).toMatch(/^(?:[0-9a-f]{2})+$/);
    expect(Buffer.from(device!.certificate, 'base64').toString()).toBe(gpu.device.chainPem);
    const [result] = await verifier.evaluate(evidence, {
      reportData,
      nvidia: { trustedRoots: [gpu.rootPem] },
    });
    expect(result).toMatchObject({ class: 'gpu', claims: { arch: 'Hopper', uuid: 'unknown' } });
    expect((result!.claims as { config: { driver_version: string } }).config.driver_version).toBe(
      gpu.identity.driverVersion,
    );
    // NVIDIA's pinned root only: the simulated device is refused (fail closed).
    expect(await refusal(verifier.evaluate(evidence, { reportData }))).toBe('CERT_CHAIN_INVALID');
    expect(
      await refusal(
        verifier.evaluate(evidence, { reportData: sha384('other'), nvidia: { trustedRoots: [gpu.rootPem] } }),
      ),
    ).toBe('REPORT_DATA_MISMATCH');
  });

  it('zero-pads short report data to the 32-byte nonce and cuts long report data', async () => {
    expect(nvidiaNonce(Buffer.from('abc'))).toEqual(Buffer.concat([Buffer.from('abc'), Buffer.alloc(29)]));
    const sha512 = createHash('sha512').update('x').digest();
    expect(nvidiaNonce(sha512)).toEqual(sha512.subarray(0, 32));
    const evidence = await attester().getEvidence(Buffer.from('abc'));
    await expect(
      verifier.evaluate(evidence, {
        reportData: Buffer.from('abc'),
        nvidia: { trustedRoots: [gpu.rootPem] },
      }),
    ).resolves.toHaveLength(1);
  });

  it('is what the registry builds for nvidia', async () => {
    const built = getAttester('nvidia', { env: env() });
    expect(built).toBeInstanceOf(NvidiaAttester);
    const evidence = (await built.getEvidence(sha384('r'))) as NvidiaEvidence;
    expect(evidence.device_evidence_list).toHaveLength(1);
  });
});

describe('nvidia detection', () => {
  const detect = (e: Record<string, string | undefined>) => nvidiaModule.detect(platformContext({ env: e }));

  it('detects a GPU whose CC status is ON', async () => {
    expect(await detect(env())).toEqual({
      detected: true,
      reason: 'nvidia-smi conf-compute -f: CC status ON; nvattest runs',
    });
    expect(gpu.calls.slice(-2)).toEqual([
      { tool: 'nvidia-smi', argv: ['conf-compute', '-f'] },
      { tool: 'nvattest', argv: ['version'] },
    ]);
    expect(await detectAdditionalDevices({ env: env() })).toEqual(['nvidia']);
  });

  it('finds nothing, without an error, when there is no driver, no GPU or CC is off', async () => {
    const none = await detect({ PATH: join(dir, 'empty-path') });
    expect(none.detected).toBe(false);
    expect(none.reason).toMatch(/^nvidia-smi not found/);
    expect((await detect({ BROKER_NVIDIA_SMI: join(dir, 'missing') })).detected).toBe(false);
    gpu.config.present = false;
    try {
      const r = await detect(env());
      expect(r).toEqual({ detected: false, reason: 'nvidia-smi conf-compute -f exited 6' });
    } finally {
      gpu.config.present = true;
    }
    gpu.config.ccStatus = 'OFF';
    try {
      expect(await detect(env())).toEqual({
        detected: false,
        reason: 'nvidia-smi conf-compute -f: CC status OFF',
      });
      expect(await detectAdditionalDevices({ env: env() })).toEqual([]);
    } finally {
      gpu.config.ccStatus = 'ON';
    }
  });

  it('fails the probe (a warning) when a CC GPU has no nvattest, or nvidia-smi prints no status', async () => {
    const lines: string[] = [];
    const log: AttesterLogger = { debug() {}, info() {}, warn: (m) => lines.push(m) };
    const noNvattest = { ...env(), BROKER_NVATTEST: join(dir, 'no-nvattest') };
    await expect(detect(noNvattest)).rejects.toThrow(/^a GPU is in CC mode, but nvattest not found/);
    expect(await detectAdditionalDevices({ env: noNvattest, logger: log })).toEqual([]);
    expect(lines).toEqual([expect.stringMatching(/^device probe nvidia: error \(a GPU is in CC mode/)]);
    gpu.once('nvidia-smi', { stdout: 'Confidential Compute: whatever\n', code: 0 });
    await expect(detect(env())).rejects.toThrow('printed no "CC status" line');
    // An AttesterError with a code, not a bare Error.
    await expect(detect(noNvattest)).rejects.toSatisfy(
      (e) => e instanceof AttesterError && e.code === 'DETECTION_FAILED',
    );
  });

  it('reads the CC status line as nvidia-smi prints it', () => {
    expect(parseCcStatus('CC status: ON\n')).toBe('ON');
    expect(parseCcStatus('\nCC status:   OFF  \n')).toBe('OFF');
    expect(parseCcStatus('CC status ON\n')).toBeUndefined();
  });
});

describe('nvidia attester refuses what nvattest should not have printed', () => {
  const nonce = sha384('hostile').subarray(0, 32);
  const collect = () => attester().getEvidence(nonce);
  const answer = (stdout: string, code = 0) => gpu.once('nvattest', { stdout, code });

  it.each([
    ['not JSON', 'evidence: EeAB', /did not print JSON/],
    ['an array', '[]', /did not print a JSON object/],
    ['no evidences', JSON.stringify({ result_code: 0 }), /printed no evidences array/],
    ['an empty list', nvattestJson([]), /found no GPU/],
    [
      'a non-zero result_code',
      nvattestJson([], { result_code: 7, result_message: 'NVML error' }),
      /result_code 7 \(NVML error\)/,
    ],
  ])('%s', async (_what, stdout, message) => {
    answer(stdout);
    // An answer that is not a JSON object is asked again with --format json (nvattest 1.0).
    if (!stdout.startsWith('{')) answer(stdout);
    await expect(collect()).rejects.toThrow(message);
  });

  it('too many devices', async () => {
    answer(nvattestJson(Array.from({ length: MAX_NVIDIA_DEVICES + 1 }, () => entry(nonce))));
    await expect(collect()).rejects.toThrow(`more than ${MAX_NVIDIA_DEVICES} GPUs`);
  });

  it.each([
    ['an entry that is not an object', () => 'x', /evidence 0 is not an object/],
    ['an unknown arch', () => entry(nonce, { arch: 'AMPERE' }), /arch "AMPERE" is not a known GPU/],
    ['a switch', () => entry(nonce, { arch: 'LS10' }), /arch "LS10" is not a known GPU/],
    [
      'a nonce member for another nonce',
      () => entry(nonce, { nonce: '00'.repeat(32) }),
      /collected for another nonce/,
    ],
    [
      'a report for another nonce',
      () => entry(nonce, { evidence: gpu.device.report(Buffer.alloc(32, 1)).toString('base64') }),
      /report's request carries another nonce/,
    ],
    ['evidence that is not base64', () => entry(nonce, { evidence: 'EeAB!!' }), /not standard base64/],
    [
      'evidence that is not SPDM 1.x',
      () => entry(nonce, { evidence: Buffer.alloc(64, 0x20).toString('base64') }),
      /not an SPDM 1.x GET_MEASUREMENTS report/,
    ],
    [
      'evidence that is no GET_MEASUREMENTS request',
      () => entry(nonce, { evidence: Buffer.alloc(64, 0x11).toString('base64') }),
      /not an SPDM 1.x GET_MEASUREMENTS report/,
    ],
    [
      'a certificate that is not a PEM chain',
      () => entry(nonce, { certificate: Buffer.from('not a chain').toString('base64') }),
      /certificate is not the base64 of a PEM certificate chain/,
    ],
    ['a uuid that is not a string', () => entry(nonce, { uuid: 7 }), /uuid is not a string/],
    ['a missing certificate', () => entry(nonce, { certificate: undefined }), /certificate is not a string/],
  ])('%s', async (_what, make, message) => {
    answer(nvattestJson([make()]));
    await expect(collect()).rejects.toThrow(message);
  });

  it('asks again with --format json when nvattest (1.0) answers in text', async () => {
    gpu.once('nvattest', { stdout: 'GPU evidence collected: 1 device\n', code: 0 });
    answer(nvattestJson([entry(nonce)]));
    const before = gpu.calls.length;
    await expect(collect()).resolves.toMatchObject({ device_evidence_list: [{ arch: 'HOPPER' }] });
    expect(gpu.calls.slice(before).map((c) => c.argv.slice(5))).toEqual([[], ['--format', 'json']]);
    // Text twice is refused.
    gpu.once('nvattest', { stdout: 'text\n', code: 0 });
    answer('still text');
    await expect(collect()).rejects.toThrow('did not print JSON');
  });

  it('passes a later SPDM 1.x report (a Blackwell) on: the verifier, not the attester, judges it', async () => {
    const report = gpu.device.report(nonce);
    report[0] = 0x12;
    answer(nvattestJson([entry(nonce, { arch: 'BLACKWELL', evidence: report.toString('base64') })]));
    const evidence = await collect();
    expect(evidence.device_evidence_list[0]).toMatchObject({
      arch: 'BLACKWELL',
      evidence: report.toString('hex'),
    });
  });

  it('keeps a uuid the tool gives and upper-cases the arch', async () => {
    answer(nvattestJson([entry(nonce, { arch: 'Hopper', uuid: 'GPU-1234' })]));
    const evidence = await collect();
    expect(evidence.device_evidence_list[0]).toMatchObject({ arch: 'HOPPER', uuid: 'GPU-1234' });
  });

  it("reports nvattest's own failure: its result message, else its stderr and exit code", async () => {
    gpu.config.ccStatus = 'OFF';
    try {
      await expect(collect()).rejects.toThrow(
        'NVIDIA Attester: nvattest collect-evidence failed: result_code 13 (GPU is not in confidential computing mode)',
      );
    } finally {
      gpu.config.ccStatus = 'ON';
    }
    gpu.once('nvattest', { stdout: '', stderr: 'libnvidia-ml.so.1: cannot open shared object\n', code: 127 });
    await expect(collect()).rejects.toThrow(
      'nvattest collect-evidence exited 127: libnvidia-ml.so.1: cannot open shared object',
    );
  });

  it('gives up on a hung nvattest and on one that prints without end', async () => {
    const hung = script('hung-nvattest', 'exec sleep 30');
    await expect(
      new NvidiaAttester({ env: { BROKER_NVATTEST: hung }, timeoutMs: 300 }).getEvidence(nonce),
    ).rejects.toThrow('nvattest collect-evidence did not finish in 300 ms');
    const flood = script('flood-nvattest', 'exec yes');
    await expect(new NvidiaAttester({ env: { BROKER_NVATTEST: flood } }).getEvidence(nonce)).rejects.toThrow(
      'nvattest printed more than 4194304 bytes',
    );
    await expect(
      new NvidiaAttester({ env: { BROKER_NVATTEST: join(dir, 'none') } }).getEvidence(nonce),
    ).rejects.toThrow(/^NVIDIA Attester: nvattest not found/);
    await expect(
      new NvidiaAttester({ env: { BROKER_NVATTEST: 'nvattest' } }).getEvidence(nonce),
    ).rejects.toThrow('BROKER_NVATTEST must be an absolute path');
  });
});
