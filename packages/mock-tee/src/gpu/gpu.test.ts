import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseNvidiaReport, verifyNvidiaDevice } from '@broker/verifier';
import { afterAll, describe, expect, it } from 'vitest';
import { GPU_STATE_FILES, startMockGpu } from './index.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-mock-gpu-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs a stand-in as the attester does; resolves with its output and exit code. */
async function run(path: string, args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(path, args);
    return { stdout, stderr, code: 0 };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { stdout: err.stdout, stderr: err.stderr, code: err.code };
  }
}

describe('simulated Hopper GPU', () => {
  it("answers nvidia-smi's conf-compute and list queries as the real tool prints them", async () => {
    const gpu = await startMockGpu({ stateDir: join(dir, 'smi') });
    try {
      const smi = gpu.env.BROKER_NVIDIA_SMI;
      expect(await run(smi, ['conf-compute', '-f'])).toEqual({
        stdout: 'CC status: ON\n',
        stderr: '',
        code: 0,
      });
      expect((await run(smi, ['conf-compute', '-grs'])).stdout).toBe(
        'Confidential Compute GPUs Ready state: not-ready\n',
      );
      expect((await run(smi, ['conf-compute', '-srs', '1'])).code).toBe(0);
      expect((await run(smi, ['conf-compute', '-grs'])).stdout).toBe(
        'Confidential Compute GPUs Ready state: ready\n',
      );
      expect((await run(smi, ['-L'])).stdout).toBe(
        `GPU 0: NVIDIA H100 80GB HBM3 (UUID: ${gpu.identity.uuid})\n`,
      );
      expect((await run(smi, ['--bogus'])).code).toBe(2);
      gpu.config.present = false;
      expect(await run(smi, ['conf-compute', '-f'])).toEqual({
        stdout: 'No devices were found\n',
        stderr: '',
        code: 6,
      });
    } finally {
      await gpu.close();
    }
    // With the device gone, the stand-ins say so instead of hanging.
    const down = await run(gpu.env.BROKER_NVIDIA_SMI, ['conf-compute', '-f']);
    expect(down.code).toBe(9);
    expect(down.stderr).toMatch(/the simulated GPU is not running/);
  });

  it('signs a GET_MEASUREMENTS report over the requested nonce with its test chain', async () => {
    const gpu = await startMockGpu({ stateDir: join(dir, 'nvattest'), driverVersion: '570.86.15' });
    try {
      const nonce = Buffer.alloc(32, 0xab);
      const r = await run(gpu.env.BROKER_NVATTEST, [
        'collect-evidence',
        '--device',
        'gpu',
        '--nonce',
        nonce.toString('hex'),
      ]);
      expect(r.code).toBe(0);
      const out = JSON.parse(r.stdout);
      expect(out).toMatchObject({ result_code: 0, result_message: 'Ok' });
      const [e] = out.evidences;
      expect(e).toMatchObject({ arch: 'HOPPER', nonce: nonce.toString('hex'), driver_version: '570.86.15' });
      const report = Buffer.from(e.evidence, 'base64');
      expect(parseNvidiaReport(report).request.nonce).toEqual(nonce);
      const device = { arch: e.arch, evidence: report.toString('hex'), certificate: e.certificate };
      const claims = verifyNvidiaDevice(device, nonce, { now: new Date(), trustedRoots: [gpu.rootPem] });
      expect(claims.config).toMatchObject({ driver_version: '570.86.15' });
      expect(() => verifyNvidiaDevice(device, nonce, { now: new Date() })).toThrow(
        /NVIDIA device identity root/,
      );
      // Bad arguments and a switch query fail as nvattest does.
      expect((await run(gpu.env.BROKER_NVATTEST, ['collect-evidence', '--nonce', 'abc'])).code).toBe(1);
      expect((await run(gpu.env.BROKER_NVATTEST, ['collect-evidence', '--device', 'switch'])).code).toBe(1);
      expect((await run(gpu.env.BROKER_NVATTEST, ['attest'])).code).not.toBe(0);
    } finally {
      await gpu.close();
    }
  });

  it('answers a malformed request with an error instead of a tool answer', async () => {
    const errors: unknown[] = [];
    const gpu = await startMockGpu({ stateDir: join(dir, 'hostile'), onError: (e) => errors.push(e) });
    const ask = (line: string) =>
      new Promise<string>((resolve, reject) => {
        const chunks: Buffer[] = [];
        const s = createConnection(join(gpu.stateDir, GPU_STATE_FILES.socket));
        s.on('connect', () => s.end(line));
        s.on('data', (c: Buffer) => chunks.push(c));
        s.on('end', () => resolve(Buffer.concat(chunks).toString()));
        s.on('error', reject);
      });
    try {
      for (const line of ['not json\n', '{"tool":"rm","argv":[]}\n', '{"tool":"nvattest","argv":[1]}\n']) {
        expect(JSON.parse(await ask(line))).toMatchObject({ code: 70, stdout: '' });
      }
      expect(errors).toHaveLength(3);
      expect(gpu.calls).toEqual([]);
      // A request with no end of line that outgrows the bound is dropped (end of file or reset,
      // as the kernel has it), and the device goes on serving.
      await expect(ask('x'.repeat(70 * 1024)).catch(() => '')).resolves.toBe('');
      const ok = JSON.parse(await ask('{"tool":"nvidia-smi","argv":["conf-compute","-f"]}\n'));
      expect(ok).toEqual({ stdout: 'CC status: ON\n', code: 0 });
    } finally {
      await gpu.close();
    }
  });

  it('keeps its chain and key across restarts, the key readable by the owner only', async () => {
    const stateDir = join(dir, 'restart');
    const first = await startMockGpu({ stateDir });
    await first.close();
    const second = await startMockGpu({ stateDir });
    try {
      expect(second.rootPem).toBe(first.rootPem);
      expect(second.device.fwid).toBe(first.device.fwid);
      expect(readFileSync(second.rootPath, 'utf8')).toBe(first.rootPem);
      expect(statSync(join(stateDir, GPU_STATE_FILES.attestationKey)).mode & 0o777).toBe(0o600);
    } finally {
      await second.close();
    }
  });
});
