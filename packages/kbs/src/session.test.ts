import { MemoryStorage } from '@broker/kv-storage';
import type { Challenge, KbsRequest } from '@broker/protocol';
import { describe, expect, it } from 'vitest';
import {
  decodeSession,
  encodeSession,
  SessionStore,
  sessionCookie,
  sessionIdFromCookieHeader,
} from './session.js';

const request: KbsRequest = { version: '0.4.0', tee: 'sample', 'extra-params': '' };
const challenge = (n = 'bm9uY2U='): Challenge => ({ nonce: n, 'extra-params': '' });
const MIN5 = 5 * 60_000;

function setup(limits?: { maxSessions?: number; maxBytes?: number }) {
  let now = Date.UTC(2030, 0, 1);
  const storage = new MemoryStorage({ now: () => now });
  const evicted: number[] = [];
  const store = new SessionStore({
    storage,
    lifetimeMs: MIN5,
    sweepIntervalMs: 0,
    now: () => now,
    onEvict: (n) => evicted.push(n),
    ...(limits !== undefined && { limits }),
  });
  return {
    storage,
    store,
    evicted,
    advance: (ms: number) => {
      now += ms;
    },
    now: () => now,
  };
}

describe('SessionStore', () => {
  it('creates Authed sessions with a UUIDv4 simple id and a fixed lifetime', async () => {
    const { store, now } = setup();
    const s = await store.create(request, challenge());
    expect(s.id).toMatch(/^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
    expect(s.expiresAt).toBe(now() + MIN5);
    expect(await store.get(s.id)).toEqual(s);
  });

  it('keeps the lifetime fixed at /auth when the session is attested', async () => {
    const { store, advance } = setup();
    const s = await store.create(request, challenge());
    advance(4 * 60_000);
    const a = await store.attest(s, 'token');
    expect(a.expiresAt).toBe(s.expiresAt);
    advance(60_000 - 1);
    expect(await store.get(s.id)).toMatchObject({ status: 'Attested', token: 'token' });
    advance(2);
    expect(await store.get(s.id)).toBeUndefined();
  });

  it('deletes an expired session when it is read', async () => {
    const { store, storage, advance } = setup();
    const s = await store.create(request, challenge());
    advance(MIN5 + 1);
    expect(await store.get(s.id)).toBeUndefined();
    expect(await storage.list('kbs_protocol_session')).toEqual([]);
    expect(store.size).toBe(0);
  });

  it('ignores ids that are not session ids without touching the store', async () => {
    const { store } = setup();
    for (const id of [undefined, '', '../x', 'A'.repeat(32), '0'.repeat(31), `${'0'.repeat(32)}/x`]) {
      expect(await store.get(id)).toBeUndefined();
    }
  });

  it('caps the number of sessions, dropping the oldest first', async () => {
    const { store, storage, evicted } = setup({ maxSessions: 10 });
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) ids.push((await store.create(request, challenge())).id);
    expect(store.size).toBe(10);
    const kept = await storage.list('kbs_protocol_session');
    expect(kept.sort()).toEqual(ids.slice(15).sort());
    expect(await store.get(ids[0])).toBeUndefined();
    expect(await store.get(ids[24])).toBeDefined();
    expect(evicted.reduce((a, b) => a + b, 0)).toBe(15);
  });

  it('caps the bytes of sessions', async () => {
    const { store, storage } = setup({ maxBytes: 4096 });
    const big: KbsRequest = { ...request, 'extra-params': { blob: 'x'.repeat(1000) } };
    for (let i = 0; i < 20; i++) await store.create(big, challenge());
    expect(store.bytes).toBeLessThanOrEqual(4096);
    expect((await storage.list('kbs_protocol_session')).length).toBe(store.size);
    expect(store.size).toBeLessThan(5);
  });

  it('drops expired sessions before live ones when full', async () => {
    const { store, evicted, advance } = setup({ maxSessions: 3 });
    await store.create(request, challenge());
    await store.create(request, challenge());
    advance(MIN5 + 1);
    const live = await store.create(request, challenge());
    await store.create(request, challenge());
    await store.create(request, challenge());
    expect(evicted).toEqual([]);
    await store.create(request, challenge());
    expect(evicted).toEqual([1]);
    expect(await store.get(live.id)).toBeUndefined();
  });

  it('sweeps expired records, including those another replica wrote', async () => {
    const { store, storage, advance, now } = setup();
    const mine = await store.create(request, challenge());
    const foreign = { status: 'Attested' as const, id: 'f'.repeat(32), expiresAt: now() + 1000, token: 't' };
    // Another replica's backend keeps it without a ttl (as LocalFs does).
    await storage.set('kbs_protocol_session', foreign.id, encodeSession(foreign));
    await storage.set('kbs_protocol_session', 'junk', Buffer.from('not json'));
    advance(2000);
    expect(await store.sweep()).toBe(1);
    expect((await storage.list('kbs_protocol_session')).sort()).toEqual(['junk', mine.id].sort());
    advance(MIN5);
    await store.sweep();
    expect(await storage.list('kbs_protocol_session')).toEqual(['junk']);
    expect(store.size).toBe(0);
  });
});

describe('session records and cookies', () => {
  it("round-trips trustee's JSON form", () => {
    const s = {
      status: 'Authed' as const,
      id: 'a'.repeat(32),
      expiresAt: Date.UTC(2030, 0, 1),
      request,
      challenge: challenge(),
    };
    const json = JSON.parse(Buffer.from(encodeSession(s)).toString());
    expect(json).toEqual({
      Authed: { request, challenge: challenge(), id: s.id, timeout: '2030-01-01T00:00:00.000Z' },
    });
    expect(decodeSession(encodeSession(s))).toEqual(s);
  });

  it.each([
    ['not JSON', '{'],
    ['an array', '[]'],
    ['unknown state', '{"Other":{}}'],
    ['bad time', '{"Attested":{"token":"t","id":"x","timeout":"soon"}}'],
    ['no token', '{"Attested":{"id":"x","timeout":"2030-01-01T00:00:00Z"}}'],
    ['no challenge', '{"Authed":{"request":{},"id":"x","timeout":"2030-01-01T00:00:00Z"}}'],
  ])('refuses a record that is %s', (_what, text) => {
    expect(decodeSession(Buffer.from(text))).toBeUndefined();
  });

  it('sets only Expires on the cookie', () => {
    const s = {
      status: 'Attested' as const,
      id: 'b'.repeat(32),
      expiresAt: Date.UTC(2030, 0, 1, 12, 5, 9),
      token: 't',
    };
    expect(sessionCookie(s)).toBe(`kbs-session-id=${'b'.repeat(32)}; Expires=Tue, 01 Jan 2030 12:05:09 GMT`);
  });

  it('finds the session id among other cookies', () => {
    expect(sessionIdFromCookieHeader('a=1; kbs-session-id=abc; kbs-session-id=def')).toBe('abc');
    expect(sessionIdFromCookieHeader('a=1')).toBeUndefined();
    expect(sessionIdFromCookieHeader(undefined)).toBeUndefined();
  });
});
