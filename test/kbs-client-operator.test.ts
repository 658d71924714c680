// kbs-client as an operator meets it, against dist/bin/kbs over HTTPS with a self-signed certificate made
// by openssl: an untrusted certificate fails at once and says "pass --cert-file"; a missing resource is
// reported after one try; admin keys and tokens made by `kbs-client keygen` / `admin-token` are checked
// with openssl and accepted (or refused, for another role) by the KBS's admin API; and the console's
// endpoints as `config` subcommands. Each failure is one line on stderr, with a stack only on request.
import { execFileSync } from 'node:child_process';
import { createPublicKey, verify } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, runToEnd } from './helpers/process.js';
import { call } from './helpers/replicas.js';
import { type KbsHandle, prepareKbs } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-kbs-client-op-'));
/** No RUST_BACKTRACE (this workshop sets it) and no RUST_LOG: what a user sees by default. */
const ENV = { PATH: process.env.PATH ?? '', HOME: dir };
let kbs: KbsHandle;

const edKey = join(dir, 'keys', 'admin-ed.key');
const esKey = join(dir, 'keys', 'admin-es.key');

function kbsClient(args: string[], env: NodeJS.ProcessEnv = ENV) {
  return runToEnd(binary('kbs-client'), args, { env });
}
/** kbs-client with the KBS's URL and certificate, admin commands signed with the Ed25519 key. */
function admin(...args: string[]) {
  return kbsClient([
    ...['--url', kbs.url, '--cert-file', kbs.tls.certPath, 'config'],
    ...['--auth-private-key', edKey, ...args],
  ]);
}
/** The lines of stderr that are not log records (warnings are JSON lines of the shared logger). */
function messageLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => l !== '' && !l.startsWith('{'));
}

beforeAll(async () => {
  // Keys first: the KBS trusts the two public keys kbs-client keygen writes, besides its own.
  for (const [key, alg] of [
    [edKey, 'ed25519'],
    [esKey, 'es256'],
  ] as const) {
    const r = await kbsClient(['keygen', '-f', key, '--algorithm', alg]);
    expect(r, r.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toBe(
      `Wrote new private key: ${key}\nWrote new public key: ${key.replace(/\.key$/, '.pub')}\n`,
    );
  }
  kbs = await prepareKbs(dir);
  const text = readFileSync(kbs.configPath, 'utf8');
  const providers = /identity_providers = \[\{ public_key_uri = "([^"]+)" \}\]/;
  expect(text).toMatch(providers);
  writeFileSync(
    kbs.configPath,
    text
      .replace(
        providers,
        `identity_providers = [{ public_key_uri = "$1" }, { public_key_uri = "${edKey.replace(/\.key$/, '.pub')}" }, { public_key_uri = "${esKey.replace(/\.key$/, '.pub')}" }]`,
      )
      .replace('[admin]\n', '[admin]\nconsole = true\n'),
  );
  await kbs.start();
}, 60_000);

afterAll(async () => {
  await kbs?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('kbs-client keygen and admin-token', () => {
  it('writes a private key only its owner reads and the public key openssl derives from it', () => {
    for (const [key, type] of [
      [edKey, 'ED25519'],
      [esKey, 'EC'],
    ] as const) {
      expect(statSync(key).mode & 0o777).toBe(0o600);
      const text = execFileSync('openssl', ['pkey', '-in', key, '-noout', '-text'], { encoding: 'utf8' });
      expect(text).toContain(type === 'EC' ? 'NIST CURVE: P-256' : 'ED25519 Private-Key');
      const derived = execFileSync('openssl', ['pkey', '-in', key, '-pubout'], { encoding: 'utf8' });
      expect(readFileSync(key.replace(/\.key$/, '.pub'), 'utf8')).toBe(derived);
    }
  });

  it('never overwrites a key', async () => {
    const before = readFileSync(edKey, 'utf8');
    const r = await kbsClient(['keygen', '-f', edKey]);
    expect(r.code).toBe(1);
    expect(messageLines(r.stderr)).toEqual([
      `Error: cannot create ${edKey} (--output-file): already exists; keygen never overwrites a key: remove the old pair or choose another --output-file`,
    ]);
    expect(readFileSync(edKey, 'utf8')).toBe(before);
  });

  it('signs tokens openssl (EdDSA) and node:crypto (ES256) verify, with role and expiry', async () => {
    const ed = await kbsClient(['admin-token', '--auth-private-key', edKey, '--expiry', '90m']);
    expect(ed).toMatchObject({ code: 0, stderr: '' });
    const [h, p, s] = ed.stdout.trim().split('.') as [string, string, string];
    expect(JSON.parse(Buffer.from(h, 'base64url').toString())).toEqual({ alg: 'EdDSA', typ: 'JWT' });
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
    expect(claims.role).toBe('admin');
    expect(claims.exp - claims.iat).toBe(90 * 60);
    writeFileSync(join(dir, 'jwt.in'), `${h}.${p}`);
    writeFileSync(join(dir, 'jwt.sig'), Buffer.from(s, 'base64url'));
    const ok = execFileSync(
      'openssl',
      [
        ...['pkeyutl', '-verify', '-rawin', '-pubin', '-inkey', edKey.replace(/\.key$/, '.pub')],
        ...['-in', join(dir, 'jwt.in'), '-sigfile', join(dir, 'jwt.sig')],
      ],
      { encoding: 'utf8' },
    );
    expect(ok).toMatch(/Signature Verified Successfully/);

    const es = await kbsClient(['admin-token', '--auth-private-key', esKey, '--auth-role', 'viewer']);
    const [eh, ep, esig] = es.stdout.trim().split('.') as [string, string, string];
    expect(JSON.parse(Buffer.from(eh, 'base64url').toString()).alg).toBe('ES256');
    const esClaims = JSON.parse(Buffer.from(ep, 'base64url').toString());
    expect(esClaims.role).toBe('viewer');
    expect(esClaims.exp - esClaims.iat).toBe(7200);
    const pub = createPublicKey(readFileSync(esKey.replace(/\.key$/, '.pub')));
    const sig = Buffer.from(esig, 'base64url');
    expect(sig).toHaveLength(64);
    expect(verify('sha256', Buffer.from(`${eh}.${ep}`), { key: pub, dsaEncoding: 'ieee-p1363' }, sig)).toBe(
      true,
    );
  });

  it('refuses an expiry it cannot read, naming the flag (exit 2)', async () => {
    const r = await kbsClient(['admin-token', '--auth-private-key', edKey, '--expiry', 'soon']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^kbs-client: invalid value 'soon' for '--expiry'/);
  });

  it("is accepted by the KBS's admin API for the admin role, refused for another", async () => {
    for (const key of [edKey, esKey]) {
      const token = (await kbsClient(['admin-token', '--auth-private-key', key])).stdout.trim();
      const r = await call(kbs.tls.certPem, `${kbs.url}/kbs/v0/resource-policy`, 'GET', {
        authorization: `Bearer ${token}`,
      });
      expect(r.status, r.body).toBe(200);
    }
    const viewer = await kbsClient(['admin-token', '--auth-private-key', edKey, '--auth-role', 'viewer']);
    const refused = await call(kbs.tls.certPem, `${kbs.url}/kbs/v0/resource-policy`, 'GET', {
      authorization: `Bearer ${viewer.stdout.trim()}`,
    });
    expect(refused.status).toBe(401);
    expect(refused.body).toContain('AdminAuthAccess');
  });
});

describe('kbs-client against a certificate it does not trust', () => {
  it('fails at once, says pass --cert-file, and suggests no Node.js flags', async () => {
    const r = await kbsClient(['--url', kbs.url, 'attest']);
    expect(r.code).toBe(1);
    const lines = messageLines(r.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^Error: POST https:\/\/127\.0\.0\.1:\d+\/kbs\/v0\/auth: the KBS's TLS certificate is not trusted \(self-signed certificate\); pass --cert-file/,
    );
    // No retry: the handshake's retries log a warning each.
    expect(r.stderr).not.toMatch(/retry/i);
    expect(r.stderr).not.toMatch(/Node\.js|--use-|NODE_|NODE_EXTRA_CA_CERTS/);
  });

  it('says so the same way for the admin commands', async () => {
    const r = await kbsClient(['--url', kbs.url, 'config', '--auth-private-key', edKey, 'health']);
    expect(r.code).toBe(1);
    expect(messageLines(r.stderr)).toEqual([
      expect.stringMatching(
        /^Error: GET .*\/kbs\/v0\/admin\/health: the KBS's TLS certificate is not trusted .*; pass --cert-file/,
      ),
    ]);
  });

  it('refuses a --cert-file that holds no certificate', async () => {
    writeFileSync(join(dir, 'not-a-cert.toml'), 'foo = 1\n');
    const r = await kbsClient(['--url', kbs.url, '--cert-file', join(dir, 'not-a-cert.toml'), 'attest']);
    expect(r.code).toBe(1);
    expect(messageLines(r.stderr)).toEqual([
      `Error: ${join(dir, 'not-a-cert.toml')} (--cert-file) holds no PEM certificate; give the KBS's HTTPS certificate, or the CA that issued it, in PEM (-----BEGIN CERTIFICATE-----)`,
    ]);
  });
});

describe('kbs-client config: what the console can do', () => {
  beforeAll(async () => {
    writeFileSync(join(dir, 'secret'), 'top secret');
    for (const args of [
      ['set-resource-policy', '--allow-all'],
      ['set-resource', '--path', 'default/key/one', '--resource-file', join(dir, 'secret')],
      ['set-sample-reference-value', 'demo_probe', 'abc'],
    ]) {
      const r = await admin(...args);
      expect(r.code, r.stderr).toBe(0);
    }
  });

  it('lists resources', async () => {
    const r = await admin('list-resources');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([{ path: 'default/key/one', size: 10 }]);
  });

  it('prints the resource policy and the attestation policies', async () => {
    const text = await admin('get-resource-policy', '--text');
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^package policy\n/);
    expect(text.stdout).toContain('allow');
    const ids = await admin('get-attestation-policy');
    expect(ids.code, ids.stderr).toBe(0);
    const list = JSON.parse(ids.stdout) as string[];
    expect(list.length).toBeGreaterThan(0);
    const one = await admin('get-attestation-policy', '--id', list[0] as string);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/package policy/);
    const none = await admin('get-attestation-policy', '--id', 'no_such_policy');
    expect(none.code).toBe(1);
    expect(messageLines(none.stderr)).toEqual([
      expect.stringMatching(/HTTP 404 .*no attestation policy of that id/),
    ]);
  });

  it('reports a missing resource after one try, and lists the verdicts', async () => {
    const got = await kbsClient(
      ['--url', kbs.url, '--cert-file', kbs.tls.certPath, 'get-resource', '--path', 'default/key/one'],
      ENV,
    );
    expect(got.code, got.stderr).toBe(0);
    expect(Buffer.from(got.stdout.trim(), 'base64').toString()).toBe('top secret');

    const missing = await kbsClient(
      ['--url', kbs.url, '--cert-file', kbs.tls.certPath, 'get-resource', '--path', 'default/key/nothing'],
      { ...ENV, RUST_LOG: 'info' },
    );
    expect(missing.code).toBe(1);
    expect(messageLines(missing.stderr)).toEqual([
      "Error: get resource /kbs/v0/resource/default/key/nothing: no such resource at the KBS (or its resource storage failed): HTTP 401 (PluginInternalError): Plugin internal error; check --path; 'kbs-client config list-resources' lists what the KBS stores",
    ]);
    // One RCAR handshake, one GET: no "new RCAR handshake" after the 401.
    expect(missing.stderr).not.toMatch(/new RCAR handshake|retry/);

    const verdicts = await admin('list-verdicts', '--kind', 'resource', '--limit', '5');
    expect(verdicts.code, verdicts.stderr).toBe(0);
    const listed = JSON.parse(verdicts.stdout) as { verdicts: { resource?: string; kind: string }[] };
    expect(listed.verdicts.length).toBeGreaterThan(0);
    expect(listed.verdicts.every((v) => v.kind === 'resource')).toBe(true);
    const bad = await admin('list-verdicts', '--kind', 'everything');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/invalid value 'everything' for '--kind'/);
  });

  it('deletes a reference value, and says when there is none', async () => {
    const before = await admin('get-reference-value', '--id', 'demo_probe');
    expect(before.stdout).toContain('abc');
    const r = await admin('delete-reference-value', '--id', 'demo_probe');
    expect(r, r.stderr).toMatchObject({ code: 0, stdout: 'Delete reference value success\n' });
    const again = await admin('delete-reference-value', '--id', 'demo_probe');
    expect(again.code).toBe(1);
    expect(messageLines(again.stderr)).toEqual([
      'Error: delete reference value: the RVPS has no reference value named demo_probe; list them in the console, or read one with get-reference-value --id',
    ]);
  });

  it('shows health', async () => {
    const r = await admin('health');
    expect(r.code, r.stderr).toBe(0);
    const health = JSON.parse(r.stdout) as { uptimeSeconds: number; storage: { backend: string } };
    expect(health.uptimeSeconds).toBeGreaterThanOrEqual(0);
    expect(health.storage.backend).toBeTypeOf('string');
  });
});

describe('one line per failure, a stack on request', () => {
  it('gives the line of a TOML error, the unreachable KBS and what to do, each once', async () => {
    writeFileSync(join(dir, 'bad.toml'), 'a = 1\nfoo = [\n');
    const cases: [string, string[], RegExp][] = [
      [
        'kbs',
        ['-c', join(dir, 'bad.toml')],
        /^kbs: .*bad\.toml: Invalid TOML document: invalid value \(line 3, column 1\)$/,
      ],
      [
        'kbs-client',
        ['--url', 'http://127.0.0.1:1', 'config', '--auth-private-key', edKey, 'list-resources'],
        /^Error: GET http:\/\/127\.0\.0\.1:1\/kbs\/v0\/admin\/resources: connect ECONNREFUSED 127\.0\.0\.1:1; nothing listens there: is the service running, and are the host and port right\?$/,
      ],
      [
        'kbs-client',
        ['--cert-file', join(dir, 'missing.pem'), 'attest'],
        /^Error: Failed to read: .*missing\.pem \(--cert-file\): no such file or directory; check the path$/,
      ],
      [
        'attestation-service',
        ['--config-file', join(dir, 'bad.toml')],
        /^attestation-service: .*bad\.toml: Unexpected token .* is not valid JSON$/,
      ],
    ];
    // A port the KBS under test already holds.
    const busy = `127.0.0.1:${kbs.port}`;
    writeFileSync(join(dir, 'busy.toml'), readFileSync(kbs.configPath, 'utf8'));
    cases.push(
      [
        'kbs',
        ['--config-file', join(dir, 'busy.toml')],
        new RegExp(
          `^kbs: HTTPS initialization failed: cannot listen on ${busy}: listen EADDRINUSE: address already in use ${busy}; another process listens there: stop it or choose another address$`,
        ),
      ],
      [
        'rvps',
        ['--address', busy],
        new RegExp(`^rvps: cannot listen on ${busy}: .*EADDRINUSE.*; another process listens there`),
      ],
      [
        'attestation-service',
        ['--socket', busy],
        new RegExp(
          `^attestation-service: cannot listen on ${busy}: .*EADDRINUSE.*; another process listens there`,
        ),
      ],
    );
    for (const [command, args, line] of cases) {
      const r = await runToEnd(binary(command), args, { env: ENV });
      expect(r.code, command).toBe(1);
      const lines = messageLines(r.stderr);
      expect(lines, `${command}: ${r.stderr}`).toHaveLength(1);
      expect(lines[0]).toMatch(line);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      // With RUST_LOG=debug the same line comes first, then where it came from.
      const debug = await runToEnd(binary(command), args, { env: { ...ENV, RUST_LOG: 'debug' } });
      expect(debug.code).toBe(1);
      expect(messageLines(debug.stderr)[0]).toMatch(line);
      expect(debug.stderr).toMatch(/\n\s+at /);
    }
  });
});
