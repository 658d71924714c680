// dist/bin/kbs over HTTPS, driven by dist/bin/kbs-client: the operator's admin calls and a sample-TEE guest.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, freePort, type Running, runToEnd, start, waitForListen } from './helpers/process.js';
import { makeServerCert } from './helpers/tls.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-kbs-e2e-'));
let port = 0;
let kbs: Running;
const secret = randomBytes(32);

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function writeConfig(): string {
  const tls = makeServerCert(['localhost', '127.0.0.1'], dir);
  // Token signer: a P-256 key with a self-signed certificate that the KBS trusts for x5c chains.
  openssl(
    'genpkey',
    '-algorithm',
    'EC',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-out',
    join(dir, 'token.key'),
  );
  openssl(
    'req',
    '-x509',
    '-new',
    '-key',
    join(dir, 'token.key'),
    '-out',
    join(dir, 'token.crt'),
    '-days',
    '30',
    '-subj',
    '/CN=token-signer',
  );
  // Admin: an Ed25519 key whose public half authenticates admin JWTs.
  openssl('genpkey', '-algorithm', 'ed25519', '-out', join(dir, 'admin.key'));
  openssl('pkey', '-in', join(dir, 'admin.key'), '-pubout', '-out', join(dir, 'admin.pub'));
  const cfg = `
[http_server]
sockets = ["127.0.0.1:${port}"]
private_key = "${tls.keyPath}"
certificate = "${tls.certPath}"

[attestation_token]
trusted_certs_paths = ["${join(dir, 'token.crt')}"]

[attestation_service]
type = "coco_as_builtin"

[attestation_service.attestation_token_broker]
duration_min = 5

[attestation_service.attestation_token_broker.signer]
key_path = "${join(dir, 'token.key')}"
cert_path = "${join(dir, 'token.crt')}"

[attestation_service.rvps_config]
type = "BuiltIn"

[admin]
authorization_mode = "AuthenticatedAuthorization"

[admin.authentication.bearer_jwt]
identity_providers = [{ public_key_uri = "${join(dir, 'admin.pub')}" }]

[admin.authorization.regex_acl]
acls = [{ role = "admin", allowed_endpoints = "^/kbs/v0/.+$" }]

[storage_backend]
storage_type = "LocalFs"

[storage_backend.backends.local_fs]
dir_path = "${join(dir, 'storage')}"

[[plugins]]
name = "resource"
storage_backend_type = "kvstorage"
`;
  const path = join(dir, 'kbs-config.toml');
  writeFileSync(path, cfg);
  return path;
}

let configPath = '';

async function startKbs(): Promise<void> {
  kbs = start(binary('kbs'), ['--config-file', configPath]);
  await waitForListen({ port }, kbs);
}

function client(...args: string[]) {
  return runToEnd(binary('kbs-client'), [
    '--url',
    `https://127.0.0.1:${port}`,
    '--cert-file',
    join(dir, 'https.crt'),
    ...args,
  ]);
}

function admin(...args: string[]) {
  return client('config', '--auth-private-key', join(dir, 'admin.key'), ...args);
}

beforeAll(async () => {
  port = await freePort();
  configPath = writeConfig();
  await startKbs();
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
    // The repository is the directory tree a mounted Kubernetes Secret gives.
    expect(readFileSync(join(dir, 'storage', 'repository', 'default', 'app-secret', 'key'))).toEqual(secret);
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

    for (const args of [
      ['launch_digest', 'abcde'],
      ['svn', '1'],
      ['major_version', '1', '--as-integer', '--as-single-value'],
      ['minimum_minor_version', '4', '--as-integer', '--as-single-value'],
    ]) {
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
    await startKbs();
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
    const log = kbs.output();
    expect(log).toMatch(/"msg":"access"/);
    expect(log).toContain('attestation-agent-kbs-client/0.1.0');
    expect(log).toContain('POST /kbs/v0/attest');
    expect(log).not.toContain(secret.toString('base64'));
  });
});
