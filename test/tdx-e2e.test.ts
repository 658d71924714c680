// Bare TDX end to end against the mock TDX device (a configfs-tsm report root with the `tdx_guest`
// provider served by this process, quotes signed by the device's test quoting enclave under a test
// SGX root): the `tdx` attester and verifier in process, then the real attestation-agent,
// confidential-data-hub and api-server-rest detecting `tdx` from the mock and fetching a resource from
// the KBS, which verifies the quote with the device's collateral and trusts its root only when told to.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { explainTeeDetection, getAttester, type TdxAttester, type TdxEvidence } from '@broker/attester';
import { type MockTdxDevice, startMockTdxDevice, TDX_STATE_FILES } from '@broker/mock-tee';
import { TdxVerifier, VerificationError } from '@broker/verifier';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, runToEnd } from './helpers/process.js';
import {
  type GuestConfig,
  type GuestHandle,
  guestConfig,
  type KbsHandle,
  mustSucceed,
  prepareKbs,
  startGuest,
} from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-tdx-e2e-'));
const sha256 = (b: string | Uint8Array) => createHash('sha256').update(b).digest();
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
/** MRCONFIGID as the TD reports it: the initdata digest zero-padded to 48 bytes. */
const mrConfigIdOf = (digest: Uint8Array) => Buffer.concat([digest, Buffer.alloc(48 - digest.length)]);

const guestDir = join(dir, 'guest');
// The attester appends the agent's event log file when it exists; the default lives under /run.
const guestEnv = () => ({ ...device.env, AAEL_PATH: join(dir, 'no-aa-eventlog') });

let kbs: KbsHandle;
let baseKbsConfig: string;
let guestCfg: GuestConfig;
let device: MockTdxDevice;
const verifier = new TdxVerifier();

beforeAll(async () => {
  mkdirSync(join(dir, 'kbs'), { recursive: true });
  kbs = await prepareKbs(join(dir, 'kbs'));
  baseKbsConfig = readFileSync(kbs.configPath, 'utf8');
  // The host launches the TD with MRCONFIGID = the digest of exactly the initdata the guest gets.
  guestCfg = guestConfig(kbs, guestDir);
  device = await startMockTdxDevice({
    stateDir: join(dir, 'tdx-device'),
    initDataDigest: sha256(guestCfg.initdata),
  });
});

afterAll(async () => {
  device?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The KBS's TDX verifier settings: the device's collateral, and its test root only when asked. */
function tdxVerifierConfig(trustTestRoot: boolean): string {
  const file = (p: string) => JSON.stringify(join(device.stateDir, p));
  return [
    '',
    '[attestation_service.verifier_config.tdx_verifier]',
    `tcb_info_paths = [${file(TDX_STATE_FILES.tcbInfo)}]`,
    `qe_identity_path = ${file(TDX_STATE_FILES.qeIdentity)}`,
    `collateral_signer_paths = [${file(TDX_STATE_FILES.tcbSigning)}]`,
    `pck_crl_path = ${file(TDX_STATE_FILES.pckCrl)}`,
    `root_ca_crl_path = ${file(TDX_STATE_FILES.rootCaCrl)}`,
    ...(trustTestRoot ? [`trusted_sgx_root_paths = [${file(TDX_STATE_FILES.sgxRoot)}]`] : []),
    '',
  ].join('\n');
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

describe('tdx attester → verifier, in process', () => {
  const tdx = () => getAttester('tdx', { env: guestEnv() }) as TdxAttester;

  it('detects tdx from the mock device first, in upstream order', async () => {
    const d = await explainTeeDetection({ env: guestEnv() });
    expect(d.tee).toBe('tdx');
    expect(d.probes[0]?.tee).toBe('tdx');
  });

  it("sends evidence the verifier accepts with the device's root and collateral, and only with both", async () => {
    const reportData = createHash('sha384').update('runtime data').digest();
    const digest = sha256(guestCfg.initdata);
    const evidence: TdxEvidence = await tdx().getEvidence(reportData);
    expect(evidence.cc_eventlog).not.toBeNull();
    const [result] = await verifier.evaluate(evidence, {
      reportData,
      initDataHash: digest,
      tdx: device.verifierOptions,
    });
    expect(result!.class).toBe('cpu');
    expect(result!.claims).toMatchObject({
      quote: { body: { mr_td: hex(device.td.mrTd), mr_config_id: hex(mrConfigIdOf(digest)) } },
      tcb_status: 'UpToDate',
    });
    const { trustedSgxRoots: _, ...withoutRoot } = device.verifierOptions;
    expect(
      await refusal(verifier.evaluate(evidence, { reportData, initDataHash: digest, tdx: withoutRoot })),
    ).toBe('CERT_CHAIN_INVALID');
    expect(
      await refusal(
        verifier.evaluate(evidence, {
          reportData,
          initDataHash: digest,
          tdx: { trustedSgxRoots: device.verifierOptions.trustedSgxRoots },
        }),
      ),
    ).toBe('COLLATERAL_UNAVAILABLE');
    expect(
      await refusal(
        verifier.evaluate(evidence, {
          reportData,
          initDataHash: sha256('other initdata'),
          tdx: device.verifierOptions,
        }),
      ),
    ).toBe('INIT_DATA_MISMATCH');
  });

  it('binds initdata through MRCONFIGID and fails closed on a mismatch', async () => {
    await expect(tdx().bindInitData(sha256(guestCfg.initdata))).resolves.toBeUndefined();
    await expect(tdx().bindInitData(sha256(`${guestCfg.initdata}# changed\n`))).rejects.toThrow(
      'Init data does not match!',
    );
  });
});

describe('attestation-agent on the mock TDX device, as a real process', () => {
  it('does not start when MRCONFIGID does not match the initdata, and creates no socket', async () => {
    const gdir = join(dir, 'mismatch');
    mkdirSync(gdir, { recursive: true });
    // Valid initdata for the same KBS, one comment longer: another digest than the TD was launched with.
    writeFileSync(join(gdir, 'initdata.toml'), `${guestCfg.initdata}# not what the host launched\n`);
    writeFileSync(join(gdir, 'aa.toml'), guestCfg.aaToml);
    const sock = join(gdir, 'aa.sock');
    const r = await runToEnd(
      binary('attestation-agent'),
      [
        '-c',
        join(gdir, 'aa.toml'),
        '--attestation_sock',
        `unix://${sock}`,
        '--initdata-toml',
        join(gdir, 'initdata.toml'),
      ],
      { env: { ...process.env, ...guestEnv() } },
    );
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toContain('Init data does not match!');
    expect(existsSync(sock)).toBe(false);
  });
});

describe('tdx through the KBS', () => {
  let guest: GuestHandle;
  const secret = randomBytes(32);
  const resource = 'default/tdx-secret/key';
  /** Releases only to a TD whose verified quote carries the device's MRTD and this guest's MRCONFIGID. */
  const policyFor = (mrTd: string) => `package policy
import rego.v1

default allow = false

allow if {
    evidence := input.submods.cpu0["ear.veraison.annotated-evidence"]
    evidence.tdx.quote.body.mr_td == "${mrTd}"
    evidence.tdx.quote.body.mr_config_id == "${hex(mrConfigIdOf(sha256(guestCfg.initdata)))}"
}
`;
  const setPolicy = async (text: string) => {
    const file = join(dir, 'kbs', 'resource-policy.rego');
    writeFileSync(file, text);
    await mustSucceed(kbs.admin('set-resource-policy', '--policy-file', file));
  };

  beforeAll(async () => {
    // The test root is trusted only because this configuration names it.
    writeFileSync(kbs.configPath, baseKbsConfig + tdxVerifierConfig(true));
    await kbs.start();
    writeFileSync(join(dir, 'kbs', 'secret.bin'), secret);
    await mustSucceed(
      kbs.admin('set-resource', '--path', resource, '--resource-file', join(dir, 'kbs', 'secret.bin')),
    );
    await setPolicy(policyFor(hex(device.td.mrTd)));
    guest = await startGuest(kbs, guestDir, { env: { ...guestEnv(), RUST_LOG: 'debug' } });
  });

  afterAll(async () => {
    await guest?.stop();
    await kbs?.stop();
  });

  it('releases a resource to the TD through api-server-rest after the tdx verifier passed', async () => {
    const before = device.requests;
    const res = await guest.get(`/cdh/resource/${resource}`);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(secret);
    expect(device.requests).toBeGreaterThan(before);
    expect(guest.aa.output()).toContain('TEE detected: tdx');
    expect(guest.aa.output()).toContain('Check initdata passed.');
    expect(kbs.process.output()).toMatch(/"tee":"tdx"[^\n]*attestation succeeded/);
  });

  it("puts the verified quote's claims and TCB status in the token", async () => {
    const res = await guest.get('/aa/token?token_type=kbs');
    const body = await res.text();
    expect(res.status, body).toBe(200);
    const claims = decodeJwt(JSON.parse(body).token) as {
      submods: { cpu0: { 'ear.veraison.annotated-evidence': Record<string, unknown> } };
    };
    expect(claims.submods.cpu0['ear.veraison.annotated-evidence']).toMatchObject({
      init_data: hex(mrConfigIdOf(sha256(guestCfg.initdata))),
      tdx: {
        quote: { body: { mr_td: hex(device.td.mrTd) } },
        tcb_status: 'UpToDate',
      },
    });
  });

  it('withholds the resource when the policy asks for another MRTD', async () => {
    await setPolicy(policyFor('00'.repeat(48)));
    try {
      const res = await guest.get(`/cdh/resource/${resource}`);
      expect(res.status).not.toBe(200);
      expect(Buffer.from(await res.arrayBuffer()).includes(secret)).toBe(false);
    } finally {
      await setPolicy(policyFor(hex(device.td.mrTd)));
    }
  });

  it("is affirming under the default attestation policy only with this TD's reference values", async () => {
    await mustSucceed(kbs.admin('set-resource-policy', '--affirming'));
    const mark = kbs.process.output().length;
    const denied = await guest.get(`/cdh/resource/${resource}`);
    expect(denied.status).not.toBe(200);
    const log = kbs.process.output().slice(mark);
    expect(log).toMatch(/"tee":"tdx"[^\n]*"status":"contraindicated"/);
    expect(log).toMatch(/"kind":"PolicyDeny"[^\n]*cpu0 contraindicated/);
    const referenceValues: [string, Buffer][] = [
      ['mr_td', device.td.mrTd],
      ['xfam', device.td.xfam],
      ['rtmr_1', device.td.rtmrs[1]],
      ['rtmr_2', device.td.rtmrs[2]],
    ];
    for (const [name, value] of referenceValues) {
      await mustSucceed(kbs.admin('set-sample-reference-value', name, hex(value)));
    }
    // The hub's cached token is contraindicated; the KBS's refusal makes it attest again.
    const res = await guest.get(`/cdh/resource/${resource}`);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(secret);
    const token = JSON.parse(await (await guest.get('/aa/token?token_type=kbs')).text()).token;
    expect(
      (decodeJwt(token) as { submods: { cpu0: { 'ear.status': string } } }).submods.cpu0['ear.status'],
    ).toBe('affirming');
  });

  it('refuses the same TD when the KBS does not trust the test SGX root', async () => {
    await kbs.stop();
    writeFileSync(kbs.configPath, baseKbsConfig + tdxVerifierConfig(false));
    await kbs.start();
    const res = await guest.get('/aa/token?token_type=kbs');
    expect(res.status).not.toBe(200);
    const log = kbs.process.output();
    expect(log).toMatch(/"method":"POST","path":"\/kbs\/v0\/attest[^"]*","status":401/);
    expect(log).toMatch(/"tee":"tdx"[^\n]*PCK certificate does not chain to a trusted SGX root/);
    expect(log).not.toMatch(/attestation succeeded/);
  });
});
