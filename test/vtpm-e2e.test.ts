// The vTPM path end to end, as real processes: the mock TEE device (swtpm behind a paravisor
// interposer, a test AMD root, an IMDS on loopback), the KBS trusting that root and appraising with
// broker's five-PCR policy as default_cpu (PCR 03, 08, 09, 11, 12 against reference values), the guest
// components detecting az-snp-vtpm on the device, and reference values made by the reference-values
// tool and applied the way a deployment applies them (a mounted reference-values directory).
//
// Each CVM is a boot of the device: the device restarts (a power cycle: PCRs reset, the image's
// measurements extended again) and the attestation agent binds its initdata into PCR 8.
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BROKER_DEFAULT_POLICY_CPU } from '@broker/attestation';
import { type Attester, getAttester } from '@broker/attester';
import { KbsClient, KbsRejected, RcarHandshakeFailed, TeeKeyPair } from '@broker/kbs-client';
import { nodeReferenceValuesIo, referenceValuesMain } from '@broker/reference-values';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, binary, freePort, type Running, runToEnd, start, waitForListen } from './helpers/process.js';
import { type GuestHandle, type KbsHandle, mustSucceed, prepareKbs, startGuest } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-vtpm-e2e-'));
const SAMPLE_MANIFEST = join(import.meta.dirname, '../packages/mock-tee/manifests/podvm-sample.json');
const IMAGE_TAG = 'mock-podvm:0.1.0';
const RESOURCE = 'default/app-secret/dataset-key';
const secret = randomBytes(32);

let kbs: KbsHandle;
let device: Running | undefined;
let teeEnv: Record<string, string> = {};
let guest: GuestHandle | undefined;
let tpmPort: number;
let imdsPort: number;
const referenceValuesDir = join(dir, 'reference-values');

/** A TCP port whose successor is free too: the interposer serves swtpm's control channel there. */
async function freePortPair(): Promise<number> {
  for (;;) {
    const p = await freePort();
    const free = await new Promise<boolean>((res) => {
      const srv = createServer();
      srv.once('error', () => res(false));
      srv.listen(p + 1, '127.0.0.1', () => srv.close(() => res(true)));
    });
    if (free) return p;
  }
}

/** Boots the device (again) with a measurement manifest; returns the guest's settings it prints. */
async function bootDevice(manifest: string): Promise<void> {
  await device?.stop();
  device = start(binary('mock-tee'), [
    'start',
    '--state',
    join(dir, 'tee'),
    '--manifest',
    manifest,
    '--tpm-port',
    String(tpmPort),
    '--imds-port',
    String(imdsPort),
  ]);
  const deadline = Date.now() + 60_000;
  while (!/^MOCK_TEE_IMAGE_TAG=.*$/m.test(device.output())) {
    if (device.child.exitCode !== null || Date.now() > deadline) {
      throw new Error(`mock-tee did not start:\n${device.output()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  teeEnv = Object.fromEntries(
    device
      .output()
      .split('\n')
      .map((l) => /^([A-Z0-9_]+)=(.*)$/.exec(l))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [m[1]!, m[2]!.replace(/^'(.*)'$/, '$1')]),
  );
  await waitForListen({ port: tpmPort }, device);
}

/**
 * A new CVM on a freshly booted device: the guest components with this initdata revision. CVMs of
 * one revision share a folder, so their initdata (which names the guest's sockets) is the same.
 */
async function bootCvm(manifest: string, revision: string): Promise<GuestHandle> {
  await guest?.stop();
  guest = undefined;
  await bootDevice(manifest);
  mkdirSync(cvmDir(revision), { recursive: true });
  guest = await startGuest(kbs, cvmDir(revision), { env: teeEnv, cdhTomlExtra: initdataRevision(revision) });
  return guest;
}

const cvmDir = (revision: string) => join(dir, `cvm-revision-${revision}`);

/** A comment in cdh.toml: changes the initdata document (and so PCR 8), not the guest's behaviour. */
const initdataRevision = (revision: string) => `# workload configuration revision ${revision}`;

/** The initdata CVMs of this revision were launched with: the file their agent bound and sends. */
const initdataFile = (revision: string) => join(cvmDir(revision), 'initdata', 'initdata.toml');

/** The reference-values command: the executable when the build has it, else the same code in process. */
async function referenceValuesTool(args: string[]): Promise<string> {
  const exe = join(BIN, 'reference-values');
  if (existsSync(exe)) {
    const r = await runToEnd(exe, args);
    if (r.code !== 0) throw new Error(`reference-values failed (${r.code}): ${r.stderr}`);
    return r.stdout;
  }
  let out = '';
  let err = '';
  const code = await referenceValuesMain(args, {
    ...nodeReferenceValuesIo,
    out: (s) => {
      out += s;
    },
    err: (s) => {
      err += s;
    },
  });
  if (code !== 0) throw new Error(`reference-values failed (${code}): ${err}`);
  return out;
}

/**
 * Generates the RVPS message for this initdata and image and applies it as a deployment does: the
 * file in the KBS's mounted reference-values directory, which the KBS registers when it changes.
 */
async function applyReferenceValues(
  initdata: string,
  manifest = SAMPLE_MANIFEST,
): Promise<Record<string, string>> {
  const message = await referenceValuesTool([
    '--platform',
    'azure',
    '--tee',
    'az-snp-vtpm',
    '--initdata',
    initdata,
    '--measurements',
    manifest,
    '--image-tag',
    IMAGE_TAG,
    '--format',
    'rvps-message',
  ]);
  const values = JSON.parse(Buffer.from(JSON.parse(message).payload, 'base64').toString()) as Record<
    string,
    string[]
  >;
  const tmp = join(referenceValuesDir, '.rvps-message.json.tmp');
  writeFileSync(tmp, message);
  renameSync(tmp, join(referenceValuesDir, 'rvps-message.json'));
  // Applied once the KBS serves the new PCR 8 value.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await kbs.admin('get-reference-value', '--id', 'snp_pcr08');
    if (r.code === 0 && r.stdout.includes(values.snp_pcr08![0]!))
      return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, v[0]!]));
    if (Date.now() > deadline) throw new Error(`reference values not applied: ${r.stdout}${r.stderr}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** KBS log lines written since `mark`, parsed; waits until one satisfies `want` (the log lags the answer). */
async function kbsLogLine(
  mark: number,
  want: (l: Record<string, unknown>) => boolean,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    for (const line of kbs.process.output().slice(mark).split('\n')) {
      if (!line.startsWith('{')) continue;
      const parsed = JSON.parse(line) as Record<string, unknown>;
      if (want(parsed)) return parsed;
    }
    if (Date.now() > deadline) throw new Error(`no such KBS log line:\n${kbs.process.output().slice(mark)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const fetchResource = () => guest!.get(`/cdh/resource/${RESOURCE}`);

beforeAll(async () => {
  tpmPort = await freePortPair();
  imdsPort = await freePort();
  await bootDevice(SAMPLE_MANIFEST);
  kbs = await prepareKbs(dir);
  mkdirSync(referenceValuesDir);
  // The policy a rendered deployment installs as default_cpu: broker's five PCRs (`brokerctl
  // attestation-policy`); the KBS's built-in default_cpu is trustee's.
  const policies = join(dir, 'attestation-policies');
  mkdirSync(policies);
  writeFileSync(join(policies, 'default_cpu.rego'), BROKER_DEFAULT_POLICY_CPU);
  appendFileSync(
    kbs.configPath,
    `\n[attestation_service.verifier_config.snp_verifier]\ntrusted_ark_paths = ["${teeEnv.MOCK_TEE_ROOTS}"]\n\n[mounted_files]\nattestation_policies = ["${policies}"]\nreference_values = ["${referenceValuesDir}"]\n`,
  );
  await kbs.start();
  writeFileSync(join(dir, 'secret.bin'), secret);
  await mustSucceed(
    kbs.admin('set-resource', '--path', RESOURCE, '--resource-file', join(dir, 'secret.bin')),
  );
  await mustSucceed(kbs.admin('set-resource-policy', '--affirming'));
}, 120_000);

afterAll(async () => {
  await guest?.stop();
  await device?.stop();
  await kbs?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('az-snp-vtpm on the mock TEE device, through the KBS', () => {
  it('(a) passes with matching reference values: flow B gets the key under the affirming policy', async () => {
    await bootCvm(SAMPLE_MANIFEST, '1');
    const values = await applyReferenceValues(initdataFile('1'));
    expect(Object.keys(values).sort()).toEqual([
      'snp_pcr03',
      'snp_pcr08',
      'snp_pcr09',
      'snp_pcr11',
      'snp_pcr12',
    ]);
    const mark = kbs.process.output().length;
    const res = await fetchResource();
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(secret);
    const appraised = await kbsLogLine(mark, (l) => l.msg === 'attestation appraised');
    expect(appraised).toMatchObject({ tee: 'az-snp-vtpm', policy: 'default_cpu', status: 'affirming' });
    expect(appraised.trustVector).toMatchObject({ executables: 3, hardware: 2, configuration: 2 });
  }, 120_000);

  it('(b) fails after the initdata changes: PCR 8 differs, the resource request is PolicyDeny naming snp_pcr08', async () => {
    await bootCvm(SAMPLE_MANIFEST, '2');
    const mark = kbs.process.output().length;
    const res = await fetchResource();
    expect(res.status).not.toBe(200);
    const denial = await kbsLogLine(mark, (l) => l.kind === 'PolicyDeny');
    expect(denial.cause).toMatch(
      /^cpu0 warning \(policy default\): configuration=36 \(warning\); reference values not matched: snp_pcr08 \(evidence [0-9a-f]{64}\)$/,
    );
    const appraised = await kbsLogLine(mark, (l) => l.msg === 'attestation appraised: not affirming');
    expect(appraised).toMatchObject({ tee: 'az-snp-vtpm', status: 'warning' });
    // The guest's answer is the KBS's: 401 PolicyDeny for the resource (seen by a client of the same CVM).
    const client = vtpmClient(initdataFile('2'));
    const e = await client.getResource(RESOURCE).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(KbsRejected);
    expect(e).toMatchObject({ status: 401, kind: 'PolicyDeny' });
    client.close();
  }, 120_000);

  it('(c) passes again once the reference values are regenerated for the new initdata and applied', async () => {
    const values = await applyReferenceValues(initdataFile('2'));
    expect(values.snp_pcr08).toMatch(/^[0-9a-f]{64}$/);
    const res = await fetchResource();
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(secret);
  }, 120_000);

  it('(d) fails after a changed image measurement: PolicyDeny naming the PCR the image changed', async () => {
    const manifest = JSON.parse(readFileSync(SAMPLE_MANIFEST, 'utf8')) as { pcrs: Record<string, string[]> };
    manifest.pcrs['11']![3] = 'ab'.repeat(32); // another kernel image in the UKI
    const changed = join(dir, 'podvm-changed.json');
    writeFileSync(changed, JSON.stringify(manifest));
    await bootCvm(changed, '2');
    const mark = kbs.process.output().length;
    const res = await fetchResource();
    expect(res.status).not.toBe(200);
    const denial = await kbsLogLine(mark, (l) => l.kind === 'PolicyDeny');
    expect(denial.cause).toMatch(
      /^cpu0 warning \(policy default\): executables=33 \(warning\); reference values not matched: snp_pcr11 \(evidence [0-9a-f]{64}\)$/,
    );
    // The value logged is what a boot of the changed image gives.
    const expected = JSON.parse(
      await mustSucceed(runToEnd(binary('mock-tee'), ['expected-pcrs', '--manifest', changed])),
    );
    expect(denial.cause).toContain(`snp_pcr11 (evidence ${expected.measurements.sha256.pcr11})`);
    const client = vtpmClient(initdataFile('2'));
    const e = await client.getResource(RESOURCE).catch((err: unknown) => err);
    client.close();
    expect(e).toMatchObject({ status: 401, kind: 'PolicyDeny' });
  }, 120_000);

  it('(e) fails with evidence replayed from another session: /attest answers 401 AttestationError', async () => {
    // A good CVM again, so that the evidence itself is sound.
    await bootCvm(SAMPLE_MANIFEST, '2');
    const initdata = readFileSync(initdataFile('2'), 'utf8');
    const teeKeyPair = TeeKeyPair.generate();
    const attester = getAttester('az-snp-vtpm', { env: teeEnv });
    let captured: unknown;
    const recording: Attester = {
      tee: attester.tee,
      async getEvidence(reportData) {
        captured = await attester.getEvidence(reportData);
        return captured;
      },
    };
    const first = new KbsClient({
      url: kbs.url,
      certPem: kbs.tls.certPem,
      attester: recording,
      initData: initdata,
      teeKeyPair,
    });
    expect(await first.getResource(RESOURCE)).toEqual(secret);
    first.close();
    expect(captured).toBeDefined();

    const replaying: Attester = { tee: 'az-snp-vtpm', getEvidence: async () => captured };
    const second = new KbsClient({
      url: kbs.url,
      certPem: kbs.tls.certPem,
      attester: replaying,
      initData: initdata,
      teeKeyPair,
      sleep: async () => {},
    });
    const mark = kbs.process.output().length;
    const e = await second.attest().catch((err: unknown) => err);
    second.close();
    expect(e).toBeInstanceOf(RcarHandshakeFailed);
    const cause = (e as RcarHandshakeFailed).cause;
    expect(cause).toBeInstanceOf(KbsRejected);
    expect(cause).toMatchObject({ status: 401, kind: 'AttestationError' });
    const failed = await kbsLogLine(mark, (l) => l.msg === 'attestation failed');
    expect(failed).toMatchObject({ tee: 'az-snp-vtpm' });
    expect(failed.reason).toContain('TPM quote nonce differs from the expected report data');
  }, 120_000);
});

/** An RCAR client of the current CVM: the az-snp-vtpm attester on the device, with its initdata. */
function vtpmClient(initdataPath: string): KbsClient {
  return new KbsClient({
    url: kbs.url,
    certPem: kbs.tls.certPem,
    attester: getAttester('az-snp-vtpm', { env: teeEnv }),
    initData: readFileSync(initdataPath, 'utf8'),
    sleep: async () => {},
  });
}
