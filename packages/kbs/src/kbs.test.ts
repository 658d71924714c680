// The KBS over real HTTP on 127.0.0.1: the RCAR handshake, resource release, the admin API, and the
// hostile inputs of issue 2, each answered with upstream's error body and status.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { b64url, makeChain, publicJwk, signJwt, type TestChain } from '@broker/auth/testing';
import { generateTeeKeyPair, jweDecrypt } from '@broker/protocol';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from './config.js';
import { type KbsOptions, type RunningKbs, startKbs } from './kbs.js';
import { BUILTIN_RESOURCE_POLICIES } from './policy/resource-policy.js';
import {
  AUTH_BODY,
  attestationBody,
  cookieOf,
  handshake,
  type Response,
  sampleEvidence,
  send,
} from './testing/client.js';

const ERR = 'https://github.com/confidential-containers/kbs/errors/';

interface Harness {
  kbs: RunningKbs;
  base: string;
  lines: string[];
}

const running: RunningKbs[] = [];
afterEach(async () => {
  while (running.length > 0) await running.pop()?.close();
});

let tmp: string;
let chain: TestChain;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'kbs-e2e-'));
  chain = makeChain(tmp, 'as');
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const BASE_SECTIONS = {
  http_server: 'sockets = ["127.0.0.1:0"]\ninsecure_http = true\npayload_request_size = 1',
  attestation_token: 'insecure_header_jwk = true',
  admin: 'authorization_mode = "InsecureAllowAll"',
};

async function start(
  sections: Partial<Record<string, string>> = {},
  extra = '',
  options: KbsOptions = {},
): Promise<Harness> {
  const all = { ...BASE_SECTIONS, ...sections };
  const toml = `${Object.entries(all)
    .map(([name, body]) => `[${name}]\n${body}\n`)
    .join('')}\n[[plugins]]\nname = "resource"\n${extra}`;
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => lines.push(s) });
  const kbs = await startKbs(parseKbsConfigText(toml), { logger, ...options });
  running.push(kbs);
  return { kbs, base: kbs.urls[0] as string, lines };
}

const b64u = (s: string) => Buffer.from(s).toString('base64url');

async function allowAll(base: string): Promise<void> {
  const r = await send(`${base}/kbs/v0/resource-policy`, {
    method: 'POST',
    body: JSON.stringify({ policy: b64u(BUILTIN_RESOURCE_POLICIES.allow_all) }),
  });
  expect(r.status).toBe(200);
}

async function putResource(base: string, path: string, value: string | Uint8Array): Promise<void> {
  const r = await send(`${base}/kbs/v0/resource/${path}`, { method: 'POST', body: value });
  expect(r.status).toBe(200);
}

function expectError(res: Response, status: number, kind: string, detail?: string | RegExp): void {
  expect(res.status, res.text).toBe(status);
  const body = res.json() as { type: string; detail: string };
  expect(Object.keys(body)).toEqual(['type', 'detail']);
  expect(body.type).toBe(ERR + kind);
  if (typeof detail === 'string') expect(body.detail).toBe(detail);
  else if (detail !== undefined) expect(body.detail).toMatch(detail);
  expect(res.text).not.toMatch(/\n\s+at /);
}

describe('RCAR handshake and resource release', () => {
  it('auth → attest → resource with the cookie, and with the token as Bearer', async () => {
    const { base, lines } = await start();
    await allowAll(base);
    await putResource(base, 'default/key/one', 'top secret');

    const key = generateTeeKeyPair();
    const auth = await send(`${base}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
    expect(auth.status).toBe(200);
    expect(auth.headers['content-type']).toBe('application/json');
    const challenge = auth.json() as { nonce: string; 'extra-params': unknown };
    expect(Object.keys(challenge)).toEqual(['nonce', 'extra-params']);
    expect(challenge['extra-params']).toBe('');
    expect(Buffer.from(challenge.nonce, 'base64')).toHaveLength(32);
    const setCookie = String(auth.headers['set-cookie']);
    expect(setCookie).toMatch(
      /^kbs-session-id=[0-9a-f]{32}; Expires=\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$/,
    );
    const cookie = cookieOf(auth);

    const attest = await send(`${base}/kbs/v0/attest`, {
      method: 'POST',
      headers: { cookie },
      body: attestationBody(challenge.nonce, key),
    });
    expect(
      attest.status,
      `${attest.text} ${lines.filter((l) => l.includes('attestation failed')).join('')}`,
    ).toBe(200);
    expect(attest.headers['content-type']).toBe('application/json');
    expect(String(attest.headers['set-cookie'])).toBe(setCookie);
    const { token } = attest.json() as { token: string };
    const [header, payload] = token
      .split('.')
      .slice(0, 2)
      .map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()));
    expect(header.alg).toBe('ES256');
    expect(payload.submods.cpu0['ear.veraison.annotated-evidence'].runtime_data_claims['tee-pubkey']).toEqual(
      key.publicJwk,
    );

    for (const headers of [{ cookie }, { authorization: `Bearer ${token}` }] as Record<string, string>[]) {
      const res = await send(`${base}/kbs/v0/resource/default/key/one`, { headers });
      expect(res.status, res.text).toBe(200);
      expect(res.headers['content-type']).toBe('application/json');
      const jwe = res.json() as Record<string, string>;
      expect(Object.keys(jwe).sort()).toEqual(['ciphertext', 'encrypted_key', 'iv', 'protected', 'tag']);
      expect(jweDecrypt(jwe, key.privateKey).toString()).toBe('top secret');
    }
  });

  it('returns the cached token when an attested session attests again', async () => {
    const { base } = await start();
    const { cookie, token, key, nonce } = await handshake(base);
    const again = await send(`${base}/kbs/v0/attest`, {
      method: 'POST',
      headers: { cookie },
      body: attestationBody(nonce, key),
    });
    expect(again.status).toBe(200);
    expect((again.json() as { token: string }).token).toBe(token);
  });

  it("denies the sample TEE under trustee's default resource policy", async () => {
    const { base } = await start();
    await putResource(base, 'default/key/one', 'x');
    const { cookie } = await handshake(base);
    const res = await send(`${base}/kbs/v0/resource/default/key/one`, { headers: { cookie } });
    expectError(res, 401, 'PolicyDeny', 'Access denied by policy');
  });

  it('passes the query to the resource policy', async () => {
    const { base } = await start();
    await putResource(base, 'default/key/one', 'x');
    const policy =
      'package policy\nimport rego.v1\ndefault allow := false\nallow if data.query.ok == "yes"\n';
    await send(`${base}/kbs/v0/resource-policy`, {
      method: 'POST',
      body: JSON.stringify({ policy: b64u(policy) }),
    });
    const { cookie } = await handshake(base);
    expect(
      (await send(`${base}/kbs/v0/resource/default/key/one?ok=yes`, { headers: { cookie } })).status,
    ).toBe(200);
    expectError(
      await send(`${base}/kbs/v0/resource/default/key/one?ok=no`, { headers: { cookie } }),
      401,
      'PolicyDeny',
    );
  });

  it('answers PluginInternalError for a missing resource', async () => {
    const { base } = await start();
    await allowAll(base);
    const { cookie } = await handshake(base);
    expectError(
      await send(`${base}/kbs/v0/resource/default/key/none`, { headers: { cookie } }),
      401,
      'PluginInternalError',
      'Plugin internal error',
    );
  });

  it('logs one access line per request and the attestation result, never tokens or secrets', async () => {
    const { base, lines } = await start();
    await allowAll(base);
    await putResource(base, 'default/key/one', 'secret-value-123');
    const { cookie, token } = await handshake(base);
    await send(`${base}/kbs/v0/resource/default/key/one`, {
      headers: { cookie, 'user-agent': 'attestation-agent-kbs-client/0.1.0' },
    });
    const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const access = records.filter((r) => r.msg === 'access');
    expect(access).toHaveLength(5);
    const last = access.at(-1) as Record<string, unknown>;
    expect(last).toMatchObject({
      method: 'GET',
      path: '/kbs/v0/resource/default/key/one',
      status: 200,
      peer: '127.0.0.1',
      ua: 'attestation-agent-kbs-client/0.1.0',
    });
    expect(last.bytes).toBeGreaterThan(100);
    expect(typeof last.ms).toBe('number');
    expect(records.some((r) => String(r.msg).startsWith('attestation succeeded'))).toBe(true);
    const all = lines.join('\n');
    expect(all).not.toContain(token);
    expect(all).not.toContain(token.split('.')[2]);
    expect(all).not.toContain('secret-value-123');
    expect(all).not.toContain(cookie.split('=')[1]);
  });
});

describe('sessions', () => {
  it('fails /attest once the session lifetime (fixed at /auth) has passed', async () => {
    let now = Date.now();
    const { base } = await start({}, '', { now: () => now });
    const key = generateTeeKeyPair();
    const auth = await send(`${base}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
    const { nonce } = auth.json() as { nonce: string };
    now += 5 * 60_000 + 1;
    const res = await send(`${base}/kbs/v0/attest`, {
      method: 'POST',
      headers: { cookie: cookieOf(auth) },
      body: attestationBody(nonce, key),
    });
    expectError(res, 401, 'AttestationError', 'Attestation error: RCAR handshake Attest failed');
  });

  it('stops using an expired attested session and then needs a Bearer token', async () => {
    let now = Date.now();
    const { base } = await start({}, '', { now: () => now });
    await allowAll(base);
    await putResource(base, 'a/b/c', 'v');
    const { cookie } = await handshake(base);
    now += 5 * 60_000 + 1;
    expectError(
      await send(`${base}/kbs/v0/resource/a/b/c`, { headers: { cookie } }),
      401,
      'TokenNotFound',
      'Attestation Token not found',
    );
  });

  it('keeps memory bounded under a burst of 10,000 /auth calls', async () => {
    const { base, kbs } = await start({}, '', { sessionLimits: { maxSessions: 1000 } });
    const total = 10_000;
    let sent = 0;
    const worker = async () => {
      while (sent < total) {
        sent++;
        const r = await send(`${base}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
        expect(r.status).toBe(200);
      }
    };
    await Promise.all(Array.from({ length: 32 }, worker));
    expect(kbs.sessions.size).toBeLessThanOrEqual(1000);
    expect((await kbs.storage.list('kbs_protocol_session')).length).toBeLessThanOrEqual(1000);
    // The newest sessions still work.
    const { token } = await handshake(base);
    expect(token.split('.')).toHaveLength(3);
  }, 120_000);
});

describe('bad input gets the upstream error body and status', () => {
  let h: Harness;
  beforeAll(async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (s: string) => lines.push(s) });
    const toml = `[http_server]\n${BASE_SECTIONS.http_server}\n[attestation_token]\n${BASE_SECTIONS.attestation_token}\n[admin]\n${BASE_SECTIONS.admin}\n[[plugins]]\nname = "resource"\n`;
    const kbs = await startKbs(parseKbsConfigText(toml), { logger });
    h = { kbs, base: kbs.urls[0] as string, lines };
    await allowAll(h.base);
    await putResource(h.base, 'default/key/one', 'x');
  });
  afterAll(async () => h.kbs.close());

  const authFailed = 'Attestation error: RCAR handshake Auth failed: ';
  it.each([
    ['malformed JSON', '{"version":', `${authFailed}deserialize Request`],
    ['not an object', '[]', `${authFailed}deserialize Request`],
    [
      'an unknown TEE',
      '{"version":"0.4.0","tee":"tdx2","extra-params":""}',
      `${authFailed}deserialize Request`,
    ],
    ['no extra-params', '{"version":"0.4.0","tee":"sample"}', `${authFailed}deserialize Request`],
    [
      'a non-semver version',
      '{"version":"zero","tee":"sample","extra-params":""}',
      `${authFailed}failed to parse KBS version`,
    ],
    [
      'the wrong version',
      '{"version":"0.1.1","tee":"sample","extra-params":""}',
      `${authFailed}KBS Client Protocol Version Mismatch: expect =0.4.0 while the request is 0.1.1`,
    ],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0x7d]), `${authFailed}deserialize Request`],
  ])('/auth with %s', async (_what, body, detail) => {
    expectError(
      await send(`${h.base}/kbs/v0/auth`, { method: 'POST', body }),
      401,
      'AttestationError',
      detail,
    );
  });

  it('negotiates the hash algorithm for SE only, as trustee', async () => {
    const auth = (tee: string, extra: unknown) =>
      send(`${h.base}/kbs/v0/auth`, {
        method: 'POST',
        body: JSON.stringify({ version: '0.4.0', tee, 'extra-params': extra }),
      });
    const se = await auth('se', { 'supported-hash-algorithms': ['SHA384', 'SHA512'] });
    expect(se.json()).toMatchObject({ 'extra-params': { 'selected-hash-algorithm': 'sha512' } });
    expect((await auth('se', '')).json()).toMatchObject({ 'extra-params': '' });
    expectError(
      await auth('se', { 'supported-hash-algorithms': ['sha384'] }),
      401,
      'AttestationError',
      'Attestation error: RCAR handshake Auth failed: Attestation Service generate challenge failed',
    );
    expect((await auth('tdx', { 'supported-hash-algorithms': ['sha512'] })).json()).toMatchObject({
      'extra-params': '',
    });
  });

  it('an oversize body gets 413 (actix PayloadConfig), by length and by chunks', async () => {
    const big = 'x'.repeat(1024 * 1024 + 1);
    const res = await send(`${h.base}/kbs/v0/auth`, { method: 'POST', body: big });
    expect(res.status).toBe(413);
    expect(res.text).toBe('A payload reached size limit.');
    const chunked = await send(`${h.base}/kbs/v0/resource/a/b/c`, {
      method: 'POST',
      headers: { 'transfer-encoding': 'chunked' },
      body: big,
    });
    expect(chunked.status).toBe(413);
  });

  async function authed(): Promise<{ cookie: string; nonce: string }> {
    const auth = await send(`${h.base}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
    return { cookie: cookieOf(auth), nonce: (auth.json() as { nonce: string }).nonce };
  }
  const attestFailed = 'Attestation error: RCAR handshake Attest failed';

  it('/attest without a cookie, with an unknown session, or with malformed JSON', async () => {
    const key = generateTeeKeyPair();
    const body = attestationBody('bm9uY2U=', key);
    expectError(
      await send(`${h.base}/kbs/v0/attest`, { method: 'POST', body }),
      401,
      'AttestationError',
      attestFailed,
    );
    expectError(
      await send(`${h.base}/kbs/v0/attest`, {
        method: 'POST',
        headers: { cookie: `kbs-session-id=${'0'.repeat(32)}` },
        body,
      }),
      401,
      'AttestationError',
      attestFailed,
    );
    const { cookie } = await authed();
    expectError(
      await send(`${h.base}/kbs/v0/attest`, { method: 'POST', headers: { cookie }, body: '{' }),
      401,
      'AttestationError',
    );
  });

  it('/attest with a nonce from another session, or replayed from an earlier one', async () => {
    const key = generateTeeKeyPair();
    const a = await authed();
    const b = await authed();
    expectError(
      await send(`${h.base}/kbs/v0/attest`, {
        method: 'POST',
        headers: { cookie: b.cookie },
        body: attestationBody(a.nonce, key),
      }),
      401,
      'AttestationError',
      attestFailed,
    );
    const done = await handshake(h.base);
    const c = await authed();
    expectError(
      await send(`${h.base}/kbs/v0/attest`, {
        method: 'POST',
        headers: { cookie: c.cookie },
        body: attestationBody(done.nonce, done.key),
      }),
      401,
      'AttestationError',
    );
    // Evidence bound to another nonce than the one claimed fails in the verifier.
    const d = await authed();
    expectError(
      await send(`${h.base}/kbs/v0/attest`, {
        method: 'POST',
        headers: { cookie: d.cookie },
        body: attestationBody(d.nonce, key, sampleEvidence(a.nonce, key)),
      }),
      401,
      'AttestationError',
    );
  });

  const good = generateTeeKeyPair().publicJwk as unknown as Record<string, string>;
  it.each([
    ['bad base64 in x', { ...good, x: `${good.x?.slice(0, -2)}*=` }],
    ['padded base64 in y', { ...good, y: `${good.y}=` }],
    ['a symmetric key', { kty: 'oct', k: 'AAAA', alg: 'A256KW' }],
    ['a missing coordinate', { kty: 'EC', crv: 'P-256', alg: 'ECDH-ES+A256KW', x: good.x }],
    ['an unknown curve', { ...good, crv: 'P-192' }],
    ['a point off the curve', { ...good, y: good.x }],
    [
      'a short RSA modulus',
      { kty: 'RSA', alg: 'RSA-OAEP-256', n: Buffer.alloc(64, 0xff).toString('base64url'), e: 'AQAB' },
    ],
    ['no key at all', null],
  ])('/attest with a TEE key that has %s', async (_what, jwk) => {
    const { cookie, nonce } = await authed();
    const body = JSON.stringify({
      'init-data': null,
      'runtime-data': { nonce, 'tee-pubkey': jwk },
      'tee-evidence': { primary_evidence: { svn: '1', report_data: 'AAAA' }, additional_evidence: '' },
    });
    expectError(
      await send(`${h.base}/kbs/v0/attest`, { method: 'POST', headers: { cookie }, body }),
      401,
      'AttestationError',
      attestFailed,
    );
  });

  it.each([
    ['report_data that is not base64', (_n: string) => ({ svn: '1', report_data: '***' })],
    [
      'report_data of another length',
      (_n: string) => ({ svn: '1', report_data: Buffer.alloc(47).toString('base64') }),
    ],
    ['no evidence fields', (_n: string) => ({})],
    ['evidence that is a string', (_n: string) => 'sample'],
  ])('/attest with %s', async (_what, evidence) => {
    const { cookie, nonce } = await authed();
    const key = generateTeeKeyPair();
    const res = await send(`${h.base}/kbs/v0/attest`, {
      method: 'POST',
      headers: { cookie },
      body: attestationBody(nonce, key, evidence(nonce)),
    });
    expectError(res, 401, 'AttestationError', attestFailed);
  });

  it('/attest with additional evidence that is not a TEE map', async () => {
    for (const additional of ['not json', '[1]', '{"tdx2":{}}']) {
      const { cookie, nonce } = await authed();
      const key = generateTeeKeyPair();
      const body = attestationBody(nonce, key, sampleEvidence(nonce, key, additional), additional);
      expectError(
        await send(`${h.base}/kbs/v0/attest`, { method: 'POST', headers: { cookie }, body }),
        401,
        'AttestationError',
      );
    }
  });

  it('/attest with init-data in a format other than toml', async () => {
    const { cookie, nonce } = await authed();
    const key = generateTeeKeyPair();
    const body = JSON.parse(attestationBody(nonce, key));
    body['init-data'] = { format: 'json', body: '{}' };
    expectError(
      await send(`${h.base}/kbs/v0/attest`, {
        method: 'POST',
        headers: { cookie },
        body: JSON.stringify(body),
      }),
      401,
      'AttestationError',
    );
  });

  it('resource requests without a token, or with a bad one', async () => {
    const url = `${h.base}/kbs/v0/resource/default/key/one`;
    expectError(await send(url), 401, 'TokenNotFound', 'Attestation Token not found');
    expectError(await send(url, { headers: { authorization: 'Basic abc' } }), 401, 'TokenNotFound');
    const { cookie: authedOnly } = await authed();
    expectError(await send(url, { headers: { cookie: authedOnly } }), 401, 'TokenNotFound');
    expectError(
      await send(url, { headers: { authorization: 'Bearer not-a-jwt' } }),
      401,
      'TokenVerifierError',
      'Token Verifier error',
    );
  });

  it('tokens with alg none, or re-signed by another key, or expired', async () => {
    const url = `${h.base}/kbs/v0/resource/default/key/one`;
    const { token } = await handshake(h.base);
    const [head, body] = token.split('.') as [string, string];
    const header = JSON.parse(Buffer.from(head, 'base64url').toString());
    const none = `${b64url({ ...header, alg: 'none' })}.${body}.`;
    expectError(await send(url, { headers: { authorization: `Bearer ${none}` } }), 401, 'TokenVerifierError');
    const stripped = `${b64url({ alg: 'none' })}.${body}.`;
    expectError(
      await send(url, { headers: { authorization: `Bearer ${stripped}` } }),
      401,
      'TokenVerifierError',
    );
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString());
    const attacker = generateTeeKeyPair('ECDH-ES+A256KW-P256').privateKey;
    // Claims re-signed by another key but keeping the original header key: the signature fails.
    const forged = signJwt(header, { ...claims, exp: claims.exp + 3600 }, attacker);
    expectError(
      await send(url, { headers: { authorization: `Bearer ${forged}` } }),
      401,
      'TokenVerifierError',
    );
    // Tampered payload under the original signature.
    const tampered = `${head}.${b64url({ ...claims, exp: claims.exp + 1 })}.${token.split('.')[2]}`;
    expectError(
      await send(url, { headers: { authorization: `Bearer ${tampered}` } }),
      401,
      'TokenVerifierError',
    );
  });

  it('tokens whose TEE key is missing or unusable (insecure mode accepts any signer)', async () => {
    const url = `${h.base}/kbs/v0/resource/default/key/one`;
    const signer = generateTeeKeyPair().privateKey;
    const tok = (claims: Record<string, unknown>) =>
      signJwt(
        { alg: 'ES256', jwk: { ...publicJwk(signer), alg: 'ES256' } },
        { exp: Math.floor(Date.now() / 1000) + 60, ...claims },
        signer,
      );
    const good = generateTeeKeyPair().publicJwk as unknown as Record<string, string>;
    expect(
      (await send(url, { headers: { authorization: `Bearer ${tok({ 'tee-pubkey': good })}` } })).status,
    ).toBe(200);
    expectError(
      await send(url, { headers: { authorization: `Bearer ${tok({})}` } }),
      401,
      'TokenVerifierError',
    );
    expectError(
      await send(url, {
        headers: { authorization: `Bearer ${tok({ 'tee-pubkey': { kty: 'oct', k: 'AAAA' } })}` },
      }),
      401,
      'TokenVerifierError',
    );
    expectError(
      await send(url, {
        headers: { authorization: `Bearer ${tok({ 'tee-pubkey': { ...good, y: good.x } })}` },
      }),
      401,
      'JweError',
      'JWE failed',
    );
  });

  it.each([
    ['..', '/kbs/v0/resource/default/../one'],
    ['%2e%2e', '/kbs/v0/resource/default/%2e%2e/one'],
    ['an empty segment', '/kbs/v0/resource/default//one'],
    ['a trailing slash', '/kbs/v0/resource/default/key/one/'],
    ['a fourth segment', '/kbs/v0/resource/default/key/one/two'],
    ['two segments', '/kbs/v0/resource/default/key'],
    ['a hidden name', '/kbs/v0/resource/default/key/.one'],
  ])('a resource path with %s', async (_what, path) => {
    // Upstream checks the token first, then the policy, then the plugin parses the path.
    expectError(await send(h.base + path), 401, 'TokenNotFound');
    const { cookie } = await handshake(h.base);
    expectError(
      await send(h.base + path, { headers: { cookie } }),
      401,
      'PluginInternalError',
      'Plugin internal error',
    );
    expectError(await send(h.base + path, { method: 'POST', body: 'x' }), 401, 'PluginInternalError');
  });

  it('routes like actix: unknown plugins, wrong methods, bad encodings and other paths', async () => {
    expectError(
      await send(`${h.base}/kbs/v0/nebula-ca/x`),
      404,
      'PluginNotFound',
      'Plugin nebula-ca not found',
    );
    expectError(await send(`${h.base}/kbs/v0/auth`), 404, 'PluginNotFound', 'Plugin auth not found');
    expectError(await send(`${h.base}/kbs/v0/`), 404, 'PluginNotFound', 'Plugin  not found');
    expectError(await send(`${h.base}/kbs/v0/attestation-policy`), 404, 'PluginNotFound');
    expectError(await send(`${h.base}/kbs/v0/resource/%zz/a/b`), 404, 'InvalidRequestPath');
    expect((await send(`${h.base}/kbs/v0/auth`, { method: 'PATCH' })).status).toBe(405);
    expect((await send(`${h.base}/kbs/v1/auth`, { method: 'POST' })).status).toBe(404);
    expect((await send(`${h.base}/nothing`)).status).toBe(404);
    expect((await send(`${h.base}/healthz`)).status).toBe(200);
    expect((await send(`${h.base}/metrics`, { method: 'POST' })).status).toBe(405);
  });

  it('a request head over 128 KiB is refused by the HTTP layer', async () => {
    const res = await send(`${h.base}/kbs/v0/resource/default/key/one`, {
      headers: { authorization: `Bearer ${'a'.repeat(130 * 1024)}` },
    });
    expect(res.status).toBe(431);
  });

  it('keeps serving after all of that', async () => {
    const { cookie } = await handshake(h.base);
    expect((await send(`${h.base}/kbs/v0/resource/default/key/one`, { headers: { cookie } })).status).toBe(
      200,
    );
  });
});

describe('tokens signed with a configured key and verified against trusted certificates', () => {
  it('accepts tokens whose header JWK chains to the trusted root', async () => {
    const h = await startSecure();
    await allowAll(h.base);
    await putResource(h.base, 'a/b/c', 'v');
    const { cookie, token } = await handshake(h.base);
    const header = JSON.parse(Buffer.from(token.split('.')[0] as string, 'base64url').toString());
    expect(header.jwk.x5c).toHaveLength(2);
    expect((await send(`${h.base}/kbs/v0/resource/a/b/c`, { headers: { cookie } })).status).toBe(200);
  });

  it('refuses a token from another key, with or without a copied x5c', async () => {
    const h = await startSecure();
    await allowAll(h.base);
    await putResource(h.base, 'a/b/c', 'v');
    const { token } = await handshake(h.base);
    const claims = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString());
    const attacker = generateTeeKeyPair().privateKey;
    for (const extra of [{}, { x5c: chain.x5c }]) {
      const forged = signJwt(
        { alg: 'ES256', typ: 'JWT', jwk: { ...publicJwk(attacker), alg: 'ES256', ...extra } },
        claims,
        attacker,
      );
      expectError(
        await send(`${h.base}/kbs/v0/resource/a/b/c`, { headers: { authorization: `Bearer ${forged}` } }),
        401,
        'TokenVerifierError',
      );
    }
  });

  it('verifies expiry with 60 s leeway', async () => {
    let now = Date.now();
    const h = await startSecure({ now: () => now });
    await allowAll(h.base);
    await putResource(h.base, 'a/b/c', 'v');
    const { token } = await handshake(h.base);
    const auth = { authorization: `Bearer ${token}` };
    now += 5 * 60_000 + 59_000;
    expect((await send(`${h.base}/kbs/v0/resource/a/b/c`, { headers: auth })).status).toBe(200);
    now += 2_000;
    expectError(await send(`${h.base}/kbs/v0/resource/a/b/c`, { headers: auth }), 401, 'TokenVerifierError');
  });

  async function startSecure(options: KbsOptions = {}): Promise<Harness> {
    return start(
      {
        attestation_token: `trusted_certs_paths = ["${chain.rootPath}"]`,
        'attestation_service.attestation_token_broker.signer': `key_path = "${chain.leafKeyPath}"\ncert_path = "${chain.chainPath}"`,
      },
      '',
      options,
    );
  }
});

describe('admin API', () => {
  it('stores, lists and deletes through the admin endpoints', async () => {
    const { base, kbs } = await start();
    const policies = await send(`${base}/kbs/v0/resource-policy`);
    expect(policies.status).toBe(200);
    expect(policies.json()).toEqual(['resource-policy']);

    await putResource(base, 'default/key/one', new Uint8Array([0, 1, 2, 255]));
    expect(Buffer.from((await kbs.storage.get('repository', 'default/key/one')) as Uint8Array)).toEqual(
      Buffer.from([0, 1, 2, 255]),
    );
    const del = await send(`${base}/kbs/v0/resource/default/key/one`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(del.headers['content-type']).toBe('text/xml');
    expectError(
      await send(`${base}/kbs/v0/resource/default/key/one`, { method: 'DELETE' }),
      401,
      'PluginInternalError',
    );

    const rv = {
      version: '0.1.0',
      type: 'sample',
      payload: Buffer.from(JSON.stringify({ svn: ['1'] })).toString('base64'),
    };
    expect(
      (await send(`${base}/kbs/v0/reference-value`, { method: 'POST', body: JSON.stringify(rv) })).status,
    ).toBe(200);
    const got = await send(`${base}/kbs/v0/reference-value/svn`);
    expect(got.status).toBe(200);
    expect(got.json()).toEqual(['1']);
    expectError(
      await send(`${base}/kbs/v0/reference-value/nope`),
      401,
      'RvpsError',
      /No reference value found for the given id: nope/,
    );
    expectError(
      await send(`${base}/kbs/v0/reference-value`, { method: 'POST', body: '{"version":"9"}' }),
      401,
      'RvpsError',
    );

    const cpu = 'package policy\nimport rego.v1\ndefault trust_claims := {}\n';
    const setAs = await send(`${base}/kbs/v0/attestation-policy`, {
      method: 'POST',
      body: JSON.stringify({ type: 'rego', policy_id: 'default_cpu', policy: b64u(cpu) }),
    });
    expect(setAs.status, setAs.text).toBe(200);
    for (const body of [
      '{',
      JSON.stringify({ policy_id: 'default_cpu' }),
      JSON.stringify({ policy_id: 'default_cpu', policy: b64u('package policy\nallow if {') }),
      JSON.stringify({ policy_id: 'default_cpu', policy: `${b64u(cpu)}==` }),
    ]) {
      expectError(
        await send(`${base}/kbs/v0/attestation-policy`, { method: 'POST', body }),
        401,
        'AttestationError',
        'Attestation error: Set Attestation Policy failed',
      );
    }
  });

  it('refuses malformed resource policies with ParsePolicyError or PolicyEngineError', async () => {
    const { base } = await start();
    const post = (body: string) => send(`${base}/kbs/v0/resource-policy`, { method: 'POST', body });
    expectError(
      await post('{'),
      401,
      'ParsePolicyError',
      'Failed to parse policy: Illegal SetPolicy Request Json',
    );
    expectError(await post('{}'), 401, 'ParsePolicyError', /No `policy` field/);
    expectError(await post('{"policy":1}'), 401, 'ParsePolicyError', /not a string/);
    expectError(await post('{"policy":"!!"}'), 401, 'ParsePolicyError', /Failed to decode policy/);
    expectError(
      await post(JSON.stringify({ policy: b64u('package policy\nallow if {') })),
      401,
      'PolicyEngineError',
      /Failed to load policy/,
    );
  });

  it('DenyAll refuses every admin endpoint with upstream kinds', async () => {
    const { base } = await start({ admin: 'authorization_mode = "DenyAll"' });
    expectError(
      await send(`${base}/kbs/v0/resource-policy`),
      401,
      'AdminAuthAccess',
      'admin access denied for endpoint resource-policy: Admin access denied: Admin access denied as DenyAll authorization_mode is enabled',
    );
    expectError(
      await send(`${base}/kbs/v0/attestation-policy`, { method: 'POST', body: '{}' }),
      401,
      'AdminAuthAccess',
    );
    expectError(await send(`${base}/kbs/v0/reference-value/x`), 401, 'AdminAuthAccess');
    expectError(
      await send(`${base}/kbs/v0/resource/a/b/c`, { method: 'POST', body: 'x' }),
      401,
      'AdminAuthInitialization',
      /^failed to initialize \[admin\] configuration: Admin access denied/,
    );
  });

  it("writes through LocalFs atomically into trustee's <dir>/repository/<repo>\\x2F<type>\\x2F<tag> and keeps them across restarts", async () => {
    const dir = join(tmp, 'localfs');
    const sections = {
      storage_backend: 'storage_type = "LocalFs"',
      'storage_backend.backends.local_fs': `dir_path = "${dir}"`,
    };
    const first = await start(sections);
    await putResource(first.base, 'default/sec/key', 'persisted');
    await allowAll(first.base);
    await first.kbs.close();
    expect(readFileSync(join(dir, 'repository', 'default\\x2Fsec\\x2Fkey'), 'utf8')).toBe('persisted');
    const second = await start(sections);
    const { cookie, key } = await handshake(second.base);
    const res = await send(`${second.base}/kbs/v0/resource/default/sec/key`, { headers: { cookie } });
    expect(res.status, res.text).toBe(200);
    expect(jweDecrypt(res.json(), key.privateKey).toString()).toBe('persisted');
  });

  it("serves trustee's legacy LocalFs repository plugin from <dir_path>/<repo>/<type>/<tag>", async () => {
    const dir = join(tmp, 'legacy-repo');
    const h = await start({}, `type = "LocalFs"\ndir_path = "${dir}"`);
    await putResource(h.base, 'default/k/t', 'legacy');
    expect(readFileSync(join(dir, 'default', 'k', 't'), 'utf8')).toBe('legacy');
  });
});

describe('operations', () => {
  it('exports trustee metric names', async () => {
    const { base } = await start();
    await handshake(base);
    const res = await send(`${base}/metrics`);
    expect(res.status).toBe(200);
    for (const name of [
      'kbs_http_requests_total',
      'kbs_http_request_duration_seconds',
      'kbs_http_request_size_bytes',
      'kbs_http_response_size_bytes',
      'kbs_http_active_connections',
      'kbs_auth_requests_total',
      'kbs_auth_successes_total',
      'kbs_auth_errors_total',
      'kbs_attestation_requests_total',
      'kbs_attestation_successes_total{tee_type="sample"} 1',
      'kbs_attestation_failures_total',
      'kbs_attestation_errors_total',
      'kbs_policy_evaluations_total',
      'kbs_resource_reads_total',
      'kbs_build_info',
    ]) {
      expect(res.text).toContain(name);
    }
  });

  it("counts and times the resource plugin with trustee's plugin metrics (plugin_name label)", async () => {
    const { base } = await start();
    await allowAll(base);
    await putResource(base, 'a/b/c', 'v');
    const { cookie } = await handshake(base);
    expect((await send(`${base}/kbs/v0/resource/a/b/c`, { headers: { cookie } })).status).toBe(200);
    // A missing resource is the plugin's own failure; a refused token is not.
    expect((await send(`${base}/kbs/v0/resource/a/b/missing`, { headers: { cookie } })).status).toBe(401);
    expect((await send(`${base}/kbs/v0/resource/a/b/c`)).status).toBe(401);
    const text = (await send(`${base}/metrics`)).text;
    expect(text).toContain('kbs_plugin_requests_total{plugin_name="resource"} 4');
    expect(text).toContain('kbs_plugin_errors_total{plugin_name="resource"} 1');
    expect(text).toContain('kbs_plugin_request_duration_seconds_count{plugin_name="resource"} 4');
  });

  it('serves HTTPS with the configured certificate', async () => {
    const dir = mkdtempSync(join(tmp, 'tls-'));
    const { execFileSync } = await import('node:child_process');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        'key.pem',
        '-out',
        'cert.pem',
        '-days',
        '2',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { cwd: dir, stdio: 'pipe' },
    );
    const h = await start({
      http_server: `sockets = ["127.0.0.1:0"]\nprivate_key = "${join(dir, 'key.pem')}"\ncertificate = "${join(dir, 'cert.pem')}"`,
    });
    expect(h.base).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const ca = readFileSync(join(dir, 'cert.pem'), 'utf8');
    const { token } = await handshake(h.base, { ca });
    expect(token.split('.')).toHaveLength(3);
    await expect(send(`${h.base}/healthz`)).rejects.toThrow();
  });

  it('lets a request in flight finish when it is closed', async () => {
    const h = await start();
    const { request } = await import('node:http');
    const u = new URL(`${h.base}/kbs/v0/resource/a/b/c`);
    const req = request({
      host: u.hostname,
      port: u.port,
      path: u.pathname,
      method: 'POST',
      headers: { 'content-length': '4' },
    });
    const status = new Promise<number>((resolve, reject) => {
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
    });
    req.write('ab');
    while ((await h.kbs.metrics.activeConnections.get()).values[0]?.value !== 1) {
      await new Promise((r) => setTimeout(r, 5));
    }
    const closing = h.kbs.close();
    req.end('cd');
    expect(await status).toBe(200);
    await closing;
    await expect(send(`${h.base}/healthz`)).rejects.toThrow();
  });

  it('listens on every configured socket', async () => {
    const h = await start({ http_server: 'sockets = ["127.0.0.1:0", "127.0.0.1:0"]\ninsecure_http = true' });
    expect(h.kbs.urls).toHaveLength(2);
    expect(h.kbs.urls[0]).not.toBe(h.kbs.urls[1]);
    for (const u of h.kbs.urls) expect((await send(`${u}/healthz`)).status).toBe(200);
  });

  it('refuses to start without token trust material unless insecure', async () => {
    await expect(start({ attestation_token: 'trusted_certs_paths = []' })).rejects.toThrow(
      /no trusted verification materials/,
    );
  });

  it('names the socket it cannot bind', async () => {
    const h = await start();
    const port = h.kbs.addresses[0]?.port;
    await expect(
      start({ http_server: `sockets = ["127.0.0.1:${port}"]\ninsecure_http = true` }),
    ).rejects.toThrow(new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}`));
  });
});
