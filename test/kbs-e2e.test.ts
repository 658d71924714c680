// dist/bin/kbs over HTTPS, driven by dist/bin/kbs-client: the operator's admin calls and a sample-TEE guest.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KbsHandle, openssl, prepareKbs, SAMPLE_REFERENCE_VALUES } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-kbs-e2e-'));
const secret = randomBytes(32);
let kbs: KbsHandle;
const client = (...args: string[]) => kbs.client(...args);
const admin = (...args: string[]) => kbs.admin(...args);

beforeAll(async () => {
  kbs = await prepareKbs(dir);
  await kbs.start();
});

afterAll(async () => {
  await kbs?.stop();
});

describe('kbs and kbs-client, real processes over HTTPS', () => {
  it('stores a resource through the authenticated admin API', async () => {
    writeFileSync(join(dir, 'key.bin'), secret);
    const r = await admin(
      'set-resource',
      '--path',
      'default/app-secret/key',
      '--resource-file',
      join(dir, 'key.bin'),
    );
    expect(r.code, r.stderr).toBe(0);
    // One flat file per resource, as trustee's LocalFs writes it.
    expect(readFileSync(join(dir, 'kbs-storage', 'repository', 'default\\x2Fapp-secret\\x2Fkey'))).toEqual(
      secret,
    );
  });

  it('refuses admin calls without a valid admin token', async () => {
    openssl('genpkey', '-algorithm', 'ed25519', '-out', join(dir, 'intruder.key'));
    const r = await client(
      'config',
      '--auth-private-key',
      join(dir, 'intruder.key'),
      'set-resource-policy',
      '--allow-all',
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr + r.stdout).toMatch(/AdminAuth|401/);
  });

  it('denies the sample TEE under the default resource policy', async () => {
    const r = await client('get-resource', '--path', 'default/app-secret/key');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/PolicyDeny/);
  });

  it('attests and fetches the resource once the policy allows it', async () => {
    const p = await admin('set-resource-policy', '--allow-all');
    expect(p.code, p.stderr).toBe(0);
    const ids = await admin('get-resource-policy');
    expect(ids.code, ids.stderr).toBe(0);
    expect(ids.stdout).toContain('resource-policy');

    const t = await client('attest');
    expect(t.code, t.stderr).toBe(0);
    const [header] = t.stdout.trim().split('.');
    const h = JSON.parse(Buffer.from(header!, 'base64url').toString());
    expect(h.alg).toBe('ES256');
    expect(h.jwk.x5c).toHaveLength(1);

    const r = await client('get-resource', '--path', 'default/app-secret/key');
    expect(r.code, r.stderr).toBe(0);
    expect(Buffer.from(r.stdout.trim(), 'base64')).toEqual(secret);
  });

  it('fetches with a saved attestation token and TEE key (passport style)', async () => {
    // The TEE key pair the guest keeps: trustee's kbs-client reads it from a PEM file.
    const keyFile = join(dir, 'tee.key');
    openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', keyFile);
    const t = await client('attest', '--tee-key-file', keyFile);
    expect(t.code, t.stderr).toBe(0);
    writeFileSync(join(dir, 'token'), t.stdout.trim());
    const r = await client(
      'get-resource',
      '--path',
      'default/app-secret/key',
      '--tee-key-file',
      keyFile,
      '--attestation-token',
      join(dir, 'token'),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(Buffer.from(r.stdout.trim(), 'base64')).toEqual(secret);
  });

  it('gates release on the EAR verdict: reference values make the sample TEE affirming', async () => {
    const p = await admin('set-resource-policy', '--affirming');
    expect(p.code, p.stderr).toBe(0);
    // No reference values yet: trustee's default policy leaves the token contraindicated.
    const denied = await client('get-resource', '--path', 'default/app-secret/key');
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toMatch(/PolicyDeny/);

    for (const args of SAMPLE_REFERENCE_VALUES) {
      const s = await admin('set-sample-reference-value', ...args);
      expect(s.code, s.stderr).toBe(0);
    }
    const g = await admin('get-reference-value', '--id', 'launch_digest');
    expect(g.code, g.stderr).toBe(0);
    expect(g.stdout).toContain('abcde');

    const r = await client('get-resource', '--path', 'default/app-secret/key');
    expect(r.code, r.stderr).toBe(0);
    expect(Buffer.from(r.stdout.trim(), 'base64')).toEqual(secret);
  });

  it('applies an uploaded attestation policy and refuses one that does not compile', async () => {
    const strict = join(dir, 'strict_cpu.rego');
    writeFileSync(
      strict,
      [
        'package policy',
        'import rego.v1',
        'default hardware := 97',
        'trust_claims := {"executables": 3, "hardware": hardware, "configuration": 2}',
      ].join('\n'),
    );
    const a = await admin('set-attestation-policy', '--id', 'default_cpu', '--policy-file', strict);
    expect(a.code, a.stderr).toBe(0);
    const denied = await client('get-resource', '--path', 'default/app-secret/key');
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toMatch(/PolicyDeny/);

    const bad = join(dir, 'bad.rego');
    writeFileSync(bad, 'package policy\nthis is not rego {');
    const b = await admin('set-attestation-policy', '--id', 'default_cpu', '--policy-file', bad);
    expect(b.code).not.toBe(0);
  });

  it('keeps resources and policies across a restart', async () => {
    await kbs.stop();
    await kbs.start();
    const p = await admin('set-resource-policy', '--allow-all');
    expect(p.code, p.stderr).toBe(0);
    const r = await client('get-resource', '--path', 'default/app-secret/key');
    expect(r.code, r.stderr).toBe(0);
    expect(Buffer.from(r.stdout.trim(), 'base64')).toEqual(secret);
  });

  it('rejects hostile resource paths with upstream error bodies', async () => {
    for (const path of ['default/../key', 'default/app-secret/key/extra', 'default//key']) {
      const r = await client('get-resource', '--path', path);
      expect(r.code, path).not.toBe(0);
    }
  });

  it('writes access-log lines with the guest user agent and the verifier result', async () => {
    const log = kbs.process.output();
    expect(log).toMatch(/"msg":"access"/);
    expect(log).toContain('attestation-agent-kbs-client/0.1.0');
    expect(log).toMatch(/"method":"POST","path":"\/kbs\/v0\/attest"/);
    expect(log).not.toContain(secret.toString('base64'));
  });
});
