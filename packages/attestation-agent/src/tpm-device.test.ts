// A TPM beside a TEE that is not one becomes an additional device, as guest-components does since
// b33a965f: a real swtpm (its AK at upstream's default handle) beside the mock SNP device and the
// sample device, the agent over its real socket, and a real in-process KBS that verifies all three
// (the SNP report under the mock's test ARK, the TPM quote, the sample device) into one token.
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_TPM_AK_HANDLE, detectAdditionalDevices } from '@broker/attester';
import { AttestationAgentClient } from '@broker/guest-api';
import { parseKbsConfigText, type RunningKbs, startKbs } from '@broker/kbs';
import { makeLoopbackCert } from '@broker/kbs-client/testing';
import { type MockSnpDevice, startMockSnpDevice } from '@broker/mock-tee';
import { attestationKeyTemplate, TPM_RH, Tpm } from '@broker/tpm';
import { type SwtpmInstance, startSwtpm } from '@broker/tpm/testing';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseAaConfigText } from './config.js';
import { type RunningAttestationAgent, startAttestationAgent } from './start.js';
import { LogCapture } from './testing/kbs.js';

let dir: string;
let swtpm: SwtpmInstance;
let snp: MockSnpDevice;
let kbs: RunningKbs;
let certPem: string;
let running: RunningAttestationAgent | undefined;
let client: AttestationAgentClient | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-tpm-device-'));
  swtpm = await startSwtpm();
  const tpm = Tpm.open(swtpm.address);
  try {
    // What a provisioning step leaves: an RSA AK persisted at the handle upstream's attester reads.
    const ak = await tpm.createPrimary(TPM_RH.ENDORSEMENT, attestationKeyTemplate('rsa2048'));
    await tpm.evictControl(TPM_RH.OWNER, ak.handle, DEFAULT_TPM_AK_HANDLE);
    await tpm.flushContext(ak.handle);
  } finally {
    await tpm.close();
  }
  snp = await startMockSnpDevice({ stateDir: join(dir, 'snp'), rootKeyBits: 2048 });
  certPem = makeLoopbackCert(dir, 'tls').cert;
  kbs = await startKbs(
    parseKbsConfigText(`
[http_server]
sockets = ["127.0.0.1:0"]
private_key = "${join(dir, 'tls.key')}"
certificate = "${join(dir, 'tls.pem')}"
[admin]
authorization_mode = "InsecureAllowAll"
[attestation_token]
insecure_header_jwk = true
[attestation_service.verifier_config.snp_verifier]
vcek_sources = [{ type = "OfflineStore", path = "${snp.vcekStorePath}" }]
trusted_ark_paths = ["${snp.rootsBundlePath}"]
`),
    { logger: pino({ level: 'silent' }) },
  );
});
afterEach(async () => {
  client?.close();
  client = undefined;
  await running?.close();
  running = undefined;
});
afterAll(async () => {
  await kbs?.close();
  snp?.close();
  await swtpm?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function start(env: Record<string, string>, logs = new LogCapture()): Promise<AttestationAgentClient> {
  running = await startAttestationAgent({
    config: parseAaConfigText(`[token_configs.kbs]\nurl = "${kbs.urls[0]}"\ncert = '''\n${certPem}'''\n`),
    socketPath: join(dir, 'run', 'aa.sock'),
    logger: pino({ level: 'debug' }, logs),
    detect: { env },
    eventlogDir: join(dir, 'eventlog'),
    kbsRetryDelay: async () => {},
  });
  client = await AttestationAgentClient.connect(`unix://${running.socketPath}`);
  return client;
}

type Submod = { 'ear.veraison.annotated-evidence': Record<string, Record<string, unknown>> };

function submods(token: string): Record<string, Submod> {
  const payload = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString());
  return payload.submods as Record<string, Submod>;
}

describe('a TPM beside the primary TEE', () => {
  it('SNP with a TPM and the sample device: the TPM is an additional device the KBS verifies', async () => {
    const aa = await start({ ...snp.env, BROKER_TPM: swtpm.address, ENABLE_SAMPLE_DEVICE: '' });
    expect(await aa.getTeeType()).toBe('snp');
    // Upstream's order: nvidia, sampledevice, hygondcu, then the TPM.
    expect(await aa.getAdditionalTees()).toEqual(['sampledevice', 'tpm']);

    const runtimeData = createHash('sha384').update('beside the TEE').digest();
    const map = JSON.parse(Buffer.from(await aa.getAdditionalEvidence(runtimeData)).toString());
    expect(Object.keys(map)).toEqual(['sampledevice', 'tpm']);
    expect(Object.keys(map.tpm)).toEqual(['tpm_quote', 'ak_public']);

    const subs = submods((await aa.getKbsToken()).token);
    expect(Object.keys(subs).sort()).toEqual(['cpu0', 'cpu1', 'gpu0']);
    const cpu = Object.values(subs).map((s) => s['ear.veraison.annotated-evidence']);
    const snpClaims = cpu.find((c) => 'snp' in c)?.snp;
    const tpmClaims = cpu.find((c) => 'tpm' in c)?.tpm;
    const device = subs.gpu0?.['ear.veraison.annotated-evidence'].sampledevice;
    expect(snpClaims?.measurement).toMatch(/^[0-9a-f]{96}$/);
    // The verifier checked the quote's signature under the AK it reports, and its PCRs.
    expect(tpmClaims).toHaveProperty('pcr08');
    expect(device).toMatchObject({ svn: '2' });
  });

  it('a TPM that is the primary TEE is not counted again as a device', async () => {
    const aa = await start({ BROKER_TPM: swtpm.address });
    expect(await aa.getTeeType()).toBe('tpm');
    expect(await aa.getAdditionalTees()).toEqual([]);
  });

  it('without the TPM, SNP has no additional device', async () => {
    const aa = await start({ ...snp.env });
    expect(await aa.getTeeType()).toBe('snp');
    expect(await aa.getAdditionalTees()).toEqual([]);
  });

  it("the Azure vTPM flavours' TPM is their own, not another device", async () => {
    const env = { BROKER_TPM: swtpm.address };
    expect(await detectAdditionalDevices({ env, primary: 'az-snp-vtpm' })).toEqual([]);
    expect(await detectAdditionalDevices({ env, primary: 'az-tdx-vtpm' })).toEqual([]);
    expect(await detectAdditionalDevices({ env, primary: 'tdx' })).toEqual(['tpm']);
    // Without a primary given, it is detected: here the TPM itself.
    expect(await detectAdditionalDevices({ env })).toEqual([]);
  });
});
