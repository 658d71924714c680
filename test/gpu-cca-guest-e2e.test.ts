// The guest side of GPU and Arm CCA attestation, with real processes: the shipped
// attestation-agent, confidential-data-hub and api-server-rest on the mock SNP device plus the
// simulated Hopper (its nvidia-smi and nvattest stand-ins), and on the simulated CCA realm
// (configfs-tsm `arm_cca_guest`); the shipped KBS trusts the GPU's test root only through
// `nvidia_verifier.trusted_root_paths` and the realm's CPAK only through CCA_CONFIG_FILE. The
// agent detects the GPU itself, sends its evidence in `additional_evidence`, and the resource is
// released only while cpu0 and gpu0 are both affirming.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  type MockCcaDevice,
  type MockGpu,
  type MockSnpDevice,
  startMockCcaDevice,
  startMockGpu,
  startMockSnpDevice,
} from '@broker/mock-tee';
import { verifyNvidiaDevice } from '@broker/verifier';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, type Running, start, waitForListen } from './helpers/process.js';
import {
  type GuestHandle,
  guestConfig,
  type KbsHandle,
  mustSucceed,
  prepareKbs,
  startApiServerRest,
  startGuest,
} from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-gpu-cca-guest-'));
const gpuSecret = randomBytes(32);
const realmSecret = randomBytes(32);
let kbs: KbsHandle;
let snp: MockSnpDevice;
let gpu: MockGpu;
let realm: MockCcaDevice;

// GPU resources need both devices affirming; the realm's key only its CPU.
const RESOURCE_POLICY = `package policy
import rego.v1
default allow := false
allow if {
  input.submods.cpu0["ear.status"] == "affirming"
  input.submods.gpu0["ear.status"] == "affirming"
}
allow if {
  data["resource-path"] == ["default", "realm", "key"]
  input.submods.cpu0["ear.status"] == "affirming"
}
`;

// The operator's GPU appraisal of local claims: a verified Hopper running an allowed driver.
const GPU_POLICY = `package policy
import rego.v1
default hardware := 97
default executables := 33
default configuration := 36
hardware := 2 if input.nvidia.arch == "Hopper"
executables := 2 if count(input.nvidia.measurements) > 0
configuration := 2 if input.nvidia.config.driver_version in query_reference_value("allowed_driver_versions")
trust_claims := {"hardware": hardware, "executables": executables, "configuration": configuration}
`;

// trustee's default_cpu has no CCA rules: the operator's realm appraisal (a token that verified
// with the TA and RV stores, an allowed realm initial measurement, initdata the KBS found bound to
// the personalization value).
const CCA_POLICY = `package policy
import rego.v1
default hardware := 97
default executables := 33
default configuration := 36
hardware := 2 if input.cca.platform["cca-platform-implementation-id"]
executables := 2 if input.cca.realm["cca-realm-initial-measurement"] in query_reference_value("cca_realm_rim")
configuration := 2 if input.init_data_claims["aa.toml"]
trust_claims := {"hardware": hardware, "executables": executables, "configuration": configuration}
`;

type Ear = { submods: Record<string, Record<string, unknown>> };

beforeAll(async () => {
  mkdirSync(join(dir, 'kbs'), { recursive: true });
  kbs = await prepareKbs(join(dir, 'kbs'));
  snp = await startMockSnpDevice({ stateDir: join(dir, 'snp'), rootKeyBits: 2048 });
  gpu = await startMockGpu({ stateDir: join(dir, 'gpu'), driverVersion: '550.90.07' });
  realm = await startMockCcaDevice({ stateDir: join(dir, 'realm') });
  appendFileSync(
    kbs.configPath,
    `
[attestation_service.verifier_config.nvidia_verifier]
type = "Local"
trusted_root_paths = ["${gpu.rootPath}"]

[attestation_service.verifier_config.snp_verifier]
trusted_ark_paths = ["${snp.rootsBundlePath}"]
`,
  );
  // The KBS inherits this process's environment: CCA_CONFIG_FILE names the realm's stores.
  const before = process.env.CCA_CONFIG_FILE;
  process.env.CCA_CONFIG_FILE = realm.verifierConfigPath;
  try {
    await kbs.start();
  } finally {
    if (before === undefined) delete process.env.CCA_CONFIG_FILE;
    else process.env.CCA_CONFIG_FILE = before;
  }
  writeFileSync(join(dir, 'gpu-secret.bin'), gpuSecret);
  writeFileSync(join(dir, 'realm-secret.bin'), realmSecret);
  await mustSucceed(
    kbs.admin('set-resource', '--path', 'default/gpu/key', '--resource-file', join(dir, 'gpu-secret.bin')),
  );
  await mustSucceed(
    kbs.admin(
      'set-resource',
      '--path',
      'default/realm/key',
      '--resource-file',
      join(dir, 'realm-secret.bin'),
    ),
  );
  writeFileSync(join(dir, 'resource.rego'), RESOURCE_POLICY);
  await mustSucceed(kbs.admin('set-resource-policy', '--policy-file', join(dir, 'resource.rego')));
  writeFileSync(join(dir, 'gpu.rego'), GPU_POLICY);
  await mustSucceed(
    kbs.admin('set-attestation-policy', '--id', 'default_gpu', '--policy-file', join(dir, 'gpu.rego')),
  );
  const tcb = snp.roots.tcb;
  const rvs: string[][] = [
    ['snp_launch_measurement', Buffer.from(snp.config.measurement).toString('hex')],
    ['snp_bootloader', String(tcb.bootloader), '--as-integer'],
    ['snp_microcode', String(tcb.microcode), '--as-integer'],
    ['snp_snp_svn', String(tcb.snp), '--as-integer'],
    ['snp_tee_svn', String(tcb.tee), '--as-integer'],
    ['allowed_driver_versions', '550.90.07'],
  ];
  for (const rv of rvs) await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
}, 180_000);

afterAll(async () => {
  await kbs?.stop();
  snp?.close();
  await gpu?.close();
  realm?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function text(res: Response): Promise<{ status: number; body: Buffer }> {
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
}

function earOf(tokenResponse: Buffer): Ear {
  return decodeJwt((JSON.parse(tokenResponse.toString()) as { token: string }).token) as unknown as Ear;
}

/** The SNP guest's components, its HOST_DATA bound to the initdata it is launched with. */
async function snpGuest(name: string, env: Record<string, string>): Promise<GuestHandle> {
  const gdir = join(dir, name);
  snp.config.hostData = createHash('sha256').update(guestConfig(kbs, gdir).initdata).digest();
  return startGuest(kbs, gdir, { env });
}

describe('SNP guest with a confidential GPU: attestation-agent → KBS → resource', () => {
  let guest: GuestHandle;
  beforeAll(async () => {
    guest = await snpGuest('snp-gpu', { ...snp.env, ...gpu.env, RUST_LOG: 'debug' });
  }, 120_000);
  afterAll(async () => {
    await guest?.stop();
  });

  it('detects snp and the GPU, and gets a token with cpu0 and gpu0 affirming', async () => {
    expect(guest.aa.output()).toContain('TEE detected: snp');
    expect(guest.aa.output()).toMatch(/"devices":\["nvidia"\].*additional attestable devices/);
    const calls = gpu.calls.length;
    const token = await text(await guest.get('/aa/token?token_type=kbs'));
    expect(token.status, token.body.toString()).toBe(200);
    const ear = earOf(token.body);
    expect(Object.keys(ear.submods).sort()).toEqual(['cpu0', 'gpu0']);
    expect(ear.submods.cpu0!['ear.status']).toBe('affirming');
    expect(ear.submods.gpu0!['ear.status']).toBe('affirming');
    const gpuClaims = ear.submods.gpu0!['ear.veraison.annotated-evidence'] as {
      nvidia: { arch: string; uuid: string; config: { driver_version: string } };
    };
    expect(gpuClaims.nvidia).toMatchObject({
      arch: 'Hopper',
      uuid: 'unknown',
      config: { driver_version: '550.90.07' },
    });
    // One nvattest run per token, for the nonce the KBS client derived (SHA-384, first 32 bytes).
    const runs = gpu.calls.slice(calls).filter((c) => c.tool === 'nvattest');
    expect(runs).toHaveLength(1);
    expect(runs[0]!.argv.slice(0, 4)).toEqual(['collect-evidence', '--device', 'gpu', '--nonce']);
    expect(runs[0]!.argv[4]).toMatch(/^[0-9a-f]{64}$/);
  }, 90_000);

  it('refuses the GPU resource while gpu0 is not affirming (the driver is not allowed), then releases it', async () => {
    // The data hub keeps a token until the KBS refuses it: this is its first request.
    await mustSucceed(kbs.admin('set-sample-reference-value', 'allowed_driver_versions', '999.0'));
    try {
      const token = await text(await guest.get('/aa/token?token_type=kbs'));
      expect(token.status).toBe(200);
      const ear = earOf(token.body);
      expect(ear.submods.cpu0!['ear.status']).toBe('affirming');
      expect(ear.submods.gpu0!['ear.status']).not.toBe('affirming');
      const denied = await guest.get('/cdh/resource/default/gpu/key');
      expect(denied.status).not.toBe(200);
    } finally {
      await mustSucceed(kbs.admin('set-sample-reference-value', 'allowed_driver_versions', '550.90.07'));
    }
    // Refused again, the data hub attests anew and now gets the key.
    const res = await text(await guest.get('/cdh/resource/default/gpu/key'));
    expect(res.status, res.body.toString()).toBe(200);
    expect(res.body).toEqual(gpuSecret);
  }, 90_000);

  it('fails the token when the GPU leaves CC mode after detection (no evidence, no token)', async () => {
    gpu.config.ccStatus = 'OFF';
    try {
      const res = await text(await guest.get('/aa/token?token_type=kbs'));
      expect(res.status).not.toBe(200);
      expect(guest.aa.output()).toContain('GPU is not in confidential computing mode');
    } finally {
      gpu.config.ccStatus = 'ON';
    }
  }, 90_000);
});

describe('SNP guest without a GPU', () => {
  it('attests its CPU alone (no additional evidence, no error), and the GPU resource stays closed', async () => {
    // No driver userland at all: nvidia-smi is found nowhere.
    const guest = await snpGuest('snp-only', { ...snp.env, BROKER_NVIDIA_SMI: join(dir, 'no-nvidia-smi') });
    try {
      expect(guest.aa.output()).not.toContain('additional attestable devices');
      const token = await text(await guest.get('/aa/token?token_type=kbs'));
      expect(token.status, token.body.toString()).toBe(200);
      const ear = earOf(token.body);
      expect(Object.keys(ear.submods)).toEqual(['cpu0']);
      expect(ear.submods.cpu0!['ear.status']).toBe('affirming');
      const res = await guest.get('/cdh/resource/default/gpu/key');
      expect(res.status).not.toBe(200);
    } finally {
      await guest.stop();
    }
  }, 120_000);
});

interface RealmGuest {
  aa: Running;
  cdh: Running;
  rest: Running;
  get(path: string): Promise<Response>;
  stop(): Promise<void>;
}

/**
 * A realm's guest components. CCA binds initdata through the 64-byte Realm Personalization Value,
 * which trustee compares unpadded: only a SHA-512 initdata can match, so this guest's uses it.
 */
async function realmGuest(name: string): Promise<RealmGuest> {
  const gdir = join(dir, name);
  const cfg = guestConfig(kbs, gdir);
  const initdata = cfg.initdata.replace('algorithm = "sha256"', 'algorithm = "sha512"');
  realm.config.personalizationValue = createHash('sha512').update(initdata).digest();
  const files = join(gdir, 'initdata');
  mkdirSync(files, { recursive: true });
  writeFileSync(join(files, 'aa.toml'), cfg.aaToml);
  writeFileSync(join(files, 'cdh.toml'), cfg.cdhToml);
  writeFileSync(join(files, 'initdata.toml'), initdata);
  const env = { ...process.env, ...realm.env, RUST_LOG: 'debug' };
  const aa = start(
    binary('attestation-agent'),
    [
      '-c',
      join(files, 'aa.toml'),
      '--attestation_sock',
      `unix://${cfg.aaSock}`,
      '--initdata-toml',
      join(files, 'initdata.toml'),
    ],
    { env },
  );
  await waitForListen({ path: cfg.aaSock }, aa);
  const cdh = start(binary('confidential-data-hub'), ['-c', join(files, 'cdh.toml')], { env });
  await waitForListen({ path: cfg.cdhSock }, cdh);
  const { rest, restPort: port } = await startApiServerRest({
    aaSock: cfg.aaSock,
    cdhSock: cfg.cdhSock,
    env,
  });
  await waitForListen({ port }, rest);
  return {
    aa,
    cdh,
    rest,
    get: (path) => fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(60_000) }),
    async stop() {
      await Promise.all([rest.stop(), cdh.stop(), aa.stop()]);
    },
  };
}

describe('Arm CCA realm: attestation-agent → KBS → resource', () => {
  let guest: RealmGuest;
  beforeAll(async () => {
    writeFileSync(join(dir, 'cca.rego'), CCA_POLICY);
    await mustSucceed(
      kbs.admin('set-attestation-policy', '--id', 'default_cpu', '--policy-file', join(dir, 'cca.rego')),
    );
    const rim = realm.platform.realmClaims(Buffer.alloc(64)).get(44238) as Buffer;
    await mustSucceed(kbs.admin('set-sample-reference-value', 'cca_realm_rim', rim.toString('base64')));
    guest = await realmGuest('realm');
  }, 120_000);
  afterAll(async () => {
    await guest?.stop();
  });

  it('detects cca and gets a token whose cpu0 carries the realm claims, affirming', async () => {
    expect(guest.aa.output()).toContain('TEE detected: cca');
    const requests = realm.requests;
    const token = await text(await guest.get('/aa/token?token_type=kbs'));
    expect(token.status, token.body.toString()).toBe(200);
    expect(realm.requests).toBe(requests + 1);
    const ear = earOf(token.body);
    expect(Object.keys(ear.submods)).toEqual(['cpu0']);
    expect(ear.submods.cpu0!['ear.status']).toBe('affirming');
    const claims = ear.submods.cpu0!['ear.veraison.annotated-evidence'] as {
      cca: { platform: Record<string, string> };
      init_data: string;
    };
    expect(claims.init_data).toBe(Buffer.from(realm.config.personalizationValue).toString('hex'));
    expect(claims.cca.platform['cca-platform-instance-id']).toBe(
      realm.platform.stores.trustAnchors[0]!.instanceId.toString('base64'),
    );
  }, 90_000);

  it("releases the realm's resource, not the GPU's", async () => {
    const res = await text(await guest.get('/cdh/resource/default/realm/key'));
    expect(res.status, res.body.toString()).toBe(200);
    expect(res.body).toEqual(realmSecret);
    expect((await guest.get('/cdh/resource/default/gpu/key')).status).not.toBe(200);
  }, 90_000);

  it('is refused when the realm was created with another personalization value than the initdata digest', async () => {
    const bound = realm.config.personalizationValue;
    realm.config.personalizationValue = createHash('sha512').update('another initdata').digest();
    try {
      const res = await text(await guest.get('/aa/token?token_type=kbs'));
      expect(res.status).not.toBe(200);
      expect(kbs.process.output()).toMatch(/personalization value is not the initdata digest/);
    } finally {
      realm.config.personalizationValue = bound;
    }
  }, 90_000);
});

describe('the shipped mock-tee gpu', () => {
  it('serves its stand-ins from the single executable, with reports the test root verifies', async () => {
    const state = join(dir, 'shipped-gpu');
    const device = start(binary('mock-tee'), ['gpu', '--state', state]);
    try {
      let out = '';
      for (let i = 0; i < 600 && !out.includes('MOCK_TEE_GPU_ROOT='); i++) {
        await new Promise((r) => setTimeout(r, 50));
        out = device.output();
      }
      const settings = Object.fromEntries(
        out
          .trim()
          .split('\n')
          .filter((l) => /^[A-Z_]+=/.test(l))
          .map((l) => l.split('=', 2) as [string, string]),
      );
      // The stand-ins run the executable itself (a single executable cannot run scripts).
      expect(readFileSync(settings.BROKER_NVATTEST!, 'utf8')).toContain('mock-tee gpu-tool');
      const run = promisify(execFile);
      expect((await run(settings.BROKER_NVIDIA_SMI!, ['conf-compute', '-f'])).stdout).toBe('CC status: ON\n');
      const nonce = randomBytes(32);
      const { stdout } = await run(settings.BROKER_NVATTEST!, [
        'collect-evidence',
        '--device',
        'gpu',
        '--nonce',
        nonce.toString('hex'),
      ]);
      const [entry] = (JSON.parse(stdout) as { evidences: Record<string, string>[] }).evidences;
      const root = readFileSync(settings.MOCK_TEE_GPU_ROOT!, 'utf8');
      const device0 = { ...entry, evidence: Buffer.from(entry!.evidence!, 'base64').toString('hex') };
      expect(verifyNvidiaDevice(device0, nonce, { now: new Date(), trustedRoots: [root] }).arch).toBe(
        'Hopper',
      );
    } finally {
      expect(await device.stop()).toBe(0);
    }
  }, 60_000);
});
