// The verdict log over real HTTP: what an attestation and a resource request leave in it, the filters
// of GET /kbs/v0/admin/verdicts, its admin ACL, and that no handshake secret or resource byte is kept.
import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signJwt } from '@broker/auth/testing';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from '../config.js';
import { type RunningKbs, startKbs } from '../kbs.js';
import { AUTH_BODY, attestationBody, cookieOf, handshake, send } from '../testing/client.js';
import { VerdictLog } from './log.js';
import { attestationPolicyIdOf, teeOfClaims, VerdictRecorder } from './recorder.js';
import { scrubClaims } from './scrub.js';

const running: RunningKbs[] = [];
afterEach(async () => {
  while (running.length > 0) await running.pop()?.close();
});
let tmp: string;
const idp = generateKeyPairSync('ec', { namedCurve: 'P-256' });
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'kbs-verdicts-'));
  writeFileSync(join(tmp, 'idp.pem'), idp.publicKey.export({ type: 'spki', format: 'pem' }));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const adminToken = (role: string) =>
  `Bearer ${signJwt({ alg: 'ES256' }, { role, exp: Math.floor(Date.now() / 1000) + 600 }, idp.privateKey)}`;

async function start(extraAdmin = ''): Promise<string> {
  const toml = `[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "AuthenticatedAuthorization"
${extraAdmin}
[admin.authentication.bearer_jwt]
identity_providers = [{ public_key_uri = "${join(tmp, 'idp.pem')}" }]
[admin.authorization.regex_acl]
acls = [
  { role = "admin", allowed_endpoints = "^/kbs/v0/.+$" },
  { role = "reader", allowed_endpoints = "^/kbs/v0/admin/verdicts(/[0-9]+)?$" },
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

const RESOURCE_BYTES = 'resource-bytes-that-must-never-be-logged-7f3a';

async function verdicts(base: string, query = '', role = 'reader') {
  return send(`${base}/kbs/v0/admin/verdicts${query}`, { headers: { authorization: adminToken(role) } });
}

describe('verdict log', () => {
  it('records an attestation and a denied resource request, without the nonce, key, token or bytes', async () => {
    const base = await start();
    const put = await send(`${base}/kbs/v0/resource/default/key/one`, {
      method: 'POST',
      headers: { authorization: adminToken('admin') },
      body: RESOURCE_BYTES,
    });
    expect(put.status).toBe(200);
    const { cookie, token, key, nonce } = await handshake(base);
    await recorded();
    // Denied by trustee's default resource policy.
    const denied = await send(`${base}/kbs/v0/resource/default/key/one`, { headers: { cookie } });
    expect(denied.status).toBe(401);
    const allowAll = 'package policy\ndefault allow := true\n';
    const set = await send(`${base}/kbs/v0/resource-policy`, {
      method: 'POST',
      headers: { authorization: adminToken('admin') },
      body: JSON.stringify({ policy: Buffer.from(allowAll).toString('base64url') }),
    });
    expect(set.status).toBe(200);
    expect((await send(`${base}/kbs/v0/resource/default/key/one`, { headers: { cookie } })).status).toBe(200);
    // Allowed by the policy, but there is no such resource: refused, and recorded so.
    expect((await send(`${base}/kbs/v0/resource/default/key/absent`, { headers: { cookie } })).status).toBe(
      401,
    );

    const res = await verdicts(base);
    expect(res.status).toBe(200);
    const body = res.json() as { size: number; verdicts: Record<string, unknown>[] };
    expect(body.size).toBe(1000);
    expect(body.verdicts.map((v) => [v.kind, v.status])).toEqual([
      ['resource', 'denied'],
      ['resource', 'allowed'],
      ['resource', 'denied'],
      ['attestation', expect.stringMatching(/^(affirming|warning|contraindicated)$/)],
    ]);
    const [absent, allowed, deny, att] = body.verdicts as [
      Record<string, unknown>,
      Record<string, unknown>,
      Record<string, unknown>,
      Record<string, unknown>,
    ];
    expect(absent).toMatchObject({ resource: 'default/key/absent', tee: 'sample' });
    expect(absent.reason).toMatch(/the resource policy allowed it, but resource not found/);
    // Each resource verdict names the version of the policy that decided it.
    const sha = (t: string) => createHash('sha256').update(t).digest('hex');
    expect(allowed.policyVersion).toBe(sha(allowAll));
    expect(absent.policyVersion).toBe(sha(allowAll));
    expect(deny.policyVersion).toMatch(/^[0-9a-f]{64}$/);
    expect(deny.policyVersion).not.toBe(allowed.policyVersion);
    expect((att.appraisals as { policyVersion?: string }[])[0]?.policyVersion).toMatch(/^[0-9a-f]{64}$/);
    expect(
      (att.appraisals as { vector?: { claim: string; meaning?: string }[] }[])[0]?.vector,
    ).toContainEqual(expect.objectContaining({ claim: 'executables' }));
    expect(att).toMatchObject({ tee: 'sample', source: '127.0.0.1', policyIds: ['default'] });
    expect(att.session).toHaveLength(8);
    expect(cookie).toContain(att.session as string);
    expect((att.appraisals as { trustVector: object }[])[0]?.trustVector).toBeTypeOf('object');
    expect(att.claims).toHaveProperty('submods');
    expect(deny).toMatchObject({ tee: 'sample', resource: 'default/key/one', method: 'GET' });
    expect(deny.reason).toBeTypeOf('string');
    expect(allowed.claims).toHaveProperty('submods');

    // The secrets, searched in the serialised log (the JWK members and the token's parts too).
    const text = res.text;
    const secrets = [nonce, token, ...token.split('.'), RESOURCE_BYTES, JSON.stringify(key.publicJwk)];
    for (const [k, v] of Object.entries(key.publicJwk))
      if (k !== 'kty' && k !== 'crv' && k !== 'e') secrets.push(String(v));
    for (const s of secrets) expect(text).not.toContain(s);
    expect(text).not.toContain(Buffer.from(RESOURCE_BYTES).toString('base64'));
  });

  it('says over HTTP which reference value an appraisal missed: one expired, one not registered', async () => {
    const base = await start();
    const kbs = running[running.length - 1] as RunningKbs;
    // A sample-TEE policy that reports its reference values as the project's five-PCR policy does.
    const policy = `package policy
import rego.v1
default executables := 33
executables := 3 if input.sample.launch_digest in query_reference_value("launch_digest")
trust_claims := {"executables": executables}
extensions := [{"name": "broker.reference-values", "key": -65537, "value": {
  "mismatched": {"launch_digest": input.sample.launch_digest},
  "missing": [n | some n in ["svn"]; query_reference_value(n) == null],
}}]
`;
    const set = await send(`${base}/kbs/v0/attestation-policy`, {
      method: 'POST',
      headers: { authorization: adminToken('admin') },
      body: JSON.stringify({ policy_id: 'default_cpu', policy: Buffer.from(policy).toString('base64url') }),
    });
    expect(set.status).toBe(200);
    // The right value, but past its expiration: the policy does not see it.
    await kbs.storage.set(
      'reference_value',
      'launch_digest',
      Buffer.from(
        '{"version":"0.1.0","name":"launch_digest","expiration":"2020-11-30T00:00:00Z","value":["abcde"]}',
      ),
    );
    await handshake(base);
    await recorded();
    const [att] = (
      (await verdicts(base, '?kind=attestation')).json() as {
        verdicts: { status: string; appraisals: { why: string[]; policyVersion: string }[] }[];
      }
    ).verdicts;
    expect(att?.status).toBe('warning');
    expect(att?.appraisals[0]?.why).toEqual([
      'executables 33 (warning): executables not recognised',
      '`launch_digest`: measured abcde, reference values: none (expired 2020-11-30)',
      '`svn`: reference values: none (not registered)',
    ]);
    expect(att?.appraisals[0]?.policyVersion).toBe(createHash('sha256').update(policy).digest('hex'));
  });

  it('records a refused piece of evidence as failed, with its reason and no nonce', async () => {
    const base = await start();
    const auth = await send(`${base}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
    const cookie = cookieOf(auth);
    const { nonce } = auth.json() as { nonce: string };
    const { generateTeeKeyPair } = await import('@broker/protocol');
    const key = generateTeeKeyPair();
    // Evidence bound to another nonce: its report data does not match.
    const bad = attestationBody(nonce, key, {
      svn: '1',
      report_data: Buffer.alloc(48, 1).toString('base64'),
    });
    expect(
      (await send(`${base}/kbs/v0/attest`, { method: 'POST', headers: { cookie }, body: bad })).status,
    ).toBe(401);
    const res = await verdicts(base, '?status=failed&tee=sample');
    const list = (res.json() as { verdicts: Record<string, unknown>[] }).verdicts;
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ kind: 'attestation', status: 'failed', tee: 'sample' });
    expect(list[0]?.reason).toBeTypeOf('string');
    expect(res.text).not.toContain(nonce);
  });

  it('filters, limits, reads one entry, and refuses bad queries and roles the ACL does not allow', async () => {
    const base = await start('verdict_log_size = 2');
    await handshake(base);
    await recorded();
    await handshake(base);
    await recorded();
    await handshake(base);
    await recorded();
    const all = (await verdicts(base)).json() as { size: number; verdicts: { id: number }[] };
    expect(all.size).toBe(2);
    expect(all.verdicts.map((v) => v.id)).toEqual([3, 2]);
    expect(((await verdicts(base, '?limit=1')).json() as { verdicts: unknown[] }).verdicts).toHaveLength(1);
    expect(((await verdicts(base, '?tee=snp')).json() as { verdicts: unknown[] }).verdicts).toHaveLength(0);
    expect(
      ((await verdicts(base, '?kind=resource')).json() as { verdicts: unknown[] }).verdicts,
    ).toHaveLength(0);
    expect((await verdicts(base, '/3')).json()).toMatchObject({ id: 3 });
    expect((await verdicts(base, '/1')).status).toBe(404);
    for (const q of ['?limit=0', '?limit=3', '?limit=x', '?status=bogus', '?tee=A%20B', '?other=1']) {
      expect((await verdicts(base, q)).status, q).toBe(400);
    }
    expect((await verdicts(base, '', 'nobody')).status).toBe(401);
    expect((await send(`${base}/kbs/v0/admin/verdicts`)).status).toBe(401);
    // The ACL sees the decoded path.
    expect((await verdicts(base, '/%33')).status).toBe(200);
  });
});

describe('VerdictLog', () => {
  it('keeps the last N, newest first', async () => {
    const log = new VerdictLog(3, () => 0);
    for (let i = 0; i < 5; i++) {
      log.record({ kind: 'resource', status: 'allowed', method: 'GET', resource: `r/t/${i}` });
    }
    expect((await log.list()).map((v) => v.id)).toEqual([5, 4, 3]);
    expect(await log.get(2)).toBeUndefined();
    expect(() => new VerdictLog(0)).toThrow(RangeError);
  });

  it('scrubs handshake keys and secret values at any depth, keeping __proto__ as data', () => {
    const secret = 'a-secret-value-of-some-length';
    const out = scrubClaims(
      JSON.parse(`{"a":{"nonce":"n","tee-pubkey":{"x":"y"},"b":["x ${secret} y"],"__proto__":{"c":1}}}`),
      [secret],
    ) as { a: Record<string, unknown> };
    expect(out.a).toEqual({ b: ['[redacted]'], ['__proto__']: { c: 1 } });
    expect(Object.getPrototypeOf(out.a)).toBe(Object.prototype);
  });
  it("scrubs a frozen token's claims once for all its fetches, and an unfrozen object every time", async () => {
    const log = new VerdictLog(10, () => 0);
    const recorder = new VerdictRecorder(log);
    const token = 'header.payload-of-a-token-long-enough.signature';
    const key = 'x-coordinate-of-the-tee-key-0123456789';
    const claims = (tag: string) => ({
      submods: {
        cpu0: { 'ear.status': 'affirming', 'ear.veraison.annotated-evidence': { sample: { tag } } },
      },
      'ear.veraison.key-attestation': { akpub: key },
      note: `echo ${key}`,
    });
    const fetch = (c: Record<string, unknown>, tok = token) =>
      recorder.resource({ method: 'GET', resource: 'a/b/c', token: tok, claims: c, status: 'allowed' });
    const frozen = Object.freeze(claims('one'));
    fetch(frozen);
    fetch(frozen);
    fetch(frozen, 'another.token-of-the-same-claims-object.sig');
    const mutable: Record<string, unknown> = claims('two');
    fetch(mutable);
    mutable.note = 'changed';
    fetch(mutable);
    const [changed, first, second, third, fourth] = await log.list();
    const expected = {
      submods: {
        cpu0: { 'ear.status': 'affirming', 'ear.veraison.annotated-evidence': { sample: { tag: 'one' } } },
      },
      note: '[redacted]',
    };
    expect(first?.claims).toEqual({
      ...expected,
      submods: {
        cpu0: { ...expected.submods.cpu0, 'ear.veraison.annotated-evidence': { sample: { tag: 'two' } } },
      },
    });
    expect(fourth?.claims).toEqual(expected);
    // One shared, frozen copy for the same token; the claims of another token are scrubbed again.
    expect(third?.claims).toBe(fourth?.claims);
    expect(Object.isFrozen(fourth?.claims)).toBe(true);
    expect(second?.claims).not.toBe(third?.claims);
    expect(second?.claims).toEqual(expected);
    // An object that may change is never taken from the cache.
    expect(changed?.claims).toMatchObject({ note: 'changed' });
    expect(fourth?.tee).toBe('sample');
  });
});

describe('VerdictRecorder', () => {
  it("records a resource verdict's TEE from the token's CPU appraisal, not the first member of its evidence", async () => {
    const log = new VerdictLog(10, () => 0);
    const recorder = new VerdictRecorder(log);
    const claims = {
      submods: {
        a_gpu0: { 'ear.veraison.annotated-evidence': { nvidia: { x: 1 } } },
        cpu0: {
          'ear.status': 'warning',
          'ear.veraison.annotated-evidence': { init_data: 'ab'.repeat(32), snp: { measurement: 'm' } },
        },
      },
    };
    recorder.resource({ method: 'GET', resource: 'a/b/c', token: 'x.y.z', claims, status: 'allowed' });
    expect((await log.list())[0]?.tee).toBe('snp');
    expect(
      teeOfClaims({ submods: { cpu0: { 'ear.veraison.annotated-evidence': { init_data: 'x' } } } }),
    ).toBe(undefined);
    expect(attestationPolicyIdOf('default', 'cpu0')).toBe('default_cpu');
  });

  it('says in words which claim missed and which reference value it missed, expired or not registered', async () => {
    const log = new VerdictLog(10, () => 0);
    const registered: Record<string, { value: unknown; expiration: string; expired: boolean }> = {
      snp_pcr08: { value: ['00'], expiration: '2026-11-30T00:00:00Z', expired: true },
      snp_pcr03: { value: ['ab'], expiration: '2027-11-30T00:00:00Z', expired: false },
    };
    const recorder = new VerdictRecorder(log, { referenceValue: async (n) => registered[n] });
    const measured = `3f${'0'.repeat(62)}`;
    const claims = {
      submods: {
        cpu0: {
          'ear.status': 'warning',
          'ear.trustworthiness-vector': { executables: 33, hardware: 2, configuration: 2 },
          'ear.appraisal-policy-id': 'default',
          'broker.reference-values': {
            mismatched: { snp_pcr08: measured, snp_pcr03: 'cd' },
            missing: ['snp_pcr12'],
          },
        },
      },
    };
    const token = `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.sig`;
    await recorder.attestation({
      tee: 'az-snp-vtpm',
      sessionId: 'session-id-0123',
      nonce: 'a-nonce-of-some-length-000',
      teePubkey: {},
      outcome: { token },
    });
    const [v] = await log.list();
    const a = (
      v as unknown as { appraisals: { why: string[]; vector: { claim: string; meaning?: string }[] }[] }
    ).appraisals[0];
    expect(a?.why).toEqual([
      'executables 33 (warning): executables not recognised',
      '`snp_pcr08`: measured 3f0000000000…, reference values: none (expired 2026-11-30)',
      '`snp_pcr03`: measured cd, reference values: ["ab"]',
      '`snp_pcr12`: reference values: none (not registered)',
    ]);
    expect(a?.vector).toContainEqual({
      claim: 'hardware',
      value: 2,
      tier: 'affirming',
      meaning: 'genuine hardware and firmware',
    });
  });

  it('settles only once an attestation still looking up its reference values is in the log', async () => {
    const log = new VerdictLog(10, () => 0);
    let release: () => void = () => undefined;
    const lookup = new Promise<void>((r) => {
      release = r;
    });
    const recorder = new VerdictRecorder(log, {
      referenceValue: async () => {
        await lookup;
        return undefined;
      },
    });
    const claims = {
      submods: {
        cpu0: {
          'ear.status': 'contraindicated',
          'ear.appraisal-policy-id': 'default',
          'broker.reference-values': { missing: ['snp_pcr12'] },
        },
      },
    };
    const token = `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.sig`;
    // The observer does not wait for the recording (the reply goes first), as the KBS calls it.
    void recorder.attestation({
      tee: 'snp',
      sessionId: 'session-id-0123',
      nonce: 'a-nonce-of-some-length-000',
      teePubkey: {},
      outcome: { token },
    });
    let settled = false;
    const done = recorder.settled().then(() => {
      settled = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(settled).toBe(false);
    expect(await log.list()).toHaveLength(0);
    release();
    await done;
    expect(await log.list()).toHaveLength(1);
  });
});

describe('[admin] verdict_log_size and console', () => {
  const cfg = (admin: string) =>
    parseKbsConfigText(
      `[http_server]\ninsecure_http = true\n[admin]\nauthorization_mode = "InsecureAllowAll"\n${admin}\n`,
    );
  it('default to 1000 and off, and are checked', () => {
    expect(cfg('').console).toEqual({ verdictLogSize: 1000, enabled: false });
    expect(cfg('verdict_log_size = 5\nconsole = true').console).toEqual({ verdictLogSize: 5, enabled: true });
    expect(() => cfg('verdict_log_size = 0')).toThrow('verdict_log_size: 0 is outside 1..1000000');
    expect(() => cfg('console = "yes"')).toThrow('console: expected true or false');
  });
});
