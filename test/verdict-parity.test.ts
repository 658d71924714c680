// Verdict parity with trustee: dist/bin/kbs on trustee's own kbs-config.toml (plus the mock device's test
// AMD root, without which no mock evidence verifies), az-snp-vtpm evidence from the mock TEE device,
// and trustee-style reference values (`measurement`, `snp_pcr11`, then the TCB and configuration ones).
// The KBS's built-in `default_cpu` must appraise as trustee's `ear_default_policy_cpu.rego` does: the
// token's trust vector and status are checked against the claims derived from that text by hand, and
// against the text itself (test/vectors) evaluated on the token's own annotated evidence.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { Engine, fromJSON, toJSON, type Value } from '@broker/rego';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, freePort, type Running, runToEnd, start, waitForListen } from './helpers/process.js';
import { listenOn, relocate } from './helpers/upstream-config.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-verdict-parity-'));
const SAMPLE_MANIFEST = join(import.meta.dirname, '../packages/mock-tee/manifests/podvm-sample.json');

let device: Running | undefined;
let kbs: Running | undefined;
let url = '';
let teeEnv: Record<string, string> = {};

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

beforeAll(async () => {
  const tpmPort = await freePortPair();
  const imdsPort = await freePort();
  device = start(binary('mock-tee'), [
    'start',
    '--state',
    join(dir, 'tee'),
    '--manifest',
    SAMPLE_MANIFEST,
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

  const port = await freePort();
  const trustee = readFileSync(vector('trustee/configs/kbs/config/kbs-config.toml'), 'utf8');
  const configPath = join(dir, 'kbs-config.toml');
  writeFileSync(
    configPath,
    `${relocate(listenOn(trustee, port), dir)}\n[attestation_service.verifier_config.snp_verifier]\ntrusted_ark_paths = ["${teeEnv.MOCK_TEE_ROOTS}"]\n`,
  );
  mkdirSync(join(dir, 'opt'), { recursive: true });
  kbs = start(binary('kbs'), ['--config-file', configPath]);
  await waitForListen({ port }, kbs);
  url = `http://127.0.0.1:${port}`;
}, 120_000);

afterAll(async () => {
  await kbs?.stop();
  await device?.stop();
  rmSync(dir, { recursive: true, force: true });
});

type Claims = Record<string, unknown>;

/** kbs-client on the mock device (detected from its environment, as in a CVM); the cpu0 appraisal. */
async function attest(): Promise<Claims> {
  const r = await runToEnd(binary('kbs-client'), ['--url', url, 'attest'], {
    env: { ...process.env, ...teeEnv },
  });
  expect(r.code, `${r.stderr}\n${kbs?.output()}`).toBe(0);
  const payload = JSON.parse(Buffer.from(r.stdout.trim().split('.')[1] as string, 'base64url').toString());
  return payload.submods.cpu0 as Claims;
}

/**
 * A one-element list, as trustee's tooling writes reference values (the policy tests `x in list`);
 * trustee's admin API is open in its example configuration (InsecureAllowAll).
 */
async function setReferenceValue(name: string, value: unknown): Promise<void> {
  rvs[name] = [value];
  const typed =
    typeof value === 'number'
      ? [String(value), '--as-integer']
      : typeof value === 'boolean'
        ? [String(value), '--as-bool']
        : [String(value)];
  const r = await runToEnd(binary('kbs-client'), [
    '--url',
    url,
    'config',
    'set-sample-reference-value',
    name,
    ...typed,
  ]);
  expect(r.code, r.stderr).toBe(0);
}

const rvs: Record<string, unknown> = {};

/** trustee's policy text, unmodified, on the same input and reference values. */
function trusteeTrustClaims(input: unknown): Record<string, number> {
  const engine = new Engine({ regoVersion: 'v1', strictBuiltinErrors: true, gatherPrints: false });
  engine.registerBuiltin('query_reference_value', 1, (args: readonly Value[]): Value => {
    const name = args[0] as string;
    return Object.hasOwn(rvs, name) ? fromJSON(rvs[name]) : null;
  });
  engine.addPolicy(
    'ear_default_policy_cpu.rego',
    readFileSync(vector('trustee/policies/ear_default_policy_cpu.rego'), 'utf8'),
  );
  engine.setInput(fromJSON(input));
  const claims = engine.evalRule('data.policy.trust_claims');
  if (claims === undefined) throw new Error("trustee's policy gave no trust_claims");
  return toJSON(claims) as Record<string, number>;
}

const vectorOf = (cpu0: Claims) => cpu0['ear.trustworthiness-vector'] as Record<string, number>;
const evidenceOf = (cpu0: Claims) =>
  cpu0['ear.veraison.annotated-evidence'] as Record<string, Record<string, unknown>>;

function expectTrusteeVerdict(cpu0: Claims): void {
  const want = trusteeTrustClaims(evidenceOf(cpu0));
  const got = vectorOf(cpu0);
  for (const claim of ['executables', 'hardware', 'configuration'] as const)
    expect(got[claim]).toBe(want[claim]);
}

describe("verdict parity with trustee's default_cpu (az-snp-vtpm on the mock device)", () => {
  it('with no reference values: nothing recognised; no initdata, so init_data_claims is null', async () => {
    const cpu0 = await attest();
    expect(cpu0['ear.appraisal-policy-id']).toBe('default');
    expect(vectorOf(cpu0)).toMatchObject({ executables: 33, hardware: 97, configuration: 36 });
    expect(cpu0['ear.status']).toBe('contraindicated');
    expectTrusteeVerdict(cpu0);
    const ae = evidenceOf(cpu0);
    expect(Object.hasOwn(ae, 'init_data_claims')).toBe(true);
    expect(ae.init_data_claims).toBeNull();
  });

  it('with only measurement and snp_pcr11: executables approved, the rest as trustee leaves it', async () => {
    const ev = evidenceOf(await attest())['az-snp-vtpm'] as Record<string, unknown>;
    const pcr11 = (ev.tpm as Record<string, string>).pcr11 as string;
    await setReferenceValue('measurement', ev.measurement);
    await setReferenceValue('snp_pcr11', pcr11);
    const cpu0 = await attest();
    // trustee: executables 3 (both match); hardware 97 and configuration 36 (their values are unset).
    expect(vectorOf(cpu0)).toMatchObject({ executables: 3, hardware: 97, configuration: 36 });
    expect(cpu0['ear.status']).toBe('contraindicated');
    expectTrusteeVerdict(cpu0);
  });

  it('with the TCB and configuration values too: affirming, as trustee', async () => {
    const ev = evidenceOf(await attest())['az-snp-vtpm'] as Record<string, unknown>;
    const names: Record<string, string> = {
      tcb_bootloader: 'reported_tcb_bootloader',
      tcb_microcode: 'reported_tcb_microcode',
      tcb_snp: 'reported_tcb_snp',
      tcb_tee: 'reported_tcb_tee',
      smt_enabled: 'platform_smt_enabled',
      tsme_enabled: 'platform_tsme_enabled',
      abi_major: 'policy_abi_major',
      abi_minor: 'policy_abi_minor',
      single_socket: 'policy_single_socket',
      smt_allowed: 'policy_smt_allowed',
    };
    for (const [rv, claim] of Object.entries(names)) {
      await setReferenceValue(rv, ev[claim]);
    }
    const cpu0 = await attest();
    expect(vectorOf(cpu0)).toMatchObject({ executables: 3, hardware: 2, configuration: 2 });
    expect(cpu0['ear.status']).toBe('affirming');
    expectTrusteeVerdict(cpu0);
  });
});
