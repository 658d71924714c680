// Two KBS instances on one real redis-server: any instance finishes a handshake another began, an admin
// change through one applies to the next request on the other, and a Redis outage gives 401s (never a
// release, never a crash) until Redis returns.

import { type RedisServer, startRedisServer } from '@broker/kv-storage/testing';
import { generateTeeKeyPair, jweDecrypt } from '@broker/protocol';
import pino from 'pino';
import { createClient } from 'redis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from './config.js';
import { type RunningKbs, startKbs } from './kbs.js';
import { BUILTIN_RESOURCE_POLICIES } from './policy/resource-policy.js';
import { AUTH_BODY, attestationBody, cookieOf, handshake, send } from './testing/client.js';

const ERR = 'https://github.com/confidential-containers/kbs/errors/';
const b64u = (s: string) => Buffer.from(s).toString('base64url');

let redis: RedisServer;
let raw: ReturnType<typeof createClient>;
const running: RunningKbs[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  raw = createClient({ url: redis.url });
  raw.on('error', () => undefined);
  await raw.connect();
});
afterAll(async () => {
  await raw?.close().catch(() => undefined);
  await redis?.dispose();
});
beforeEach(async () => {
  await raw.flushAll();
});
afterEach(async () => {
  while (running.length > 0) await running.pop()?.close();
});

function config(extra = ''): string {
  return `
session_storage_type = "Redis"
[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[storage_backend]
storage_type = "Redis"
[storage_backend.backends.redis]
url = "${redis.url}"
[[plugins]]
name = "resource"
${extra}`;
}

async function replica(lines: string[] = []): Promise<string> {
  const logger = pino({ level: 'info' }, { write: (s: string) => lines.push(s) });
  const kbs = await startKbs(parseKbsConfigText(config()), { logger });
  running.push(kbs);
  return kbs.urls[0] as string;
}

async function post(url: string, body: string | Uint8Array): Promise<void> {
  const r = await send(url, { method: 'POST', body });
  expect(r.status, r.text).toBe(200);
}

describe('KBS replicas on Redis', () => {
  it('finishes on B and C a handshake begun on A; every replica accepts every token', async () => {
    const [a, b, c] = [await replica(), await replica(), await replica()];
    await post(
      `${a}/kbs/v0/resource-policy`,
      JSON.stringify({ policy: b64u(BUILTIN_RESOURCE_POLICIES.allow_all) }),
    );
    await post(`${b}/kbs/v0/resource/default/key/one`, 'shared secret');

    const key = generateTeeKeyPair();
    const auth = await send(`${a}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
    expect(auth.status).toBe(200);
    const cookie = cookieOf(auth);
    const { nonce } = auth.json() as { nonce: string };
    // The session lives in Redis with Redis's own lifetime (5 minutes by default).
    const sid = cookie.split('=')[1] as string;
    const pttl = await raw.pTTL(`kbs_protocol_session:${sid}`);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(300_000);

    const attest = await send(`${b}/kbs/v0/attest`, {
      method: 'POST',
      headers: { cookie },
      body: attestationBody(nonce, key),
    });
    expect(attest.status, attest.text).toBe(200);
    const { token } = attest.json() as { token: string };

    const viaCookie = await send(`${c}/kbs/v0/resource/default/key/one`, { headers: { cookie } });
    expect(viaCookie.status, viaCookie.text).toBe(200);
    expect(Buffer.from(jweDecrypt(viaCookie.json() as never, key.privateKey)).toString()).toBe(
      'shared secret',
    );
    for (const r of [a, b, c]) {
      const viaBearer = await send(`${r}/kbs/v0/resource/default/key/one`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(viaBearer.status, viaBearer.text).toBe(200);
    }
  });

  it('applies an admin change made through one replica to the next request on another', async () => {
    const [a, b] = [await replica(), await replica()];
    await post(`${a}/kbs/v0/resource/default/key/one`, 'v1');
    await post(
      `${a}/kbs/v0/resource-policy`,
      JSON.stringify({ policy: b64u(BUILTIN_RESOURCE_POLICIES.allow_all) }),
    );
    const { token } = await handshake(b);
    const bearer = { authorization: `Bearer ${token}` };
    expect((await send(`${b}/kbs/v0/resource/default/key/one`, { headers: bearer })).status).toBe(200);

    // Resource policy: deny through A, the very next request on B is denied.
    await post(
      `${a}/kbs/v0/resource-policy`,
      JSON.stringify({ policy: b64u(BUILTIN_RESOURCE_POLICIES.deny_all) }),
    );
    const denied = await send(`${b}/kbs/v0/resource/default/key/one`, { headers: bearer });
    expect(denied.status).toBe(401);
    expect((denied.json() as { type: string }).type).toBe(`${ERR}PolicyDeny`);
    await post(
      `${a}/kbs/v0/resource-policy`,
      JSON.stringify({ policy: b64u(BUILTIN_RESOURCE_POLICIES.allow_all) }),
    );

    // Resource: deleted through A, gone on B.
    const del = await send(`${a}/kbs/v0/resource/default/key/one`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect((await send(`${b}/kbs/v0/resource/default/key/one`, { headers: bearer })).status).toBe(401);

    // Attestation policy: one that refuses to evaluate, set through A, is used by B's next /attest.
    await post(
      `${a}/kbs/v0/attestation-policy`,
      JSON.stringify({
        policy_id: 'default_cpu',
        policy: b64u('package policy\nimport rego.v1\ntrust_claims := {"executables": 1000}\n'),
      }),
    );
    await expect(handshake(b)).rejects.toThrow(/attest: 401/);
  });

  it('uses reference values registered on one replica in the appraisals of another', async () => {
    const [a, b] = [await replica(), await replica()];
    const policy =
      'package policy\nimport rego.v1\ndefault executables := 33\nexecutables := 2 if { query_reference_value("svn") == ["1"] }\ntrust_claims := {"executables": executables}\n';
    await post(
      `${a}/kbs/v0/attestation-policy`,
      JSON.stringify({ policy_id: 'default_cpu', policy: b64u(policy) }),
    );
    const claim = async () => {
      const { token } = await handshake(b);
      const payload = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString());
      return payload.submods.cpu0['ear.trustworthiness-vector'].executables as number;
    };
    expect(await claim()).toBe(33);
    await post(
      `${a}/kbs/v0/reference-value`,
      JSON.stringify({
        version: '0.1.0',
        type: 'sample',
        payload: Buffer.from(JSON.stringify({ svn: ['1'] })).toString('base64'),
      }),
    );
    expect(await claim()).toBe(2);
    const got = await send(`${b}/kbs/v0/reference-value/svn`);
    expect(got.status).toBe(200);
  });

  it('answers 401 while Redis is down (no release, no crash) and serves again once it returns', async () => {
    const lines: string[] = [];
    const a = await replica(lines);
    await post(
      `${a}/kbs/v0/resource-policy`,
      JSON.stringify({ policy: b64u(BUILTIN_RESOURCE_POLICIES.allow_all) }),
    );
    await post(`${a}/kbs/v0/resource/default/key/one`, 'kept');
    const key = generateTeeKeyPair();
    const open = await send(`${a}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
    const { token } = await handshake(a);

    await raw.close();
    await redis.stop();
    try {
      const auth = await send(`${a}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
      expect(auth.status).toBe(401);
      expect((auth.json() as { type: string }).type).toBe(`${ERR}AttestationError`);
      const attest = await send(`${a}/kbs/v0/attest`, {
        method: 'POST',
        headers: { cookie: cookieOf(open) },
        body: attestationBody((open.json() as { nonce: string }).nonce, key),
      });
      expect(attest.status).toBe(401);
      expect(attest.text).not.toContain('token');
      const res = await send(`${a}/kbs/v0/resource/default/key/one`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(401);
      expect((res.json() as { type: string }).type).toBe(`${ERR}PluginInternalError`);
      const health = await send(`${a}/healthz`);
      expect(health.status).toBe(200);
      expect(lines.some((l) => l.includes('storage backend unavailable'))).toBe(true);
      expect(lines.some((l) => l.includes('"level":50') && l.includes('unexpected failure'))).toBe(false);
    } finally {
      await redis.start();
      raw = createClient({ url: redis.url });
      raw.on('error', () => undefined);
      await raw.connect();
    }
    // The client reconnects by itself; the first requests after the restart may still fail.
    let status = 0;
    while (status !== 200) {
      const r = await send(`${a}/kbs/v0/resource/default/key/one`, {
        headers: { authorization: `Bearer ${token}` },
      });
      status = r.status;
      if (status !== 200) await new Promise((res) => setTimeout(res, 20));
    }
    // The resource survived the restart (append-only file), and a new handshake works.
    await handshake(a);
  });
});
