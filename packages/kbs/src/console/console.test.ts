// The console over real HTTP: its bundled files and headers, sign-in with an admin JWT, the CSRF check
// on every state-changing call, the ACL on every action, the syntax check and the dry run.
import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signJwt } from '@broker/auth/testing';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from '../config.js';
import { type RunningKbs, startKbs } from '../kbs.js';
import { handshake, type Response, send } from '../testing/client.js';
import { CONSOLE_ASSETS } from './assets.gen.js';

const running: RunningKbs[] = [];
afterEach(async () => {
  while (running.length > 0) await running.pop()?.close();
});
let tmp: string;
const idp = generateKeyPairSync('ec', { namedCurve: 'P-256' });
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'kbs-console-'));
  writeFileSync(join(tmp, 'idp.pem'), idp.publicKey.export({ type: 'spki', format: 'pem' }));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const jwt = (role: string, sub?: string) =>
  signJwt(
    { alg: 'ES256' },
    { role, exp: Math.floor(Date.now() / 1000) + 600, ...(sub !== undefined && { sub }) },
    idp.privateKey,
  );

async function start(consoleOn = true): Promise<string> {
  const toml = `[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "AuthenticatedAuthorization"
console = ${consoleOn}
[admin.authentication.bearer_jwt]
identity_providers = [{ public_key_uri = "${join(tmp, 'idp.pem')}" }]
[admin.authorization.regex_acl]
acls = [
  { role = "admin", allowed_endpoints = "^/kbs/v0/.+$" },
  { role = "viewer", allowed_endpoints = "^/kbs/v0/admin/(verdicts(/[0-9]+)?|console/session|resources|resource-policy)$" },
]
[[plugins]]
name = "resource"
`;
  const kbs = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
  running.push(kbs);
  return kbs.urls[0] as string;
}

/** The attestations so far are in the log (recorded after their replies). */
const recorded = () => (running[running.length - 1] as RunningKbs).verdictsRecorded();

interface Signed {
  cookie: string;
  csrf: string;
}

async function signIn(base: string, role: string, sub?: string): Promise<Signed> {
  const r = await send(`${base}/kbs/v0/admin/console/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token: jwt(role, sub) }),
  });
  expect(r.status).toBe(200);
  const setCookie = String(r.headers['set-cookie']);
  expect(setCookie).toMatch(/^kbs-console=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; Secure; SameSite=Strict/);
  return { cookie: setCookie.split(';')[0] as string, csrf: (r.json() as { csrf: string }).csrf };
}

const call = (base: string, s: Signed, method: string, path: string, body?: unknown, csrf = true) =>
  send(`${base}/kbs/v0${path}`, {
    method,
    headers: { cookie: s.cookie, ...(csrf && { 'x-csrf-token': s.csrf }) },
    ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });

const b64u = (s: string) => Buffer.from(s).toString('base64url');
const ALLOW_ALL = 'package policy\ndefault allow := true\n';

describe('operator console', () => {
  it('serves the bundled page with a strict CSP, and nothing when disabled', async () => {
    for (const name of ['index.html', 'console.js', 'console.css']) {
      expect(CONSOLE_ASSETS[name]?.body, `${name}: run generate-assets.mjs`).toBe(
        readFileSync(join(import.meta.dirname, 'page', name), 'utf8'),
      );
    }
    const base = await start();
    const page = await send(`${base}/console/`);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(page.text).not.toMatch(/<script>|<script [^>]*>[^<]/);
    expect(page.text).not.toMatch(/https?:\/\//);
    expect((await send(`${base}/console/console.js`)).headers['content-type']).toBe(
      'text/javascript; charset=utf-8',
    );
    expect((await send(`${base}/console/../kbs-config.toml`)).status).toBe(404);
    expect((await send(`${base}/console/constructor`)).status).toBe(404);
    const off = await start(false);
    expect((await send(`${off}/console/`)).status).toBe(404);
    expect(
      (await send(`${off}/kbs/v0/admin/console/session`, { method: 'POST', body: '{}' })).status,
    ).not.toBe(200);
  });

  it('signs in with an admin JWT and refuses a bad one', async () => {
    const base = await start();
    // A form post from another site (text/plain) cannot sign the browser in.
    const form = await send(`${base}/kbs/v0/admin/console/session`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ token: jwt('admin') }),
    });
    expect(form.status).toBe(415);
    expect(form.headers['set-cookie']).toBeUndefined();
    const bad = await send(`${base}/kbs/v0/admin/console/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: jwt('admin').slice(0, -4) }),
    });
    expect(bad.status).toBe(401);
    expect(bad.headers['set-cookie']).toBeUndefined();
    const s = await signIn(base, 'admin');
    const me = await call(base, s, 'GET', '/admin/console/session');
    expect(me.json()).toEqual({ role: 'admin', csrf: s.csrf });
    // Sign-out needs the CSRF token too, and ends the session.
    expect((await call(base, s, 'DELETE', '/admin/console/session', undefined, false)).status).toBe(403);
    expect((await call(base, s, 'DELETE', '/admin/console/session')).status).toBe(200);
    expect((await call(base, s, 'GET', '/admin/console/session')).status).toBe(401);
    expect((await call(base, s, 'GET', '/admin/verdicts')).status).toBe(401);
  });

  it('takes sign-in as application/json only, parameters allowed', async () => {
    const base = await start();
    const post = (type: string) =>
      send(`${base}/kbs/v0/admin/console/session`, {
        method: 'POST',
        headers: { 'content-type': type },
        body: JSON.stringify({ token: jwt('admin') }),
      });
    for (const type of [
      'application/json-patch',
      'application/json-patch+json',
      'application/jsonx',
      'application/json2; charset=utf-8',
      'text/plain',
      'text/plain; application/json',
      '',
    ]) {
      const r = await post(type);
      expect(r.status, type).toBe(415);
      expect(r.headers['set-cookie'], type).toBeUndefined();
    }
    for (const type of [
      'application/json',
      'application/json; charset=utf-8',
      'Application/JSON ;charset=UTF-8',
    ]) {
      expect((await post(type)).status, type).toBe(200);
    }
  });

  it('answers every admin call with Cache-Control: no-store, the sign-in and its CSRF token too', async () => {
    const base = await start();
    const signInAnswer = await send(`${base}/kbs/v0/admin/console/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: jwt('admin') }),
    });
    expect(signInAnswer.status).toBe(200);
    expect(signInAnswer.headers['cache-control']).toBe('no-store');
    const s: Signed = {
      cookie: String(signInAnswer.headers['set-cookie']).split(';')[0] as string,
      csrf: (signInAnswer.json() as { csrf: string }).csrf,
    };
    const answers = [
      await call(base, s, 'GET', '/admin/console/session'),
      await call(base, s, 'GET', '/admin/verdicts'),
      await call(base, s, 'GET', '/admin/resources'),
      await call(base, s, 'GET', '/admin/health'),
      await call(base, s, 'GET', '/admin/resource-policy'),
      await call(base, s, 'POST', '/admin/resource-policy/check', { policy: ALLOW_ALL }),
      await send(`${base}/kbs/v0/admin/verdicts`),
      await call(base, s, 'DELETE', '/admin/console/session'),
      await send(`${base}/kbs/v0/admin/console/session`),
    ];
    for (const r of answers) expect(r.headers['cache-control']).toBe('no-store');
  });

  it('caps sessions per identity: one subject signing in again and again signs nobody else out', async () => {
    const base = await start();
    const other = await signIn(base, 'admin', 'operator-b');
    const unnamed = await signIn(base, 'viewer');
    const first = await signIn(base, 'admin', 'operator-a');
    let last = first;
    for (let i = 0; i < 70; i++) last = await signIn(base, 'admin', 'operator-a');
    expect((await call(base, other, 'GET', '/admin/console/session')).status).toBe(200);
    expect((await call(base, other, 'GET', '/admin/verdicts')).status).toBe(200);
    expect((await call(base, unnamed, 'GET', '/admin/console/session')).status).toBe(200);
    expect((await call(base, last, 'GET', '/admin/console/session')).status).toBe(200);
    // The repeated identity's oldest session is the one that went.
    expect((await call(base, first, 'GET', '/admin/console/session')).status).toBe(401);
  });

  it('refuses every state-changing call without the CSRF token', async () => {
    const base = await start();
    const s = await signIn(base, 'admin');
    const policy = { policy: b64u(ALLOW_ALL) };
    const refused = (r: Response) => {
      expect(r.status).toBe(403);
      expect(r.text).toContain('x-csrf-token');
    };
    refused(await call(base, s, 'POST', '/resource-policy', policy, false));
    refused(await call(base, s, 'POST', '/resource/default/key/a', 'v', false));
    refused(await call(base, s, 'DELETE', '/resource/default/key/a', undefined, false));
    refused(
      await send(`${base}/kbs/v0/resource-policy`, {
        method: 'POST',
        headers: {
          cookie: s.cookie,
          'x-csrf-token': `${s.csrf.slice(0, -1)}${s.csrf.endsWith('A') ? 'B' : 'A'}`,
        },
        body: JSON.stringify(policy),
      }),
    );
    expect((await call(base, s, 'POST', '/resource-policy', policy)).status).toBe(200);
    expect((await call(base, s, 'POST', '/resource/default/key/a', 'value-bytes')).status).toBe(200);
    const list = await call(base, s, 'GET', '/admin/resources');
    expect(list.json()).toEqual({ resources: [{ path: 'default/key/a', size: 11 }] });
    expect(list.text).not.toContain('value-bytes');
  });

  it('applies the ACL to each action: a viewer reads but cannot change', async () => {
    const base = await start();
    const s = await signIn(base, 'viewer');
    expect((await call(base, s, 'GET', '/admin/verdicts')).status).toBe(200);
    expect((await call(base, s, 'GET', '/admin/resources')).status).toBe(200);
    expect((await call(base, s, 'GET', '/admin/resource-policy')).json()).toMatchObject({
      policy: expect.stringContaining('package policy'),
    });
    expect((await call(base, s, 'POST', '/resource-policy', { policy: b64u(ALLOW_ALL) })).status).toBe(401);
    expect((await call(base, s, 'POST', '/resource/default/key/a', 'v')).status).toBe(401);
    expect((await call(base, s, 'POST', '/admin/resource-policy/check', { policy: ALLOW_ALL })).status).toBe(
      401,
    );
  });

  it('checks Rego syntax and dry-runs a policy on a recorded verdict', async () => {
    const base = await start();
    const s = await signIn(base, 'admin');
    await handshake(base);
    await recorded();
    const verdicts = (await call(base, s, 'GET', '/admin/verdicts')).json() as { verdicts: { id: number }[] };
    const id = verdicts.verdicts[0]?.id;
    const check = await call(base, s, 'POST', '/admin/resource-policy/check', {
      policy: 'package policy\nallow if {',
    });
    expect(check.json()).toMatchObject({ ok: false, error: expect.any(String) });
    expect(
      (await call(base, s, 'POST', '/admin/resource-policy/check', { policy: ALLOW_ALL })).json(),
    ).toEqual({
      ok: true,
    });
    const run = (policy: string, resource = 'default/key/a') =>
      call(base, s, 'POST', '/admin/resource-policy/dry-run', { policy, verdict: id, resource });
    expect((await run(ALLOW_ALL)).json()).toEqual({ allow: true, result: true });
    const byTee =
      'package policy\ndefault allow := false\nallow if input.submods.cpu0["ear.veraison.annotated-evidence"].sample\n';
    expect((await run(byTee)).json()).toMatchObject({ allow: true });
    const byPath = 'package policy\ndefault allow := false\nallow if data["resource-path"][2] == "b"\n';
    expect((await run(byPath)).json()).toMatchObject({ allow: false });
    expect((await run(byPath, 'default/key/b')).json()).toMatchObject({ allow: true });
    expect((await run(ALLOW_ALL, '../x')).status).toBe(400);
    expect(
      (await call(base, s, 'POST', '/admin/resource-policy/dry-run', { policy: ALLOW_ALL, verdict: 999 }))
        .status,
    ).toBe(404);
  });

  it('replays a resource verdict on the policy version that decided it or the current one, and serves that text', async () => {
    const base = await start();
    const s = await signIn(base, 'admin');
    const { cookie } = await handshake(base);
    await recorded();
    expect((await send(`${base}/kbs/v0/resource/default/key/a`, { headers: { cookie } })).status).toBe(401);
    const [denied] = (
      (await call(base, s, 'GET', '/admin/verdicts?kind=resource')).json() as {
        verdicts: { id: number; policyVersion: string }[];
      }
    ).verdicts;
    const before = (await call(base, s, 'GET', '/admin/resource-policy')).json() as { policy: string };
    expect(denied?.policyVersion).toBe(createHash('sha256').update(before.policy).digest('hex'));
    expect((await call(base, s, 'POST', '/resource-policy', { policy: b64u(ALLOW_ALL) })).status).toBe(200);

    const replay = (version: unknown) =>
      call(base, s, 'POST', '/admin/resource-policy/dry-run', {
        version,
        verdict: denied?.id,
        resource: 'default/key/a',
      });
    expect((await replay('recorded')).json()).toEqual({
      allow: false,
      result: false,
      version: denied?.policyVersion,
    });
    expect((await replay('current')).json()).toEqual({
      allow: true,
      result: true,
      version: createHash('sha256').update(ALLOW_ALL).digest('hex'),
    });
    expect((await replay(denied?.policyVersion)).json()).toMatchObject({ allow: false });
    expect((await replay('0'.repeat(64))).status).toBe(404);
    expect((await replay('bogus')).status).toBe(400);
    expect((await replay(undefined)).status).toBe(400);

    // The text of that version, for the console's diff; nothing for a hash never kept or a bad one.
    const kept = await call(base, s, 'GET', `/admin/policy-versions/${denied?.policyVersion}`);
    expect(kept.json()).toMatchObject({ kind: 'resource', id: 'resource-policy', text: before.policy });
    expect((await call(base, s, 'GET', `/admin/policy-versions/${'0'.repeat(64)}`)).status).toBe(404);
    expect((await call(base, s, 'GET', '/admin/policy-versions/..%2Fkbs')).status).toBe(404);
    const viewer = await signIn(base, 'viewer');
    expect((await call(base, viewer, 'GET', `/admin/policy-versions/${denied?.policyVersion}`)).status).toBe(
      401,
    );
  });
});

describe('health', () => {
  it('reports uptime, storage and the counters with their rate per minute', async () => {
    const { KbsMetrics } = await import('../metrics.js');
    const { Health } = await import('./health.js');
    let t = 1_000_000;
    const metrics = new KbsMetrics();
    const h = new Health(metrics, { backend: 'Memory', sessions: 'Memory' }, () => t);
    metrics.authRequests.inc(30);
    t += 30_000;
    expect(await h.report()).toMatchObject({
      uptimeSeconds: 30,
      storage: { backend: 'Memory' },
      totals: { auth: 30 },
      perMinute: { auth: 60 },
      rateWindowSeconds: 30,
    });
    t += 60_000;
    metrics.authRequests.inc(10);
    // The base is now the sample taken at 30 s: 10 more in 60 s.
    expect((await h.report()).perMinute).toMatchObject({ auth: 10 });
  });

  it('is served to a role the ACL allows', async () => {
    const base = await start();
    const s = await signIn(base, 'admin');
    expect((await call(base, s, 'GET', '/admin/health')).json()).toMatchObject({
      storage: { backend: 'Memory', sessions: 'Memory', verdictLog: 'Memory' },
      replicas: 1,
      totals: { auth: 0 },
    });
    const viewer = await signIn(base, 'viewer');
    expect((await call(base, viewer, 'GET', '/admin/health')).status).toBe(401);
  });
});

describe('attestation policies and reference values', () => {
  const svnMessage = (svn: string[]) =>
    JSON.stringify({
      version: '0.1.0',
      type: 'sample',
      payload: Buffer.from(JSON.stringify({ svn })).toString('base64'),
    });
  // Affirming when the evidence's svn is a registered one, else warning.
  const BY_SVN =
    'package policy\ndefault trust_claims := {"executables": 33}\ntrust_claims := {"executables": 2} if {\n  input.sample.svn in query_reference_value("svn")\n}\n';

  it('lists and reads the stored policies, checks a text, and dry runs it on a verdict with the registered reference values', async () => {
    const base = await start();
    const s = await signIn(base, 'admin');
    await handshake(base);
    await recorded();
    const id = ((await call(base, s, 'GET', '/admin/verdicts')).json() as { verdicts: { id: number }[] })
      .verdicts[0]?.id;
    const list = (await call(base, s, 'GET', '/admin/attestation-policy')).json() as { policies: string[] };
    expect(list.policies).toEqual(expect.arrayContaining(['default_cpu', 'default_gpu']));
    const one = (await call(base, s, 'GET', '/admin/attestation-policy/default_cpu')).json() as {
      policy: string;
    };
    expect(one.policy).toContain('package policy');
    expect((await call(base, s, 'GET', '/admin/attestation-policy/nope')).status).toBe(404);
    expect((await call(base, s, 'GET', '/admin/attestation-policy/.hidden')).status).toBe(404);

    const check = (policy: string) => call(base, s, 'POST', '/admin/attestation-policy/check', { policy });
    expect((await check('package policy\ntrust_claims := {')).json()).toMatchObject({ ok: false });
    expect((await check(BY_SVN)).json()).toEqual({ ok: true });

    const dryRun = (policy: string, verdict = id) =>
      call(base, s, 'POST', '/admin/attestation-policy/dry-run', { policy, verdict });
    expect((await dryRun(BY_SVN)).json()).toEqual({
      submod: 'cpu0',
      status: 'warning',
      trustVector: { executables: 33 },
      vector: [{ claim: 'executables', value: 33, tier: 'warning', meaning: 'executables not recognised' }],
    });
    expect((await call(base, s, 'POST', '/reference-value', svnMessage(['1']))).status).toBe(200);
    expect((await dryRun(BY_SVN)).json()).toMatchObject({
      status: 'affirming',
      trustVector: { executables: 2 },
    });
    // The stored policy on the same claims, and errors the policy makes.
    expect((await dryRun(one.policy)).json()).toMatchObject({ submod: 'cpu0', status: expect.any(String) });
    expect((await dryRun('package policy\ntrust_claims := {"bogus": 1}\n')).json()).toMatchObject({
      error: expect.stringContaining('unknown trust claim'),
    });
    expect((await dryRun(BY_SVN, 999)).status).toBe(404);
    // Replayed on the stored policy that appraised it (recorded by version) and on the current one.
    const att = (await call(base, s, 'GET', `/admin/verdicts/${id}`)).json() as {
      appraisals: { policyVersion: string }[];
    };
    expect(att.appraisals[0]?.policyVersion).toBe(createHash('sha256').update(one.policy).digest('hex'));
    for (const version of ['recorded', 'current']) {
      expect(
        (await call(base, s, 'POST', '/admin/attestation-policy/dry-run', { version, verdict: id })).json(),
      ).toMatchObject({
        submod: 'cpu0',
        status: expect.any(String),
        version: att.appraisals[0]?.policyVersion,
      });
    }
    expect(
      (
        await call(base, s, 'POST', '/admin/attestation-policy/dry-run', {
          policy: BY_SVN,
          verdict: id,
          submod: 'gpu0',
        })
      ).status,
    ).toBe(404);

    // Saving goes through the admin API, which compiles before storing.
    const save = await call(base, s, 'POST', '/attestation-policy', {
      policy_id: 'by_svn_cpu',
      policy: b64u(BY_SVN),
    });
    expect(save.status).toBe(200);
    expect(
      ((await call(base, s, 'GET', '/admin/attestation-policy')).json() as { policies: string[] }).policies,
    ).toContain('by_svn_cpu');
  });

  it('lists reference values and expires one; a viewer and a call without the CSRF token cannot', async () => {
    const base = await start();
    const s = await signIn(base, 'admin');
    expect((await call(base, s, 'POST', '/reference-value', svnMessage(['1', '2']))).status).toBe(200);
    const list = (await call(base, s, 'GET', '/admin/reference-values')).json() as {
      referenceValues: { name: string; expiration: string; value: unknown }[];
    };
    expect(list.referenceValues).toEqual([
      {
        name: 'svn',
        expiration: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
        value: ['1', '2'],
        expired: false,
      },
    ]);
    expect((await call(base, s, 'DELETE', '/admin/reference-values/svn', undefined, false)).status).toBe(403);
    const viewer = await signIn(base, 'viewer');
    expect((await call(base, viewer, 'GET', '/admin/reference-values')).status).toBe(401);
    expect((await call(base, viewer, 'DELETE', '/admin/reference-values/svn')).status).toBe(401);
    expect((await call(base, viewer, 'GET', '/admin/attestation-policy')).status).toBe(401);

    expect((await call(base, s, 'DELETE', '/admin/reference-values/svn')).json()).toEqual({ expired: 'svn' });
    expect((await call(base, s, 'GET', '/admin/reference-values')).json()).toEqual({ referenceValues: [] });
    expect((await call(base, s, 'DELETE', '/admin/reference-values/svn')).status).toBe(404);
    expect((await call(base, s, 'DELETE', '/admin/reference-values/%01x')).status).toBe(400);
    // The admin API no longer finds it.
    expect((await call(base, s, 'GET', '/reference-value/svn')).status).toBe(401);
  });
});

describe('attestation policy and reference value endpoints, hostile input', () => {
  it('refuses malformed bodies, oversized policies and runaway reference value lookups', async () => {
    const kbsBase = await start();
    const kbs = running[running.length - 1] as RunningKbs;
    const s = await signIn(kbsBase, 'admin');
    await handshake(kbsBase);
    await recorded();
    const id = ((await call(kbsBase, s, 'GET', '/admin/verdicts')).json() as { verdicts: { id: number }[] })
      .verdicts[0]?.id;
    const post = (path: string, body: unknown) =>
      call(kbsBase, s, 'POST', `/admin/attestation-policy/${path}`, body);
    expect((await post('check', 'not json')).status).toBe(400);
    expect((await post('check', { policy: 42 })).status).toBe(400);
    expect((await post('check', ['policy'])).status).toBe(400);
    const huge = `package policy\n# ${'x'.repeat(1024 * 1024)}\n`;
    expect((await post('check', { policy: huge })).json()).toMatchObject({
      ok: false,
      error: expect.stringContaining('larger'),
    });
    expect((await post('dry-run', { policy: 'package policy', verdict: String(id) })).status).toBe(404);
    expect((await post('dry-run', { policy: 'package policy', verdict: id, submod: 7 })).status).toBe(400);
    expect(
      (await post('dry-run', { policy: 'package policy', verdict: id, submod: '__proto__' })).status,
    ).toBe(404);
    const runaway =
      'package policy\ntrust_claims := {"executables": 2} if {\n  every i in numbers.range(1, 400) { query_reference_value(sprintf("rv%d", [i])) == null }\n}\n';
    expect((await post('dry-run', { policy: runaway, verdict: id })).json()).toMatchObject({
      submod: 'cpu0',
      error: expect.stringContaining('too many reference values'),
    });

    // A stored record that cannot be read back is listed with why.
    await kbs.storage.set('reference_value', 'broken', Buffer.from('not json'));
    expect((await call(kbsBase, s, 'GET', '/admin/reference-values')).json()).toEqual({
      referenceValues: [{ name: 'broken', error: expect.stringContaining('not JSON') }],
    });
  });
});
