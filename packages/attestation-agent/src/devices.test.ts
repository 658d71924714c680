// The agent with a confidential GPU beside its TEE (the mock TEE's simulated Hopper): detection at
// start, GetAdditionalTees and GetAdditionalEvidence over the real socket, and a GPU whose tools are
// missing left out with a warning rather than failing the start.
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AttestationAgentClient } from '@broker/guest-api';
import { type MockGpu, startMockGpu } from '@broker/mock-tee';
import { NvidiaVerifier } from '@broker/verifier';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_AA_CONFIG } from './config.js';
import { type RunningAttestationAgent, startAttestationAgent } from './start.js';
import { LogCapture } from './testing/kbs.js';

let dir: string;
let gpu: MockGpu;
let running: RunningAttestationAgent | undefined;
let client: AttestationAgentClient | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-devices-'));
  gpu = await startMockGpu({ stateDir: join(dir, 'gpu') });
});
afterEach(async () => {
  client?.close();
  client = undefined;
  await running?.close();
  running = undefined;
});
afterAll(async () => {
  await gpu?.close();
  await rm(dir, { recursive: true, force: true });
});

async function start(
  env: Record<string, string | undefined>,
  logs: LogCapture,
): Promise<AttestationAgentClient> {
  running = await startAttestationAgent({
    config: DEFAULT_AA_CONFIG,
    socketPath: join(dir, 'aa.sock'),
    logger: pino({ level: 'debug' }, logs),
    detect: { env },
  });
  client = await AttestationAgentClient.connect(`unix://${running.socketPath}`);
  return client;
}

describe('attestation agent with a confidential GPU', () => {
  it('reports nvidia as an additional TEE and serves its evidence for the runtime data', async () => {
    const logs = new LogCapture();
    const aa = await start({ PATH: process.env.PATH, ...gpu.env }, logs);
    expect(await aa.getTeeType()).toBe('sample');
    expect(await aa.getAdditionalTees()).toEqual(['nvidia']);
    const runtimeData = createHash('sha384').update('device runtime data').digest();
    const map = JSON.parse(Buffer.from(await aa.getAdditionalEvidence(runtimeData)).toString()) as Record<
      string,
      unknown
    >;
    expect(Object.keys(map)).toEqual(['nvidia']);
    const [result] = await new NvidiaVerifier().evaluate(map.nvidia, {
      reportData: runtimeData,
      nvidia: { trustedRoots: [gpu.rootPem] },
    });
    expect(result?.class).toBe('gpu');
    expect(logs.messages()).toContain('additional attestable devices');
  });

  it('leaves a GPU out, with a warning, when its evidence tool is missing; no GPU gives empty evidence', async () => {
    const logs = new LogCapture();
    const aa = await start({ PATH: process.env.PATH, ...gpu.env, BROKER_NVATTEST: join(dir, 'none') }, logs);
    expect(await aa.getAdditionalTees()).toEqual([]);
    expect(Buffer.from(await aa.getAdditionalEvidence(Buffer.from('x'))).length).toBe(0);
    const warnings = logs.lines
      .map((l) => JSON.parse(l) as { level: number; msg: string })
      .filter((l) => l.level === 40)
      .map((l) => l.msg);
    expect(
      warnings.some((m) =>
        m.startsWith('device probe nvidia: error (a GPU is in CC mode, but nvattest not found'),
      ),
    ).toBe(true);
  });
});
