import { createClient } from 'redis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { StorageUnavailable } from './errors.js';
import { InvalidStorageKey } from './keys.js';
import { RedisStorage, redactRedisUrl } from './redis.js';
import { freeLoopbackPort, type RedisServer, startRedisServer } from './testing/redis-server.js';

const enc = (s: string) => Buffer.from(s, 'utf8');
const dec = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString('utf8'));

let server: RedisServer;
let raw: ReturnType<typeof createClient>;

beforeAll(async () => {
  server = await startRedisServer();
  raw = createClient({ url: server.url });
  raw.on('error', () => undefined);
  await raw.connect();
});

afterAll(async () => {
  await raw?.close().catch(() => undefined);
  await server?.dispose();
});

beforeEach(async () => {
  if (!raw.isReady) await raw.connect().catch(() => undefined);
  await raw.flushAll();
});

const open = () => RedisStorage.open({ url: server.url });

describe('RedisStorage', () => {
  it("stores each key as the string <namespace>:<key> holding the raw bytes (trustee's layout)", async () => {
    const s = await open();
    expect(await s.set('repository', 'default/key/one', enc('1'))).toBe(true);
    expect(await raw.get('repository:default/key/one')).toBe('1');
    await raw.set('kbs:resource-policy.rego', 'written by trustee');
    expect(dec(await s.get('kbs', 'resource-policy.rego'))).toBe('written by trustee');
    await s.close();
  });

  it('sets, gets, lists and deletes per namespace', async () => {
    const s = await open();
    await s.set('repository', 'default/key/one', enc('1'));
    await s.set('kbs', 'resource-policy.rego', enc('p'));
    expect(dec(await s.get('repository', 'default/key/one'))).toBe('1');
    expect(await s.get('kbs', 'default/key/one')).toBeUndefined();
    expect(await s.list('repository')).toEqual(['default/key/one']);
    expect(await s.list('reference_value')).toEqual([]);
    expect(await s.delete('repository', 'default/key/one')).toBe(true);
    expect(await s.delete('repository', 'default/key/one')).toBe(false);
    expect(await s.get('repository', 'default/key/one')).toBeUndefined();
    await s.close();
  });

  it('round-trips arbitrary bytes and does not share memory with callers', async () => {
    const s = await open();
    const v = Buffer.from([0, 255, 13, 10, 0x80, 0xc3, 0x28]);
    await s.set('repository', 'r/t/bin', v);
    v[0] = 7;
    const got = (await s.get('repository', 'r/t/bin')) as Uint8Array;
    expect(Buffer.from(got)).toEqual(Buffer.from([0, 255, 13, 10, 0x80, 0xc3, 0x28]));
    await s.close();
  });

  it('keeps the existing value when overwrite is false, and exactly one of racing writers wins', async () => {
    const s = await open();
    expect(await s.set('kbs', 'a.rego', enc('first'), { overwrite: false })).toBe(true);
    expect(await s.set('kbs', 'a.rego', enc('second'), { overwrite: false })).toBe(false);
    expect(dec(await s.get('kbs', 'a.rego'))).toBe('first');
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => s.set('kbs', 'race.rego', enc(`w${i}`), { overwrite: false })),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    const winner = results.indexOf(true);
    expect(dec(await s.get('kbs', 'race.rego'))).toBe(`w${winner}`);
    await s.close();
  });

  it('lets Redis expire a key written with a lifetime (PX), with no sweep of ours', async () => {
    const s = await open();
    expect(s.expiresKeys()).toBe(true);
    await s.set('kbs_protocol_session', 'abc', enc('x'), { ttlMs: 60_000 });
    const pttl = await raw.pTTL('kbs_protocol_session:abc');
    expect(pttl).toBeGreaterThan(55_000);
    expect(pttl).toBeLessThanOrEqual(60_000);
    await s.set('kbs_protocol_session', 'short', enc('x'), { ttlMs: 1 });
    // Redis forgets it by itself: poll (no timing threshold) until it is gone.
    while ((await s.get('kbs_protocol_session', 'short')) !== undefined)
      await new Promise((r) => setTimeout(r, 5));
    expect(await s.list('kbs_protocol_session')).toEqual(['abc']);
    // A later write without a lifetime makes the key permanent.
    await s.set('kbs_protocol_session', 'abc', enc('y'));
    expect(await raw.pTTL('kbs_protocol_session:abc')).toBe(-1);
    await expect(s.set('kbs', 'k', enc('x'), { ttlMs: 0 })).rejects.toThrow(RangeError);
    await s.close();
  });

  it('lists a namespace larger than one SCAN batch, and only that namespace', async () => {
    const s = await open();
    const n = 2500;
    const multi = raw.multi();
    for (let i = 0; i < n; i++) multi.set(`reference_value:rv-${i}`, 'x');
    multi.set('reference_values:not-mine', 'x');
    multi.set('reference_valu', 'x');
    await multi.exec();
    const keys = await s.list('reference_value');
    expect(keys).toHaveLength(n);
    expect(new Set(keys)).toEqual(new Set(Array.from({ length: n }, (_, i) => `rv-${i}`)));
    await s.close();
  });

  it('treats glob characters in keys literally', async () => {
    const s = await open();
    await s.set('reference_value', 'a*', enc('1'));
    await s.set('reference_value', 'a[1]?', enc('2'));
    expect(dec(await s.get('reference_value', 'a*'))).toBe('1');
    expect((await s.list('reference_value')).sort()).toEqual(['a*', 'a[1]?']);
    expect(await s.get('reference_value', 'a')).toBeUndefined();
    await s.close();
  });

  it.each([[''], ['a\nb'], ['x\u0000'], ['k'.repeat(2000)]])('refuses the key %j', async (key) => {
    const s = await open();
    await expect(s.set('repository', key, enc('x'))).rejects.toBeInstanceOf(InvalidStorageKey);
    await expect(s.get('repository', key)).rejects.toBeInstanceOf(InvalidStorageKey);
    await expect(s.delete('repository', key)).rejects.toBeInstanceOf(InvalidStorageKey);
    expect(await raw.dbSize()).toBe(0);
    await s.close();
  });

  it('fails every operation with StorageUnavailable while Redis is down, and recovers when it returns', async () => {
    const events: string[] = [];
    const s = await RedisStorage.open({
      url: server.url,
      commandTimeoutMs: 500,
      maxReconnectDelayMs: 100,
      onEvent: (e) => events.push(e.kind),
    });
    await s.set('repository', 'r/t/kept', enc('persisted'));
    await raw.close();
    await server.stop();
    try {
      await expect(s.get('repository', 'r/t/kept')).rejects.toBeInstanceOf(StorageUnavailable);
      await expect(s.set('repository', 'r/t/x', enc('x'))).rejects.toBeInstanceOf(StorageUnavailable);
      await expect(s.delete('repository', 'r/t/kept')).rejects.toBeInstanceOf(StorageUnavailable);
      await expect(s.list('repository')).rejects.toBeInstanceOf(StorageUnavailable);
      const err = await s.get('repository', 'r/t/kept').catch((e: unknown) => e);
      expect((err as Error).message).toContain(`127.0.0.1:${server.port}`);
    } finally {
      await server.start();
      raw = createClient({ url: server.url });
      raw.on('error', () => undefined);
      await raw.connect();
    }
    // The client reconnects by itself; poll until a command goes through.
    let value: Uint8Array | undefined;
    for (;;) {
      try {
        value = await s.get('repository', 'r/t/kept');
        break;
      } catch (e) {
        expect(e).toBeInstanceOf(StorageUnavailable);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    // Persistence (append-only file) kept the value across the restart.
    expect(dec(value)).toBe('persisted');
    expect(events).toContain('disconnected');
    expect(events).toContain('reconnected');
    await s.close();
  });

  it('times a command out when Redis hangs, caps the commands left waiting, and carries on once it answers again', async () => {
    const s = await RedisStorage.open({ url: server.url, commandTimeoutMs: 300, maxPendingCommands: 3 });
    await s.set('repository', 'r/t/k', enc('v'));
    const pid = server.pid as number;
    process.kill(pid, 'SIGSTOP');
    // Whatever happens below, Redis runs again (later tests need it).
    const resume = setTimeout(() => process.kill(pid, 'SIGCONT'), 10_000);
    try {
      const waiting = [1, 2, 3].map(() => s.get('repository', 'r/t/k').catch((e: unknown) => e));
      const fourth = await s.get('repository', 'r/t/k').catch((e: unknown) => e);
      expect(fourth).toBeInstanceOf(StorageUnavailable);
      expect((fourth as Error).message).toMatch(/3 commands are already waiting/);
      for (const err of await Promise.all(waiting)) {
        expect(err).toBeInstanceOf(StorageUnavailable);
        expect((err as Error).message).toMatch(/no answer .* within 300 ms/);
      }
    } finally {
      process.kill(pid, 'SIGCONT');
      clearTimeout(resume);
    }
    // Once Redis answers the commands left waiting, new ones go through again; the late replies of the
    // timed-out commands are not taken for the answers to the next ones.
    for (;;) {
      try {
        await s.set('repository', 'r/t/other', enc('other'));
        break;
      } catch (e) {
        expect(e).toBeInstanceOf(StorageUnavailable);
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    expect(dec(await s.get('repository', 'r/t/k'))).toBe('v');
    expect(dec(await s.get('repository', 'r/t/other'))).toBe('other');
    await s.close();
  });

  it('gives up at start when Redis cannot be reached, naming the server but not the password', async () => {
    const port = await freeLoopbackPort();
    const err = await RedisStorage.open({
      url: `redis://user:s3cret@127.0.0.1:${port}`,
      startupTimeoutMs: 200,
      maxReconnectDelayMs: 50,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageUnavailable);
    expect((err as Error).message).toContain(`127.0.0.1:${port}`);
    expect((err as Error).message).not.toContain('s3cret');
  });

  it('refuses a URL that is not a Redis URL', async () => {
    await expect(
      RedisStorage.open({ url: 'http://127.0.0.1:1', startupTimeoutMs: 100 }),
    ).rejects.toBeInstanceOf(StorageUnavailable);
  });
});

describe('redactRedisUrl', () => {
  it('hides credentials', () => {
    expect(redactRedisUrl('redis://u:p@h:1/0')).toBe('redis://***@h:1/0');
    expect(redactRedisUrl('redis://h:1')).toBe('redis://h:1');
    expect(redactRedisUrl('not a url')).toBe('<unparseable URL>');
  });
});
