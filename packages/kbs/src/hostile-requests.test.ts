// Issue 14 (KBS part) over real HTTP on 127.0.0.1: an encoded separator inside a resource path segment,
// an admin ACL that must see the path the router acts on, and oversized `extra-params` in /auth.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signJwt } from '@broker/auth/testing';
import { generateTeeKeyPair, jweDecrypt } from '@broker/protocol';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from './config.js';
import { type RunningKbs, startKbs } from './kbs.js';
import { MAX_EXTRA_PARAMS_BYTES } from './rcar.js';
import { AUTH_BODY, attestationBody, cookieOf, handshake, type Response, send } from './testing/client.js';

const ERR = 'https://github.com/confidential-containers/kbs/errors/';
const b64u = (s: string) => Buffer.from(s).toString('base64url');

const running: RunningKbs[] = [];
afterEach(async () => {
  while (running.length > 0) await running.pop()?.close();
});

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'kbs-hostile-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function start(
  admin: string,
  http = 'payload_request_size = 1',
): Promise<{ kbs: RunningKbs; base: string }> {
  const toml = `[http_server]\nsockets = ["127.0.0.1:0"]\ninsecure_http = true\n${http}\n[attestation_token]\ninsecure_header_jwk = true\n${admin}\n[[plugins]]\nname = "resource"\n`;
  const kbs = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
  running.push(kbs);
  return { kbs, base: kbs.urls[0] as string };
}

const INSECURE_ADMIN = '[admin]\nauthorization_mode = "InsecureAllowAll"';

function expectError(res: Response, status: number, kind: string, detail?: RegExp): void {
  expect(res.status, res.text).toBe(status);
  const body = res.json() as { type: string; detail: string };
  expect(body.type).toBe(ERR + kind);
  if (detail !== undefined) expect(body.detail).toMatch(detail);
}

describe('a resource path segment that decodes to a separator', () => {
  // A per-segment policy as trustee's samples write them: everything but the `app-secret` type.
  const POLICY =
    'package policy\nimport rego.v1\ndefault allow := false\nallow if data["resource-path"][1] != "app-secret"\n';

  it('is refused (404 InvalidRequestPath) instead of being judged as one segment and served as two', async () => {
    const { base } = await start(INSECURE_ADMIN);
    const set = await send(`${base}/kbs/v0/resource-policy`, {
      method: 'POST',
      body: JSON.stringify({ policy: b64u(POLICY) }),
    });
    expect(set.status, set.text).toBe(200);
    for (const path of ['default/app-secret/key', 'default/public/key']) {
      const put = await send(`${base}/kbs/v0/resource/${path}`, { method: 'POST', body: `value of ${path}` });
      expect(put.status, put.text).toBe(200);
    }
    const { token, key } = await handshake(base);
    const bearer = { authorization: `Bearer ${token}` };
    // The policy works on plain paths.
    const pub = await send(`${base}/kbs/v0/resource/default/public/key`, { headers: bearer });
    expect(pub.status, pub.text).toBe(200);
    expect(Buffer.from(jweDecrypt(JSON.parse(pub.text), key.privateKey)).toString()).toBe(
      'value of default/public/key',
    );
    expectError(
      await send(`${base}/kbs/v0/resource/default/app-secret/key`, { headers: bearer }),
      401,
      'PolicyDeny',
    );
    // The same resource with the second separator encoded, in every spelling.
    for (const sep of ['%2F', '%2f', '%5C', '%5c', '%00']) {
      const res = await send(`${base}/kbs/v0/resource/default/app-secret${sep}key`, { headers: bearer });
      expectError(res, 404, 'InvalidRequestPath', /is invalid/);
    }
    const twice = await send(`${base}/kbs/v0/resource/default%2Fapp-secret/key`, { headers: bearer });
    expectError(twice, 404, 'InvalidRequestPath');
    // Admin writes cannot place a resource through an encoded separator either.
    const write = await send(`${base}/kbs/v0/resource/default/x%2Fy/z`, { method: 'POST', body: 'v' });
    expectError(write, 404, 'InvalidRequestPath');
    // A double-encoded slash decodes once, to `%2F` as text, which the resource path rule refuses.
    const double = await send(`${base}/kbs/v0/resource/default/app-secret%252Fkey`, { headers: bearer });
    expect(double.status).toBe(401);
  });
});

describe('the admin ACL and percent-encoding', () => {
  it('matches the path the router acts on, so %72esource-policy is the resource policy', async () => {
    const idp = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = join(tmp, 'idp.pem');
    writeFileSync(pem, idp.publicKey.export({ type: 'spki', format: 'pem' }));
    // `ops` may use every admin endpoint except the resource policy.
    const admin = `[admin]\nauthorization_mode = "AuthenticatedAuthorization"\n[admin.authentication.bearer_jwt]\nidentity_providers = [{ public_key_uri = "${pem}" }]\n[admin.authorization.regex_acl]\nacls = [{ role = "ops", allowed_endpoints = '^/kbs/v0/(?!resource-policy$)[^?]*$' }]\n`;
    const { base } = await start(admin);
    const token = signJwt(
      { alg: 'ES256' },
      { exp: Math.floor(Date.now() / 1000) + 300, role: 'ops' },
      idp.privateKey,
    );
    const headers = { authorization: `Bearer ${token}` };
    const body = JSON.stringify({ policy: b64u('package policy\nimport rego.v1\ndefault allow := true\n') });

    const put = await send(`${base}/kbs/v0/resource/default/k/v`, { method: 'POST', headers, body: 'x' });
    expect(put.status, put.text).toBe(200);
    const plain = await send(`${base}/kbs/v0/resource-policy`, { method: 'POST', headers, body });
    expectError(plain, 401, 'AdminAuthAccess', /Role ops not allowed for path \/kbs\/v0\/resource-policy/);
    for (const spelled of ['%72esource-policy', 'resource%2Dpolicy', '%72%65source-policy']) {
      const res = await send(`${base}/kbs/v0/${spelled}`, { method: 'POST', headers, body });
      expectError(res, 401, 'AdminAuthAccess', /not allowed for path \/kbs\/v0\/resource-policy$/);
    }
    // Listing goes through the same check.
    expectError(await send(`${base}/kbs/v0/%72esource-policy`, { headers }), 401, 'AdminAuthAccess');
    // Segments after a built-in endpoint are ignored by the router, so the ACL does not see them either.
    for (const extra of ['resource-policy/', 'resource-policy/x', 'resource-policy/x/y']) {
      const res = await send(`${base}/kbs/v0/${extra}`, { method: 'POST', headers, body });
      expectError(res, 401, 'AdminAuthAccess', /not allowed for path \/kbs\/v0\/resource-policy$/);
    }
    // The ACL does not see the query, which routing ignores too.
    const viaQuery = await send(`${base}/kbs/v0/resource/default/k/w?/x`, {
      method: 'POST',
      headers,
      body: 'y',
    });
    expect(viaQuery.status, viaQuery.text).toBe(200);
  });
});

describe('extra-params in /auth', () => {
  const authWith = (extra: unknown) =>
    JSON.stringify({ version: '0.4.0', tee: 'sample', 'extra-params': extra });

  it(`accepts up to ${MAX_EXTRA_PARAMS_BYTES} bytes and refuses more`, async () => {
    const { base } = await start(INSECURE_ADMIN);
    // JSON of a string: its characters plus the two quotes.
    const fits = 'a'.repeat(MAX_EXTRA_PARAMS_BYTES - 2);
    expect((await send(`${base}/kbs/v0/auth`, { method: 'POST', body: authWith(fits) })).status).toBe(200);
    expectError(
      await send(`${base}/kbs/v0/auth`, { method: 'POST', body: authWith(`${fits}a`) }),
      401,
      'AttestationError',
      /RCAR handshake Auth failed: extra-params is 4097 bytes, more than the 4096 allowed/,
    );
    const nested = { 'supported-hash-algorithms': Array.from({ length: 1000 }, () => 'sha512') };
    expectError(
      await send(`${base}/kbs/v0/auth`, { method: 'POST', body: authWith(nested) }),
      401,
      'AttestationError',
      /extra-params is \d+ bytes/,
    );
  });

  it('128 requests of 2 MiB are refused and evict no other session', async () => {
    // trustee's default body limit (2 MiB), and requests that just fit it.
    const { base, kbs } = await start(INSECURE_ADMIN, 'payload_request_size = 2');
    const key = generateTeeKeyPair();
    const auth = await send(`${base}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
    expect(auth.status).toBe(200);
    const cookie = cookieOf(auth);
    const { nonce } = auth.json() as { nonce: string };
    const bytesBefore = kbs.sessions.bytes;

    const huge = authWith('x'.repeat(2 * 1024 * 1024 - 64));
    expect(huge.length).toBeLessThanOrEqual(2 * 1024 * 1024);
    let refused = 0;
    for (let i = 0; i < 128; i += 8) {
      const batch = await Promise.all(
        Array.from({ length: 8 }, () => send(`${base}/kbs/v0/auth`, { method: 'POST', body: huge })),
      );
      for (const r of batch) if (r.status === 401) refused++;
    }
    expect(refused).toBe(128);
    expect(kbs.sessions.size).toBe(1);
    expect(kbs.sessions.bytes).toBe(bytesBefore);
    // The guest that started first finishes its handshake.
    const attest = await send(`${base}/kbs/v0/attest`, {
      method: 'POST',
      headers: { cookie },
      body: attestationBody(nonce, key),
    });
    expect(attest.status, attest.text).toBe(200);
  }, 120_000);
});
