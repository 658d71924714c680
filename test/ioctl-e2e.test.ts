// SEV-SNP and TDX evidence from the device nodes, end to end, on guests whose kernels have no
// configfs-tsm: the real attestation-agent, confidential-data-hub and api-server-rest executables
// detect the TEE, find no TSM report root, and run the ioctl shims (the shipped sources, linked
// dynamically so that the mock TEE's LD_PRELOAD guest kernel can stand in for /dev/sev-guest and
// /dev/tdx_guest; TDX quotes come from a QGS on loopback TCP). The KBS verifies the evidence with
// the devices' test roots and issues tokens; the evidence equals what configfs-tsm gives, byte for
// byte.
import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getAttester } from '@broker/attester';
import { buildShims } from '@broker/attester/testing';
import {
  GUEST_IOCTLS,
  type MockGuestKernel,
  type MockSnpDevice,
  type MockTdxDevice,
  QgsServer,
  startMockGuestKernel,
  startMockSnpDevice,
  startMockTdxDevice,
  TDX_STATE_FILES,
} from '@broker/mock-tee';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, runToEnd } from './helpers/process.js';
import { type GuestHandle, guestConfig, type KbsHandle, prepareKbs, startGuest } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-ioctl-e2e-'));
const sha256 = (b: string | Uint8Array) => createHash('sha256').update(b).digest();
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const noTsm = join(dir, 'no-configfs-tsm');

let kbs: KbsHandle;
let shimDir: string;
let snp: MockSnpDevice;
let tdx: MockTdxDevice;
let snpKernel: MockGuestKernel;
let tdxKernel: MockGuestKernel;
let qgs: QgsServer;
const snpDir = join(dir, 'snp-guest');
const tdxDir = join(dir, 'tdx-guest');

beforeAll(async () => {
  mkdirSync(join(dir, 'kbs'), { recursive: true });
  kbs = await prepareKbs(join(dir, 'kbs'));
  shimDir = buildShims(join(dir, 'shims'));
  // Each host launches its guest with the digest of exactly the initdata the guest gets.
  snp = await startMockSnpDevice({
    stateDir: join(dir, 'snp-device'),
    initDataDigest: sha256(guestConfig(kbs, snpDir).initdata),
    rootKeyBits: 2048,
    stableReports: true,
  });
  tdx = await startMockTdxDevice({
    stateDir: join(dir, 'tdx-device'),
    initDataDigest: sha256(guestConfig(kbs, tdxDir).initdata),
    stableQuotes: true,
  });
  snpKernel = await startMockGuestKernel({ stateDir: join(dir, 'snp-kernel'), snp });
  tdxKernel = await startMockGuestKernel({ stateDir: join(dir, 'tdx-kernel'), tdx });
  qgs = await QgsServer.start({ quote: (r) => tdx.quoteTdReport(r) });
  // Test roots are trusted only because this configuration names them.
  const file = (p: string) => JSON.stringify(join(tdx.stateDir, p));
  appendFileSync(
    kbs.configPath,
    [
      '',
      '[attestation_service.verifier_config.snp_verifier]',
      `vcek_sources = [{ type = "OfflineStore", path = ${JSON.stringify(snp.vcekStorePath)} }]`,
      `trusted_ark_paths = [${JSON.stringify(snp.rootsBundlePath)}]`,
      '',
      '[attestation_service.verifier_config.tdx_verifier]',
      `tcb_info_paths = [${file(TDX_STATE_FILES.tcbInfo)}]`,
      `qe_identity_path = ${file(TDX_STATE_FILES.qeIdentity)}`,
      `collateral_signer_paths = [${file(TDX_STATE_FILES.tcbSigning)}]`,
      `pck_crl_path = ${file(TDX_STATE_FILES.pckCrl)}`,
      `root_ca_crl_path = ${file(TDX_STATE_FILES.rootCaCrl)}`,
      `trusted_sgx_root_paths = [${file(TDX_STATE_FILES.sgxRoot)}]`,
      '',
    ].join('\n'),
  );
  await kbs.start();
});

afterAll(async () => {
  await kbs?.stop();
  await Promise.all([snpKernel?.close(), tdxKernel?.close(), qgs?.close()]);
  snp?.close();
  tdx?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The token's annotated evidence, after checking the request succeeded. */
async function tokenClaims(guest: GuestHandle): Promise<Record<string, unknown>> {
  const res = await guest.get('/aa/token?token_type=kbs');
  const body = await res.text();
  expect(res.status, body).toBe(200);
  const claims = decodeJwt(JSON.parse(body).token) as {
    submods: { cpu0: { 'ear.veraison.annotated-evidence': Record<string, unknown> } };
  };
  return claims.submods.cpu0['ear.veraison.annotated-evidence'];
}

describe('SEV-SNP through /dev/sev-guest', () => {
  let guest: GuestHandle;
  beforeAll(async () => {
    guest = await startGuest(kbs, snpDir, {
      env: {
        BROKER_SEV_GUEST_SYSFS: snp.sevGuestPath,
        BROKER_TSM_REPORT_ROOT: noTsm,
        BROKER_ATTESTER_SHIM_DIR: shimDir,
        ...snpKernel.env,
        RUST_LOG: 'debug',
      },
    });
  });
  afterAll(async () => {
    await guest?.stop();
  });

  it('binds initdata and gets a token from the KBS for evidence from SNP_GET_EXT_REPORT', async () => {
    const annotated = (await tokenClaims(guest)) as { snp: { measurement: string }; init_data: string };
    expect(annotated.snp.measurement).toBe(hex(snp.config.measurement));
    expect(annotated.init_data).toBe(hex(snp.config.hostData));
    const out = guest.aa.output();
    expect(out).toContain('TEE detected: snp');
    expect(out).toContain('Check initdata passed.');
    expect(out).toMatch(/SNP Attester: evidence from \/dev\/sev-guest \(SNP_GET_EXT_REPORT\)/);
    const commands = snpKernel.calls.map((c) => c.command);
    expect(commands).toContain(GUEST_IOCTLS.SNP_GET_REPORT);
    expect(commands).toContain(GUEST_IOCTLS.SNP_GET_EXT_REPORT);
  });

  it('serves the evidence configfs-tsm gives, byte for byte', async () => {
    const res = await guest.get('/aa/evidence?runtime_data=hello');
    expect(res.status).toBe(200);
    const fromTsm = await getAttester('snp', { env: snp.env }).getEvidence(Buffer.from('hello'));
    expect(await res.text()).toBe(JSON.stringify(fromTsm));
  });
});

describe('TDX through /dev/tdx_guest and the QGS', () => {
  let guest: GuestHandle;
  beforeAll(async () => {
    guest = await startGuest(kbs, tdxDir, {
      env: {
        ...tdx.env,
        BROKER_TSM_REPORT_ROOT: noTsm,
        // A kernel before 6.16: MRCONFIGID comes from the TD report, as upstream reads it.
        BROKER_TDX_MEASUREMENTS: join(dir, 'no-measurements'),
        AAEL_PATH: join(dir, 'no-aa-eventlog'),
        BROKER_TDX_QGS: qgs.address,
        BROKER_ATTESTER_SHIM_DIR: shimDir,
        ...tdxKernel.env,
        RUST_LOG: 'debug',
      },
    });
  });
  afterAll(async () => {
    await guest?.stop();
  });

  it('binds initdata and gets a token from the KBS for a quote from the QGS', async () => {
    const before = qgs.requests;
    const annotated = await tokenClaims(guest);
    expect(annotated).toMatchObject({
      init_data: hex(tdx.td.mrConfigId),
      tdx: { quote: { body: { mr_td: hex(tdx.td.mrTd) } }, tcb_status: 'UpToDate' },
    });
    expect(qgs.requests).toBeGreaterThan(before);
    const out = guest.aa.output();
    expect(out).toContain('TEE detected: tdx');
    expect(out).toContain('Check initdata passed.');
    expect(out).toMatch(/TDX Attester: quotes from \/dev\/tdx_guest/);
    expect(tdxKernel.calls.map((c) => c.command)).toContain(GUEST_IOCTLS.TDX_CMD_GET_REPORT0);
  });

  it('serves the evidence configfs-tsm gives, byte for byte', async () => {
    const res = await guest.get('/aa/evidence?runtime_data=hello');
    expect(res.status).toBe(200);
    const fromTsm = await getAttester('tdx', {
      env: { ...tdx.env, AAEL_PATH: join(dir, 'no-aa-eventlog') },
    }).getEvidence(Buffer.from('hello'));
    expect(await res.text()).toBe(JSON.stringify(fromTsm));
  });
});

describe('the shipped agent', () => {
  it('runs the static shims beside it, which the test kernel cannot reach', async () => {
    // No BROKER_ATTESTER_SHIM_DIR: dist/bin/broker-snp-report, static, ignores LD_PRELOAD and finds
    // no /dev/sev-guest on this machine, so binding initdata fails closed with the shim's message.
    const gdir = join(dir, 'shipped');
    mkdirSync(gdir, { recursive: true });
    writeFileSync(join(gdir, 'initdata.toml'), guestConfig(kbs, snpDir).initdata);
    const before = snpKernel.calls.length;
    const r = await runToEnd(
      binary('attestation-agent'),
      [
        '--attestation_sock',
        `unix://${join(gdir, 'aa.sock')}`,
        '--initdata-toml',
        join(gdir, 'initdata.toml'),
      ],
      {
        env: {
          ...process.env,
          BROKER_SEV_GUEST_SYSFS: snp.sevGuestPath,
          BROKER_TSM_REPORT_ROOT: noTsm,
          ...snpKernel.env,
        },
      },
    );
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toContain('broker-snp-report: cannot open /dev/sev-guest');
    expect(snpKernel.calls.length).toBe(before);
  });
});
