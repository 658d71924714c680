// Composite attestation as trustee does it: CPU evidence first, a GPU's in `additional_evidence`
// (an `nvidia` device list), each appraised with its class policy (`default_cpu`, `default_gpu`)
// into its own EAR submodule (`cpu0`, `gpu0`); and `cca` realms as a CPU TEE.
import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KvStorage, Namespace, SetOptions } from '@broker/kv-storage';
import { canonicalJson } from '@broker/protocol';
import { createTestCcaPlatform, createTestDevice, startMockNras } from '@broker/verifier/testing';
import { decodeJwt } from 'jose';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parseAttestationServiceConfig } from './config.js';
import { AttestationFailed } from './errors.js';
import { createAttestationService } from './service.js';
import type { AdditionalEvidence, VerifyRequest } from './service-api.js';

class MemoryKv implements KvStorage {
  readonly data = new Map<string, Uint8Array>();
  async get(ns: Namespace, key: string) {
    return this.data.get(`${ns}/${key}`);
  }
  async set(ns: Namespace, key: string, value: Uint8Array, options?: SetOptions) {
    if (options?.overwrite === false && this.data.has(`${ns}/${key}`)) return false;
    this.data.set(`${ns}/${key}`, value);
    return true;
  }
  async delete(ns: Namespace, key: string) {
    return this.data.delete(`${ns}/${key}`);
  }
  async list(ns: Namespace) {
    return [...this.data.keys()].filter((k) => k.startsWith(`${ns}/`)).map((k) => k.slice(ns.length + 1));
  }
  async close() {}
}

// biome-ignore lint/suspicious/noExplicitAny: the tests walk decoded token JSON
type Ear = { submods: Record<string, any> };

const logger = pino({ level: 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'composite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const key = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
const teePubkey = { kty: 'EC', crv: 'P-256', alg: 'ECDH-ES+A256KW', x: key.x, y: key.y };
const NONCE = 'Y29tcG9zaXRlIG5vbmNl';
const sha384 = (o: unknown) => createHash('sha384').update(canonicalJson(o)).digest();

const device = createTestDevice();
writeFileSync(join(dir, 'device-root.pem'), device.rootPem);

/** The guest's side: the GPU report binds H({nonce, tee-pubkey}), the CPU's binds the GPU evidence too. */
function compositeRequest(
  gpuNonce = sha384({ nonce: NONCE, 'tee-pubkey': teePubkey }).subarray(0, 32),
  nvidia: (nonce: Buffer) => unknown = (nonce) => device.evidence(nonce),
): VerifyRequest {
  const additionalText = JSON.stringify({ nvidia: nvidia(gpuNonce) });
  const runtimeData = { 'additional-evidence': additionalText, nonce: NONCE, 'tee-pubkey': teePubkey };
  const additional: AdditionalEvidence[] = [
    {
      tee: 'nvidia',
      evidence: JSON.parse(additionalText).nvidia,
      runtimeData: { nonce: NONCE, 'tee-pubkey': teePubkey },
    },
  ];
  return {
    tee: 'sample',
    evidence: { svn: '1', report_data: sha384(runtimeData).toString('base64') },
    runtimeData,
    runtimeDataHashAlgorithm: 'sha384',
    initData: null,
    additional,
    policyIds: ['default'],
  };
}

async function service(
  nvidia: Record<string, unknown> = { trusted_root_paths: [join(dir, 'device-root.pem')] },
) {
  const cfg = parseAttestationServiceConfig({ verifier_config: { nvidia_verifier: nvidia } });
  return createAttestationService(cfg, new MemoryKv(), logger);
}

describe('composite CPU + GPU attestation', () => {
  it('gives cpu0 and gpu0 submodules; default_gpu leaves local GPU claims contraindicated, as trustee', async () => {
    const as = await service();
    const ear = decodeJwt(await as.verify(compositeRequest())) as Ear;
    expect(Object.keys(ear.submods).sort()).toEqual(['cpu0', 'gpu0']);
    const gpu = ear.submods.gpu0;
    expect(gpu['ear.status']).toBe('contraindicated');
    expect(JSON.stringify(gpu)).toContain(device.fwid);
  });

  it('a gpu policy (default_gpu) that accepts the driver makes gpu0 affirming', async () => {
    const as = await service();
    await as.setPolicy(
      'default_gpu',
      `package policy
import rego.v1
default hardware := 97
hardware := 2 if input.nvidia.config.driver_version == "550.90.07"
trust_claims := {"hardware": hardware}
`,
    );
    const ear = decodeJwt(await as.verify(compositeRequest())) as Ear;
    expect(ear.submods.gpu0['ear.trustworthiness-vector'].hardware).toBe(2);
  });

  it('a GPU report bound to another nonce fails the whole attestation, naming the device check', async () => {
    const as = await service();
    const e = await as.verify(compositeRequest(Buffer.alloc(32, 9))).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(AttestationFailed);
    expect((e as Error).message).toMatch(/nvidia evidence rejected: NVIDIA report nonce/);
  });

  it('without the simulated root in trusted_root_paths the GPU is refused', async () => {
    const as = await service({});
    const e = await as.verify(compositeRequest()).catch((x: unknown) => x);
    expect((e as Error).message).toMatch(/NVIDIA certificate chain/);
  });

  it('nvidia_verifier type "Remote" sends the GPU to NRAS (a local mock) and takes its token claims', async () => {
    const nras = await startMockNras();
    try {
      const as = await service({ type: 'Remote', verifier_url: nras.url, jwks_url: nras.jwksUrl });
      const ear = decodeJwt(await as.verify(compositeRequest())) as Ear;
      expect(ear.submods.gpu0['ear.veraison.annotated-evidence'].nvidia).toMatchObject({
        'x-nvidia-gpu-attestation-report-nonce-match': true,
      });
      expect(nras.requests).toHaveLength(1);
      const e = await as.verify(compositeRequest(Buffer.alloc(32, 9))).catch((x: unknown) => x);
      expect((e as Error).message).toMatch(/NRAS: the device report nonce is not ours/);
    } finally {
      await nras.close();
    }
  });
});

describe("NVSwitch and PPCIE devices, with trustee's default_switch and default_ppcie", () => {
  // Eight Hopper GPUs and four LS10 NVSwitches (the same test report, which NRAS parses), each NRAS token
  // naming the same links: the GPUs' four switches and the switches' eight GPUs, a PPCIE topology.
  const pdi = (kind: string, i: number) => `${kind}${String(i).padStart(15, '0')}`;
  const switchPdis = [0, 1, 2, 3].map((i) => pdi('s', i));
  const gpuPdis = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => pdi('g', i));
  const topology = (nonce: Buffer) => {
    const [one] = device.evidence(nonce).device_evidence_list as Record<string, string>[];
    return {
      device_evidence_list: [
        ...gpuPdis.map((_, i) => ({ ...one, uuid: `GPU-${i}` })),
        ...switchPdis.map((_, i) => ({ ...one, arch: 'LS10', uuid: `SWITCH-${i}` })),
      ],
    };
  };

  it('appraises switch0..3 with default_switch and the topology as ppcie0 with default_ppcie', async () => {
    const nras = await startMockNras();
    nras.tamper = {
      payload: {
        'x-nvidia-gpu-switch-pdis': switchPdis,
        'x-nvidia-switch-pdi': switchPdis[0],
        'x-nvidia-switch-gpu-pdis': gpuPdis,
        // What default_switch's hardware rule asks of a switch NRAS verified.
        'x-nvidia-switch-attestation-report-cert-chain': {
          'x-nvidia-cert-ocsp-status': 'good',
          'x-nvidia-cert-status': 'valid',
        },
        'x-nvidia-switch-attestation-report-cert-chain-fwid-match': true,
        'x-nvidia-switch-attestation-report-parsed': true,
        'x-nvidia-switch-attestation-report-signature-verified': true,
        'x-nvidia-switch-arch-check': true,
      },
    };
    try {
      const as = await service({ type: 'Remote', verifier_url: nras.url, jwks_url: nras.jwksUrl });
      const ear = decodeJwt(await as.verify(compositeRequest(undefined, topology))) as Ear;
      expect(Object.keys(ear.submods).sort()).toEqual(
        [
          'cpu0',
          ...gpuPdis.map((_, i) => `gpu${i}`),
          'ppcie0',
          'switch0',
          'switch1',
          'switch2',
          'switch3',
        ].sort(),
      );
      expect(nras.requests).toHaveLength(12);
      // default_switch: a switch that NRAS verified is trusted hardware; default_gpu does not read
      // the switch claims, so the GPUs keep its default.
      expect(ear.submods.switch3['ear.trustworthiness-vector'].hardware).toBe(2);
      expect(ear.submods.gpu0['ear.trustworthiness-vector'].hardware).toBe(97);
      // default_ppcie: a topology that was found is a valid configuration, and nothing else is claimed.
      expect(ear.submods.ppcie0['ear.veraison.annotated-evidence'].nvidia).toEqual({
        switch_count: 4,
        gpu_count: 8,
      });
      expect(ear.submods.ppcie0['ear.trustworthiness-vector']).toMatchObject({
        configuration: 2,
        hardware: 0,
      });
      expect(ear.submods.ppcie0['ear.status']).toBe('affirming');
    } finally {
      await nras.close();
    }
  });
});

describe('nvidia_verifier settings', () => {
  it('trusted_root_paths must be absolute paths of certificate files; a broken one stops the start', async () => {
    await expect(service({ trusted_root_paths: ['device-root.pem'] })).rejects.toThrow(
      /not an absolute path/,
    );
    await expect(service({ trusted_root_paths: [join(dir, 'missing.pem')] })).rejects.toThrow(
      /trusted_root_paths: cannot open/,
    );
    writeFileSync(join(dir, 'not-a-cert.pem'), 'hello');
    await expect(service({ trusted_root_paths: [join(dir, 'not-a-cert.pem')] })).rejects.toThrow(
      /holds no PEM certificate/,
    );
  });
});

describe('cca as a CPU TEE', () => {
  const saved = process.env.CCA_CONFIG_FILE;
  afterEach(() => {
    if (saved === undefined) delete process.env.CCA_CONFIG_FILE;
    else process.env.CCA_CONFIG_FILE = saved;
  });

  it("verifies a realm token with the stores trustee's CCA_CONFIG_FILE names, giving cpu0", async () => {
    const platform = createTestCcaPlatform();
    writeFileSync(join(dir, 'ta.json'), platform.taStoreJson);
    writeFileSync(join(dir, 'rv.json'), platform.rvStoreJson);
    writeFileSync(
      join(dir, 'cca.json'),
      JSON.stringify({
        'cca-verifier': { type: 'local', 'ta-store': join(dir, 'ta.json'), 'rv-store': join(dir, 'rv.json') },
      }),
    );
    process.env.CCA_CONFIG_FILE = join(dir, 'cca.json');
    const runtimeData = { 'additional-evidence': '', nonce: NONCE, 'tee-pubkey': teePubkey };
    const as = await service({});
    const req: VerifyRequest = {
      tee: 'cca',
      evidence: { token: [...platform.token(sha384(runtimeData))] },
      runtimeData,
      runtimeDataHashAlgorithm: 'sha384',
      initData: null,
      additional: [],
      policyIds: ['default'],
    };
    const ear = decodeJwt(await as.verify(req)) as Ear;
    expect(Object.keys(ear.submods)).toEqual(['cpu0']);
    const other = { ...req, evidence: { token: [...platform.token(Buffer.alloc(48, 1))] } };
    expect(((await as.verify(other).catch((x: unknown) => x)) as Error).message).toMatch(
      /CCA realm challenge/,
    );
  });
});
