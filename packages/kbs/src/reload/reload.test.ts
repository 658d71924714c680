// Hot reload of mounted files without a restart: TLS key and certificate, resources, policies and
// reference values, each updated the way kubelet updates a ConfigMap or Secret volume (a `..data` symlink
// swap). The fallback poll is off, so these changes are noticed through the directory watches alone.
import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { jweDecrypt } from '@broker/protocol';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from '../config.js';
import { type RunningKbs, startKbs } from '../kbs.js';
import { BUILTIN_RESOURCE_POLICIES } from '../policy/resource-policy.js';
import { handshake, send } from '../testing/client.js';
import { kubeMount, selfSignedCert } from '../testing/mount.js';

let tmp: string;
const running: RunningKbs[] = [];
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'kbs-reload-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
afterEach(async () => {
  while (running.length > 0) await running.pop()?.close();
});

const WATCH = { debounceMs: 20, pollMs: 0 };

async function start(toml: string, lines: string[] = []): Promise<RunningKbs> {
  const logger = pino({ level: 'info' }, { write: (s: string) => lines.push(s) });
  const kbs = await startKbs(parseKbsConfigText(toml), { logger, watch: WATCH });
  running.push(kbs);
  return kbs;
}

/** Polls `probe` until it returns true; the test's own timeout bounds the wait. */
async function eventually(probe: () => Promise<boolean>): Promise<void> {
  while (!(await probe())) await new Promise((r) => setTimeout(r, 20));
}

function fingerprintOf(url: string): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect({ host: u.hostname, port: Number(u.port), rejectUnauthorized: false }, () => {
      const raw = s.getPeerCertificate().raw;
      s.end();
      resolve(new X509Certificate(raw).fingerprint256);
    });
    s.on('error', reject);
  });
}

const fp = (cert: Buffer) => new X509Certificate(cert).fingerprint256;

function httpsConfig(keyPath: string, certPath: string, extra = ''): string {
  return `
[http_server]
sockets = ["127.0.0.1:0"]
private_key = "${keyPath}"
certificate = "${certPath}"
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
${extra}`;
}

describe('TLS certificate reload', () => {
  it('serves a certificate swapped in through the Secret volume to new connections', async () => {
    const dir = join(tmp, 'tls-one');
    mkdirSync(dir);
    const a = selfSignedCert(tmp, 'kbs-a');
    const b = selfSignedCert(tmp, 'kbs-b');
    const mount = join(dir, 'https');
    kubeMount(mount, { 'tls.key': a.key, 'tls.crt': a.cert });
    const lines: string[] = [];
    const kbs = await start(httpsConfig(join(mount, 'tls.key'), join(mount, 'tls.crt')), lines);
    const url = kbs.urls[0] as string;
    expect(await fingerprintOf(url)).toBe(fp(a.cert));

    kubeMount(mount, { 'tls.key': b.key, 'tls.crt': b.cert });
    await eventually(async () => (await fingerprintOf(url)) === fp(b.cert));
    expect(lines.some((l) => l.includes('TLS certificate reloaded'))).toBe(true);
    // The server still answers requests over the new certificate.
    const r = await send(`${url}/healthz`, { ca: b.cert.toString() });
    expect(r.status).toBe(200);
  });

  it('keeps the current pair while the key and certificate Secrets disagree', async () => {
    const dir = join(tmp, 'tls-two');
    mkdirSync(dir);
    const a = selfSignedCert(tmp, 'kbs-c');
    const b = selfSignedCert(tmp, 'kbs-d');
    const keyMount = join(dir, 'https-key');
    const certMount = join(dir, 'https-cert');
    kubeMount(keyMount, { 'tls.key': a.key });
    kubeMount(certMount, { 'tls.crt': a.cert });
    const lines: string[] = [];
    const kbs = await start(httpsConfig(join(keyMount, 'tls.key'), join(certMount, 'tls.crt')), lines);
    const url = kbs.urls[0] as string;

    // The certificate Secret is updated first: the new certificate does not fit the current key.
    kubeMount(certMount, { 'tls.crt': b.cert });
    await kbs.reload();
    expect(await fingerprintOf(url)).toBe(fp(a.cert));
    expect(lines.some((l) => l.includes('not a usable pair'))).toBe(true);

    kubeMount(keyMount, { 'tls.key': b.key });
    await eventually(async () => (await fingerprintOf(url)) === fp(b.cert));
  });
});

function plainConfig(mounted: string, extra = ''): string {
  return `
[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[[plugins]]
name = "resource"
[mounted_files]
${mounted}
${extra}`;
}

describe('[mounted_files]', () => {
  it('serves resources from mounted Secrets and follows their updates, removals and additions', async () => {
    const root = join(tmp, 'resources');
    const policyDir = join(tmp, 'resource-policy');
    kubeMount(join(root, 'default', 'app-secret'), { key: 'v1', other: 'o' });
    kubeMount(policyDir, { 'policy.rego': BUILTIN_RESOURCE_POLICIES.allow_all });
    const kbs = await start(plainConfig(`resources = ["${root}"]\nresource_policy = "${policyDir}"`));
    const base = kbs.urls[0] as string;
    const { token, key } = await handshake(base);
    const fetch = async (path: string) => {
      const r = await send(`${base}/kbs/v0/resource/${path}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      return r.status === 200
        ? Buffer.from(jweDecrypt(r.json() as never, key.privateKey)).toString()
        : r.status;
    };
    expect(await fetch('default/app-secret/key')).toBe('v1');

    kubeMount(join(root, 'default', 'app-secret'), { key: 'v2' });
    await eventually(async () => (await fetch('default/app-secret/key')) === 'v2');
    // `other` left the Secret: it is no longer served.
    await eventually(async () => (await fetch('default/app-secret/other')) === 401);

    // A Secret mounted later under the root is picked up too.
    kubeMount(join(root, 'default', 'second'), { tag: 'new' });
    await eventually(async () => (await fetch('default/second/tag')) === 'new');

    // The resource policy ConfigMap now denies everything.
    kubeMount(policyDir, { 'policy.rego': BUILTIN_RESOURCE_POLICIES.deny_all });
    await eventually(async () => (await fetch('default/second/tag')) === 401);
  });

  it('applies attestation policies and reference values from mounted ConfigMaps', async () => {
    const policies = join(tmp, 'attestation-policy');
    const rvs = join(tmp, 'reference-values');
    const policy = (fallback: number) =>
      `package policy\nimport rego.v1\ndefault executables := ${fallback}\nexecutables := 2 if { query_reference_value("svn") == ["1"] }\ntrust_claims := {"executables": executables}\n`;
    const message = (svn: string) =>
      JSON.stringify({
        version: '0.1.0',
        type: 'sample',
        payload: Buffer.from(JSON.stringify({ svn: [svn] })).toString('base64'),
      });
    kubeMount(policies, { 'default_cpu.rego': policy(33) });
    kubeMount(rvs, { 'reference-values.json': message('0') });
    const lines: string[] = [];
    const kbs = await start(
      plainConfig(`attestation_policies = ["${policies}"]\nreference_values = ["${rvs}"]`),
      lines,
    );
    const base = kbs.urls[0] as string;
    const executables = async () => {
      const { token } = await handshake(base);
      const payload = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString());
      return payload.submods.cpu0['ear.trustworthiness-vector'].executables as number;
    };
    expect(await executables()).toBe(33);

    // trustee-operator's ConfigMap form (`{"<name>": {"expiration", "value"}}`) is read too.
    kubeMount(rvs, {
      'reference-values.json': JSON.stringify({ svn: { expiration: '2027-01-01T00:00:00Z', value: ['1'] } }),
    });
    await eventually(async () => (await executables()) === 2);

    kubeMount(policies, { 'default_cpu.rego': policy(34) });
    kubeMount(rvs, { 'reference-values.json': message('0') });
    await eventually(async () => (await executables()) === 34);

    // A policy that does not compile is refused and logged; the previous one stays in use.
    kubeMount(policies, { 'default_cpu.rego': 'package policy\nthis is not rego' });
    await eventually(async () => lines.some((l) => l.includes('mounted file not applied')));
    expect(await executables()).toBe(34);
    expect((await send(`${base}/kbs/v0/reference-value/svn`)).json()).toEqual(['0']);
  });

  it('refuses to start when a mounted file cannot be applied, naming it', async () => {
    const policies = join(tmp, 'bad-policy');
    kubeMount(policies, { 'default_cpu.rego': 'not rego at all' });
    const err = await startKbs(parseKbsConfigText(plainConfig(`attestation_policies = ["${policies}"]`)), {
      logger: pino({ level: 'silent' }),
      watch: WATCH,
    }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/mounted files.*bad-policy\/default_cpu\.rego/);
    const missing = await startKbs(parseKbsConfigText(plainConfig(`resources = ["${join(tmp, 'nope')}"]`)), {
      logger: pino({ level: 'silent' }),
      watch: WATCH,
    }).catch((e: unknown) => e);
    expect((missing as Error).message).toMatch(/nope/);
  });

  it('sets the mounted resource policy over the stored one at start', async () => {
    const policyDir = join(tmp, 'resource-policy-start');
    kubeMount(policyDir, {
      'resource-policy.rego': BUILTIN_RESOURCE_POLICIES.allow_all,
      'x.rego': 'ignored',
    });
    const kbs = await start(plainConfig(`resource_policy = "${policyDir}"`));
    const base = kbs.urls[0] as string;
    const r = await send(`${base}/kbs/v0/resource-policy`);
    expect(r.status).toBe(200);
    const post = await send(`${base}/kbs/v0/resource/default/k/t`, { method: 'POST', body: 'x' });
    expect(post.status).toBe(200);
    const { token } = await handshake(base);
    const got = await send(`${base}/kbs/v0/resource/default/k/t`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(got.status).toBe(200);
  });
});
