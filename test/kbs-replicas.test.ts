// Three dist/bin/kbs replicas over HTTPS on one real redis-server (append-only persistence), sharing the
// token-signing key: any replica finishes a handshake another began, admin changes through one apply to
// the next request on the others, a killed replica is survived by retrying on another, and a Redis
// restart loses no resource while the handshakes open at that moment fail cleanly and are redone.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jweDecrypt } from '@broker/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Guest,
  type HttpResult,
  prepareReplicas,
  type RedisProcess,
  type ReplicaSet,
  sampleGuest,
  startRedis,
} from './helpers/replicas.js';
import { SAMPLE_REFERENCE_VALUES } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-kbs-replicas-'));
const ERR = 'https://github.com/confidential-containers/kbs/errors/';
let redis: RedisProcess;
let set: ReplicaSet;
let urls: string[];

async function mustAdmin(replica: number, ...args: string[]): Promise<string> {
  const r = await set.admin(set.replicas[replica]!, ...args);
  if (r.code !== 0)
    throw new Error(`kbs-client ${args.join(' ')} failed (${r.code}):\n${r.stderr}${r.stdout}`);
  return r.stdout;
}

function plaintext(guest: Guest, r: HttpResult): string {
  expect(r.status, r.body).toBe(200);
  return Buffer.from(jweDecrypt(JSON.parse(r.body), guest.key.privateKey)).toString();
}

function errorType(r: HttpResult): string {
  return (JSON.parse(r.body) as { type: string }).type.slice(ERR.length);
}

async function putResource(replica: number, path: string, value: string | Buffer): Promise<void> {
  const file = join(dir, `res-${randomBytes(4).toString('hex')}`);
  writeFileSync(file, value);
  await mustAdmin(replica, 'set-resource', '--path', path, '--resource-file', file);
}

beforeAll(async () => {
  redis = await startRedis(join(dir, 'redis'));
  set = await prepareReplicas(dir, redis.url, 3);
  await Promise.all(set.replicas.map((r) => r.start()));
  urls = set.replicas.map((r) => r.url);
  await mustAdmin(0, 'set-resource-policy', '--allow-all');
});

afterAll(async () => {
  await set?.stopAll();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('KBS replicas on one Redis, real processes', () => {
  it('auth on one replica, attest on another, resource on a third; every replica accepts the token', async () => {
    await putResource(0, 'default/app/key', 'across replicas');
    const guest = sampleGuest(set.ca);
    const auth = await guest.auth(urls[0]!);
    expect(auth.status, auth.body).toBe(200);
    const attest = await guest.attest(urls[1]!, auth.cookie, auth.nonce);
    expect(attest.status, attest.body).toBe(200);
    const { token } = JSON.parse(attest.body) as { token: string };
    expect(plaintext(guest, await guest.resource(urls[2]!, 'default/app/key', { cookie: auth.cookie }))).toBe(
      'across replicas',
    );
    for (const url of urls) {
      expect(plaintext(guest, await guest.resource(url, 'default/app/key', { token }))).toBe(
        'across replicas',
      );
    }
  });

  it('applies an admin write through one replica to the next request on the others', async () => {
    const guest = sampleGuest(set.ca);
    const auth = await guest.auth(urls[2]!);
    const { token } = JSON.parse((await guest.attest(urls[2]!, auth.cookie, auth.nonce)).body) as {
      token: string;
    };

    await putResource(1, 'default/app/changing', 'first');
    expect(plaintext(guest, await guest.resource(urls[2]!, 'default/app/changing', { token }))).toBe('first');
    await putResource(2, 'default/app/changing', 'second');
    expect(plaintext(guest, await guest.resource(urls[0]!, 'default/app/changing', { token }))).toBe(
      'second',
    );

    await mustAdmin(1, 'set-resource-policy', '--deny-all');
    const denied = await guest.resource(urls[0]!, 'default/app/changing', { token });
    expect(denied.status).toBe(401);
    expect(errorType(denied)).toBe('PolicyDeny');
    await mustAdmin(0, 'set-resource-policy', '--allow-all');
    expect(plaintext(guest, await guest.resource(urls[1]!, 'default/app/changing', { token }))).toBe(
      'second',
    );
  });

  it('uses reference values registered on one replica in the appraisals of the others', async () => {
    await mustAdmin(0, 'set-resource-policy', '--affirming');
    try {
      await putResource(0, 'default/app/gated', 'affirmed');
      const tryFetch = async (attestOn: string, fetchOn: string) => {
        const guest = sampleGuest(set.ca);
        const auth = await guest.auth(attestOn);
        const attest = await guest.attest(attestOn, auth.cookie, auth.nonce);
        expect(attest.status, attest.body).toBe(200);
        return { guest, r: await guest.resource(fetchOn, 'default/app/gated', { cookie: auth.cookie }) };
      };
      // No reference values yet: trustee's default policy leaves the sample TEE contraindicated.
      const before = await tryFetch(urls[1]!, urls[2]!);
      expect(errorType(before.r)).toBe('PolicyDeny');
      for (const args of SAMPLE_REFERENCE_VALUES) await mustAdmin(2, 'set-sample-reference-value', ...args);
      const after = await tryFetch(urls[1]!, urls[0]!);
      expect(plaintext(after.guest, after.r)).toBe('affirmed');
      const got = await mustAdmin(0, 'get-reference-value', '--id', 'launch_digest');
      expect(got).toContain('abcde');
    } finally {
      await mustAdmin(0, 'set-resource-policy', '--allow-all');
    }
  });

  it('survives a replica killed in the middle of a run: the client retries the step on another', async () => {
    await putResource(0, 'default/app/run', 'still here');
    let retries = 0;
    let next = 0;
    /** Sends one step to the next replica in turn; a replica that cannot be reached is skipped. */
    const step = async <T>(f: (url: string) => Promise<T>): Promise<T> => {
      for (let attempt = 0; attempt < urls.length * 2; attempt++) {
        const url = urls[next++ % urls.length]!;
        try {
          return await f(url);
        } catch {
          retries++;
        }
      }
      throw new Error('no replica answered');
    };
    const rounds = 24;
    let killed = false;
    for (let i = 0; i < rounds; i++) {
      if (i === rounds / 3) {
        // SIGKILL: no graceful close, connections in flight are cut.
        await set.replicas[1]!.stop('SIGKILL');
        killed = true;
      }
      const guest = sampleGuest(set.ca);
      const auth = await step((u) => guest.auth(u));
      expect(auth.status, auth.body).toBe(200);
      const attest = await step((u) => guest.attest(u, auth.cookie, auth.nonce));
      expect(attest.status, attest.body).toBe(200);
      const res = await step((u) => guest.resource(u, 'default/app/run', { cookie: auth.cookie }));
      expect(plaintext(guest, res)).toBe('still here');
    }
    expect(killed).toBe(true);
    expect(retries).toBeGreaterThan(0);
    await set.replicas[1]!.start();
    const guest = sampleGuest(set.ca);
    const auth = await guest.auth(urls[1]!);
    expect((await guest.attest(urls[1]!, auth.cookie, auth.nonce)).status).toBe(200);
  });

  it('loses no resource when Redis restarts; handshakes open at that moment fail cleanly and are redone', async () => {
    const secret = randomBytes(32);
    await putResource(2, 'default/app/persisted', secret);
    const guest = sampleGuest(set.ca);
    const open = await guest.auth(urls[0]!);
    expect(open.status).toBe(200);

    await redis.stop('SIGKILL');
    try {
      // Every replica answers, with a KBS error and 401: no connection reset, no 5xx, no release.
      const attest = await guest.attest(urls[1]!, open.cookie, open.nonce);
      expect(attest.status).toBe(401);
      expect(errorType(attest)).toBe('AttestationError');
      const auth = await guest.auth(urls[2]!);
      expect(auth.status).toBe(401);
      const res = await guest.resource(urls[0]!, 'default/app/persisted', { cookie: open.cookie });
      expect(res.status).toBe(401);
    } finally {
      await redis.start();
    }

    // The guest redoes the handshake (as the real one does on a 401) until the replicas have reconnected.
    let value: Buffer | undefined;
    for (let attempt = 0; value === undefined; attempt++) {
      expect(attempt).toBeLessThan(500);
      const url = urls[attempt % urls.length]!;
      const auth = await guest.auth(url);
      if (auth.status !== 200) {
        await new Promise((r) => setTimeout(r, 20));
        continue;
      }
      const attest = await guest.attest(urls[(attempt + 1) % urls.length]!, auth.cookie, auth.nonce);
      if (attest.status !== 200) continue;
      const res = await guest.resource(urls[(attempt + 2) % urls.length]!, 'default/app/persisted', {
        cookie: auth.cookie,
      });
      if (res.status === 200) value = Buffer.from(jweDecrypt(JSON.parse(res.body), guest.key.privateKey));
    }
    expect(value).toEqual(secret);
    // Everything written before the restart is still there, through every replica.
    const auth = await guest.auth(urls[1]!);
    const { token } = JSON.parse((await guest.attest(urls[1]!, auth.cookie, auth.nonce)).body) as {
      token: string;
    };
    for (const url of urls) {
      expect(plaintext(guest, await guest.resource(url, 'default/app/key', { token }))).toBe(
        'across replicas',
      );
    }
  });
});
