// KBS instances on one real PostgreSQL server (Debian's), in trustee's tables: any instance finishes a
// handshake another began, an admin change through one applies to the next request on the others, and a
// database outage gives 401s (never a release, never a crash) until the database returns.

import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { type PostgresServer, startPostgresServer } from '@broker/kv-storage/testing';
import { generateTeeKeyPair, jweDecrypt } from '@broker/protocol';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from './config.js';
import { type RunningKbs, startKbs } from './kbs.js';
import { BUILTIN_RESOURCE_POLICIES } from './policy/resource-policy.js';
import { AUTH_BODY, attestationBody, cookieOf, handshake, send } from './testing/client.js';

const ERR = 'https://github.com/confidential-containers/kbs/errors/';
const b64u = (s: string) => Buffer.from(s).toString('base64url');

let db: PostgresServer;
const running: RunningKbs[] = [];
const TABLES = [
  'kbs',
  'repository',
  'kbs_protocol_session',
  'attestation_service_policy',
  'reference_value',
  'provisioner',
];

beforeAll(async () => {
  db = await startPostgresServer();
}, 60_000);
afterAll(async () => {
  await db?.dispose();
});
beforeEach(async () => {
  await db.psql(TABLES.map((t) => `DROP TABLE IF EXISTS ${t};`).join('\n'));
});
afterEach(async () => {
  while (running.length > 0) await running.pop()?.close();
});

function config(extra = ''): string {
  return `
session_storage_type = "Postgres"
[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[storage_backend]
storage_type = "Postgres"
[storage_backend.backends.postgres]
host = "127.0.0.1"
port = ${db.port}
username = "postgres"
password = "${db.password}"
db = "postgres"
[[plugins]]
name = "resource"
${extra}`;
}

async function replica(lines: string[] = [], toml = config()): Promise<string> {
  const logger = pino({ level: 'info' }, { write: (s: string) => lines.push(s) });
  const kbs = await startKbs(parseKbsConfigText(toml), { logger });
  running.push(kbs);
  return kbs.urls[0] as string;
}

async function post(url: string, body: string | Uint8Array): Promise<void> {
  const r = await send(url, { method: 'POST', body });
  expect(r.status, r.text).toBe(200);
}

describe('KBS replicas on PostgreSQL', () => {
  it("serves what psql put in tables made by trustee's set-up.sql, as a user that may not create tables", async () => {
    const setup = readFileSync(vector('trustee/key-value-storage/postgres/set-up.sql'), 'utf8');
    await db.psql(`DROP ROLE IF EXISTS kbs_restricted;
${TABLES.map((t) => setup.replace('key_value', t)).join('\n')}
CREATE ROLE kbs_restricted LOGIN PASSWORD 'restricted-pw';
GRANT SELECT, INSERT, UPDATE, DELETE ON ${TABLES.join(', ')} TO kbs_restricted;
DROP TABLE IF EXISTS kbs_verdicts; DROP TABLE IF EXISTS kbs_replicas;
CREATE TABLE kbs_verdicts (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, entry TEXT NOT NULL);
CREATE TABLE kbs_replicas (id TEXT PRIMARY KEY, info TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);
GRANT SELECT, INSERT, UPDATE, DELETE ON kbs_verdicts, kbs_replicas TO kbs_restricted;
INSERT INTO kbs (key, value) VALUES ('resource-policy.rego', convert_to($$${BUILTIN_RESOURCE_POLICIES.allow_all}$$, 'UTF8'));
INSERT INTO repository (key, value) VALUES ('default/key/psql', decode('00ff10', 'hex'));`);
    const toml = config()
      .replace('username = "postgres"', 'username = "kbs_restricted"')
      .replace(`password = "${db.password}"`, 'password = "restricted-pw"');
    const a = await replica([], toml);
    const { cookie, key } = await handshake(a);
    const r = await send(`${a}/kbs/v0/resource/default/key/psql`, { headers: { cookie } });
    expect(r.status, r.text).toBe(200);
    expect(Buffer.from(jweDecrypt(r.json() as never, key.privateKey)).toString('hex')).toBe('00ff10');
    await post(`${a}/kbs/v0/resource/default/key/ours`, Buffer.from([1, 2, 0, 3]));
    expect(await db.psql("SELECT encode(value, 'hex') FROM repository WHERE key = 'default/key/ours'")).toBe(
      '01020003\n',
    );
    // The verdict log works with the tables made for it (README: setting up the database).
    await running[running.length - 1]?.verdictsRecorded();
    expect(Number(await db.psql('SELECT count(*) FROM kbs_verdicts'))).toBeGreaterThan(0);
    // The user could create nothing: the tables are trustee's, owned by the administrator.
    expect(await db.psql("SELECT count(*) FROM pg_tables WHERE tableowner = 'kbs_restricted'")).toBe('0\n');
  });

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
    // The session is a row of trustee's kbs_protocol_session table, keyed by the session id.
    const sid = cookie.split('=')[1] as string;
    expect(await db.psql(`SELECT key FROM kbs_protocol_session WHERE key = '${sid.replace(/'/g, '')}'`)).toBe(
      `${sid}\n`,
    );
    // The resource is a row of trustee's repository table, its bytes as written.
    expect(
      await db.psql("SELECT convert_from(value, 'UTF8') FROM repository WHERE key = 'default/key/one'"),
    ).toBe('shared secret\n');

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
    const written = performance.now();
    await post(
      `${a}/kbs/v0/resource-policy`,
      JSON.stringify({ policy: b64u(BUILTIN_RESOURCE_POLICIES.deny_all) }),
    );
    const denied = await send(`${b}/kbs/v0/resource/default/key/one`, { headers: bearer });
    console.log(
      `policy set through A and served by B's next request: ${(performance.now() - written).toFixed(1)} ms from the write's start`,
    );
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

  it('answers 401 while the database is down (no release, no crash) and serves again once it returns', async () => {
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

    await db.stop();
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
      expect(lines.some((l) => l.includes('PostgreSQL connection lost'))).toBe(true);
    } finally {
      await db.start();
    }
    const restarted = performance.now();
    // The pool opens new connections by itself; the first requests after the restart may still fail.
    let status = 0;
    while (status !== 200) {
      const r = await send(`${a}/kbs/v0/resource/default/key/one`, {
        headers: { authorization: `Bearer ${token}` },
      });
      status = r.status;
      if (status !== 200) await new Promise((res) => setTimeout(res, 20));
    }
    console.log(
      `database restarted: the KBS served a resource again ${(performance.now() - restarted).toFixed(1)} ms after the database was up`,
    );
    // The resource survived the restart, and a new handshake works.
    await handshake(a);
  });
});
