// The operator console's shared view across dist/bin/kbs replicas over HTTPS on one real redis-server:
// a guest attested on replica 0 is listed in replica 1's verdict log, and replica 1's health counts both
// replicas, then one once replica 0 has stopped.
import { sign } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  prepareReplicas,
  type RedisProcess,
  type ReplicaSet,
  sampleGuest,
  startRedis,
} from './helpers/replicas.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-console-replicas-'));
let redis: RedisProcess;
let set: ReplicaSet;

/** An admin JWT signed with the replicas' admin key (Ed25519), as an operator pastes it. */
function adminJwt(): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const input = `${b64({ alg: 'EdDSA' })}.${b64({ role: 'admin', exp: Math.floor(Date.now() / 1000) + 600 })}`;
  const key = readFileSync(join(dir, 'admin.key'));
  return `${input}.${sign(null, Buffer.from(input), key).toString('base64url')}`;
}

async function adminGet(replica: number, path: string): Promise<unknown> {
  const r = await call(set.ca, `${set.replicas[replica]?.url}/kbs/v0/admin/${path}`, 'GET', {
    authorization: `Bearer ${adminJwt()}`,
  });
  expect(r.status, r.body).toBe(200);
  return JSON.parse(r.body);
}

beforeAll(async () => {
  redis = await startRedis(join(dir, 'redis'));
  set = await prepareReplicas(dir, redis.url, 2);
  for (const r of set.replicas) {
    const text = readFileSync(r.configPath, 'utf8');
    expect(text).toContain('[admin]\n');
    writeFileSync(
      r.configPath,
      text.replace('[admin]\n', '[admin]\nconsole = true\nverdict_log_size = 50\n'),
    );
  }
  await Promise.all(set.replicas.map((r) => r.start()));
}, 60_000);

afterAll(async () => {
  await set?.stopAll();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('console across replicas on one Redis, real processes', () => {
  it('lists on replica 1 the attestation made on replica 0, and counts the live replicas', async () => {
    const r0 = set.replicas[0]?.url as string;
    const guest = sampleGuest(set.ca);
    const auth = await guest.auth(r0);
    const attest = await guest.attest(r0, auth.cookie, auth.nonce);
    expect(attest.status, attest.body).toBe(200);

    // Replica 0 sends its verdict to Redis after answering: wait for it to show on replica 1.
    type Listed = { verdicts: { kind: string; tee: string; session: string }[] };
    let listed: Listed;
    for (;;) {
      listed = (await adminGet(1, 'verdicts?kind=attestation')) as Listed;
      if (listed.verdicts.length > 0) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    expect(listed.verdicts).toHaveLength(1);
    expect(listed.verdicts[0]).toMatchObject({ kind: 'attestation', tee: 'sample' });
    expect(auth.cookie).toContain(listed.verdicts[0]?.session);
    expect(JSON.stringify(listed)).not.toContain(auth.nonce);

    expect(await adminGet(1, 'health')).toMatchObject({
      replicas: 2,
      storage: { backend: 'Redis', sessions: 'Redis', verdictLog: 'Redis' },
    });
    // A replica stopping takes itself out of the count.
    await set.replicas[0]?.stop();
    expect(await adminGet(1, 'health')).toMatchObject({ replicas: 1 });
  }, 60_000);
});
