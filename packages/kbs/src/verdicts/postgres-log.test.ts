// The verdict log in a real PostgreSQL server, shared by two KBS replicas: a handshake on A is listed by
// B, the list is capped at the ring size, entries hold no handshake secret, the console's health counts
// the live replicas, and recording with the database gone neither throws nor waits (the bounded queue
// drops).

import { type PostgresServer, startPostgresServer } from '@broker/kv-storage/testing';
import pg from 'pg';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from '../config.js';
import { type RunningKbs, startKbs } from '../kbs.js';
import { BUILTIN_RESOURCE_POLICIES } from '../policy/resource-policy.js';
import { handshake, send } from '../testing/client.js';
import { createVerdictTables, MAX_QUEUED_VERDICTS, PostgresVerdictLog } from './postgres-log.js';

let db: PostgresServer;
const running: RunningKbs[] = [];
const pools: pg.Pool[] = [];

beforeAll(async () => {
  db = await startPostgresServer();
}, 60_000);
afterAll(async () => {
  await db?.dispose();
});
beforeEach(async () => {
  await db.psql('DROP TABLE IF EXISTS kbs_verdicts; DROP TABLE IF EXISTS kbs_replicas;');
});
afterEach(async () => {
  while (pools.length > 0) await pools.pop()?.end();
});

function pool(): pg.Pool {
  const p = new pg.Pool({
    connectionString: db.url,
    max: 2,
    connectionTimeoutMillis: 500,
    query_timeout: 1000,
  });
  p.on('error', () => undefined);
  pools.push(p);
  return p;
}
afterEach(async () => {
  while (running.length > 0) await running.pop()?.close();
});

async function replica(size = 5): Promise<{ kbs: RunningKbs; base: string }> {
  const kbs = await startKbs(
    parseKbsConfigText(`
session_storage_type = "Postgres"
[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
console = true
verdict_log_size = ${size}
[storage_backend]
storage_type = "Postgres"
[storage_backend.backends.postgres]
host = "127.0.0.1"
port = ${db.port}
password = "${db.password}"
[[plugins]]
name = "resource"
`),
    { logger: pino({ level: 'silent' }) },
  );
  running.push(kbs);
  return { kbs, base: kbs.urls[0] as string };
}

const flushed = (kbs: RunningKbs) => kbs.verdictsRecorded();

describe('verdict log in PostgreSQL', () => {
  it('lists on replica B what replica A recorded, without nonce, key or token, capped at the ring size', async () => {
    const a = await replica();
    const b = await replica();
    expect(a.kbs.verdicts.backend).toBe('Postgres');
    const { token, key, nonce, cookie } = await handshake(a.base);
    await flushed(a.kbs);
    const list = (await send(`${b.base}/kbs/v0/admin/verdicts`)).json() as {
      size: number;
      verdicts: { id: number; kind: string; tee: string; session: string; claims?: unknown }[];
    };
    expect(list.size).toBe(5);
    expect(list.verdicts).toHaveLength(1);
    const [v] = list.verdicts;
    expect(v).toMatchObject({ kind: 'attestation', tee: 'sample' });
    expect(cookie).toContain(v?.session);
    expect(v?.claims).toHaveProperty('submods');
    expect((await send(`${b.base}/kbs/v0/admin/verdicts/${v?.id}`)).json()).toEqual(v);

    // What the database holds: no handshake secret.
    const stored = await db.psql('SELECT entry FROM kbs_verdicts');
    const secrets = [nonce, token, ...token.split('.')];
    for (const [k, x] of Object.entries(key.publicJwk))
      if (!['kty', 'crv', 'e'].includes(k)) secrets.push(String(x));
    for (const s of secrets) expect(stored).not.toContain(s);

    // Resource requests on both replicas: one list, newest first, trimmed to 5.
    await send(`${a.base}/kbs/v0/resource-policy`, {
      method: 'POST',
      body: JSON.stringify({
        policy: Buffer.from(BUILTIN_RESOURCE_POLICIES.allow_all).toString('base64url'),
      }),
    });
    // Each replica writes behind on its own; waiting for each write keeps the order of the requests
    // the order of the rows, as it is in a deployment whose requests are further apart than a flush.
    for (let i = 0; i < 6; i++) {
      const r = i % 2 === 0 ? a : b;
      await send(`${r.base}/kbs/v0/resource/default/key/k${i}`, { headers: { cookie } });
      await flushed(r.kbs);
    }
    await Promise.all([flushed(a.kbs), flushed(b.kbs)]);
    expect(await db.psql('SELECT count(*) FROM kbs_verdicts')).toBe('5\n');
    const after = (await send(`${a.base}/kbs/v0/admin/verdicts?kind=resource`)).json() as {
      verdicts: { id: number; resource: string }[];
    };
    expect(after.verdicts.map((x) => x.resource)).toEqual([5, 4, 3, 2, 1].map((i) => `default/key/k${i}`));
    const ids = after.verdicts.map((x) => x.id);
    expect([...ids].sort((x, y) => y - x)).toEqual(ids);
    // The attestation has been trimmed away.
    expect((await send(`${a.base}/kbs/v0/admin/verdicts/${v?.id}`)).status).toBe(404);
  });

  it('counts the live replicas in the health view', async () => {
    const a = await replica();
    const b = await replica();
    // Each replica's first announcement is sent at start; a read on the same link comes after it.
    const health = async (base: string) =>
      (await send(`${base}/kbs/v0/admin/health`)).json() as {
        replicas: number;
        storage: Record<string, string>;
      };
    expect(await health(b.base)).toMatchObject({
      replicas: 2,
      storage: { backend: 'Postgres', sessions: 'Postgres', verdictLog: 'Postgres' },
    });
    running.splice(running.indexOf(a.kbs), 1);
    await a.kbs.close();
    expect((await health(b.base)).replicas).toBe(1);
  });

  it('numbers a burst written in batches in order, finds each by id, and keeps the ring size', async () => {
    const p = pool();
    await createVerdictTables(p);
    const log = new PostgresVerdictLog(p, { size: 100 });
    {
      for (let i = 0; i < 150; i++)
        log.record({ kind: 'resource', status: 'allowed', method: 'GET', resource: `r/t/${i}` });
      await log.flushed();
      const list = await log.list();
      expect(list.map((v) => v.id)).toEqual(Array.from({ length: 100 }, (_, i) => 150 - i));
      expect(list.map((v) => (v as { resource: string }).resource)).toEqual(
        Array.from({ length: 100 }, (_, i) => `r/t/${149 - i}`),
      );
      for (const id of [150, 99, 51]) expect((await log.get(id))?.id).toBe(id);
      expect(await log.get(50)).toBeUndefined();
      expect(await log.get(151)).toBeUndefined();
      expect(await log.list({ limit: 3, status: 'allowed' })).toHaveLength(3);
      expect(await log.list({ status: 'denied' })).toEqual([]);
    }
  });

  it('records without waiting or throwing while the database is away, dropping what the queue cannot hold', async () => {
    const p = pool();
    await createVerdictTables(p);
    const drops: number[] = [];
    const log = new PostgresVerdictLog(p, { size: 10, onDropped: (n) => drops.push(n) });
    try {
      await db.stop();
      for (let i = 0; i < MAX_QUEUED_VERDICTS + 50; i++) {
        expect(log.record({ kind: 'resource', status: 'allowed', method: 'GET', resource: `r/t/${i}` })).toBe(
          undefined,
        );
      }
      await log.flushed();
      expect(drops.length).toBeGreaterThan(0);
      await expect(log.list()).rejects.toThrow();
    } finally {
      await db.start();
    }
    // Back: recording works again without a restart.
    for (;;) {
      log.record({ kind: 'resource', status: 'allowed', method: 'GET', resource: 'r/t/back' });
      await log.flushed();
      const list = await log.list().catch(() => []);
      if (list.some((v) => (v as { resource?: string }).resource === 'r/t/back')) break;
      await new Promise((r) => setTimeout(r, 20));
    }
  });
});
