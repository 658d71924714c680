import type { KvStorage, Namespace, SetOptions } from '@broker/kv-storage';
import { describe, expect, it } from 'vitest';
import {
  addMonthsUtc,
  createRvps,
  MAX_REFERENCE_VALUE_DEPTH,
  MAX_REFERENCE_VALUES_PER_MESSAGE,
  MAX_RVPS_MESSAGE_LENGTH,
  RvpsError,
  type RvpsErrorCode,
} from './index.js';

class MemoryKv implements KvStorage {
  readonly data = new Map<string, Uint8Array>();
  gets = 0;
  async get(ns: Namespace, key: string) {
    this.gets++;
    return this.data.get(`${ns}\u0000${key}`);
  }
  async set(ns: Namespace, key: string, value: Uint8Array, options?: SetOptions) {
    const k = `${ns}\u0000${key}`;
    if (options?.overwrite === false && this.data.has(k)) return false;
    this.data.set(k, value);
    return true;
  }
  async delete(ns: Namespace, key: string) {
    return this.data.delete(`${ns}\u0000${key}`);
  }
  async list(ns: Namespace) {
    return [...this.data.keys()]
      .filter((k) => k.startsWith(`${ns}\u0000`))
      .map((k) => k.slice(ns.length + 1));
  }
  async close() {}
}

function sampleMessage(values: unknown, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    version: '0.1.0',
    type: 'sample',
    payload: Buffer.from(JSON.stringify(values)).toString('base64'),
    ...extra,
  });
}

async function rejects(p: Promise<unknown>, code: RvpsErrorCode): Promise<RvpsError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(RvpsError);
    expect((e as RvpsError).code).toBe(code);
    return e as RvpsError;
  }
  throw new Error('expected a rejection');
}

const fixedNow = () => new Date('2025-03-14T15:09:26.535Z');

describe('built-in RVPS', () => {
  it("stores each sample value as trustee's ReferenceValue record in reference_value", async () => {
    const kv = new MemoryKv();
    const rvps = createRvps(kv, { now: fixedNow });
    const names = await rvps.register(
      sampleMessage({ svn: ['1'], launch_digest: ['abcde'], major_version: 1 }),
    );
    expect(names.sort()).toEqual(['launch_digest', 'major_version', 'svn']);
    const raw = Buffer.from(kv.data.get('reference_value\u0000svn')!).toString('utf8');
    expect(raw).toBe('{"version":"0.1.0","name":"svn","expiration":"2026-03-14T15:09:26Z","value":["1"]}');
    expect(await rvps.get('svn')).toEqual({
      version: '0.1.0',
      name: 'svn',
      expiration: '2026-03-14T15:09:26Z',
      value: ['1'],
    });
  });

  it('query returns only the value, undefined when absent or expired (as trustee did before 2025)', async () => {
    const kv = new MemoryKv();
    kv.data.set(
      'reference_value\u0000old',
      Buffer.from('{"version":"0.1.0","name":"old","expiration":"2000-01-01T00:00:00Z","value":{"a":[1,2]}}'),
    );
    kv.data.set(
      'reference_value\u0000current',
      Buffer.from('{"version":"0.1.0","name":"current","expiration":"2025-03-14T15:09:27Z","value":[1]}'),
    );
    const rvps = createRvps(kv, { now: fixedNow, cacheTtlMs: 0 });
    // Past its expiration: a policy no longer sees it, the admin API still reads the record.
    expect(await rvps.query('old')).toBeUndefined();
    expect((await rvps.get('old'))?.value).toEqual({ a: [1, 2] });
    // Expires one second after the clock: still seen, then not.
    expect(await rvps.query('current')).toEqual([1]);
    const later = createRvps(kv, { now: () => new Date('2025-03-14T15:09:28Z'), cacheTtlMs: 0 });
    expect(await later.query('current')).toBeUndefined();
    expect(await rvps.query('missing')).toBeUndefined();
    expect(await rvps.get('missing')).toBeUndefined();
  });

  it('keeps the provenance a message gives with each value; trustee readers ignore the extra member', async () => {
    const kv = new MemoryKv();
    const rvps = createRvps(kv, { now: fixedNow });
    const provenance = { image_tag: 'podvm:1.11.1', initdata_digest: 'ab'.repeat(32) };
    await rvps.register(sampleMessage({ snp_pcr08: ['00'] }, { provenance }));
    const stored = JSON.parse(Buffer.from(kv.data.get('reference_value\u0000snp_pcr08')!).toString());
    expect(Object.keys(stored)).toEqual(['version', 'name', 'expiration', 'value', 'provenance']);
    expect((await rvps.get('snp_pcr08'))?.provenance).toEqual(provenance);
    await rvps.register(sampleMessage({ plain: 1 }));
    expect((await rvps.get('plain'))?.provenance).toBeUndefined();
    for (const bad of [[], 'tag', { a: 1 }, {}, { 'a b': 'x' }, { a: 'x'.repeat(257) }]) {
      await rejects(rvps.register(sampleMessage({ x: 1 }, { provenance: bad })), 'MESSAGE_MALFORMED');
    }
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
    await rejects(rvps.register(sampleMessage({ x: 1 }, { provenance: many })), 'MESSAGE_MALFORMED');
  });

  it('overwrites on each registration and the next query sees the new value at once', async () => {
    const rvps = createRvps(new MemoryKv(), { cacheTtlMs: 60_000 });
    await rvps.register(sampleMessage({ svn: ['1'] }));
    expect(await rvps.query('svn')).toEqual(['1']);
    await rvps.register(sampleMessage({ svn: ['2', '3'] }));
    expect(await rvps.query('svn')).toEqual(['2', '3']);
  });

  it('caches lookups (and misses) for the TTL only', async () => {
    const kv = new MemoryKv();
    let t = 0;
    const rvps = createRvps(kv, { cacheTtlMs: 1000, now: () => new Date(t) });
    expect(await rvps.query('x')).toBeUndefined();
    expect(await rvps.query('x')).toBeUndefined();
    expect(kv.gets).toBe(1);
    // Another replica writes behind our back: unseen until the TTL passes.
    const other = createRvps(kv, { cacheTtlMs: 0 });
    await other.register(sampleMessage({ x: 5 }));
    expect(await rvps.query('x')).toBeUndefined();
    t = 1000;
    expect(await rvps.query('x')).toBe(5);
  });

  it('with cacheTtlMs 0 reads the store every time', async () => {
    const kv = new MemoryKv();
    const rvps = createRvps(kv, { cacheTtlMs: 0 });
    await rvps.query('x');
    await rvps.query('x');
    expect(kv.gets).toBe(2);
  });

  it('accepts a message without version (trustee defaults it), as bytes or as parsed JSON', async () => {
    const rvps = createRvps(new MemoryKv());
    const payload = Buffer.from('{"a":1}').toString('base64');
    await rvps.register(Buffer.from(JSON.stringify({ type: 'sample', payload })));
    await rvps.register({ type: 'sample', payload: Buffer.from('{"b":2}').toString('base64') });
    expect(await rvps.query('a')).toBe(1);
    expect(await rvps.query('b')).toBe(2);
  });

  it('clamps the expiration day like chrono (29 Feb + 12 months = 28 Feb)', () => {
    expect(addMonthsUtc(new Date('2024-02-29T23:59:59Z'), 12).toISOString()).toBe('2025-02-28T23:59:59.000Z');
    expect(addMonthsUtc(new Date('2024-12-31T00:00:00.999Z'), 12).toISOString()).toBe(
      '2025-12-31T00:00:00.000Z',
    );
  });

  describe('hostile messages', () => {
    const rvps = createRvps(new MemoryKv());

    it.each([
      ['not JSON', '{"version":', 'MESSAGE_MALFORMED'],
      ['a JSON array', '[]', 'MESSAGE_MALFORMED'],
      ['JSON null', 'null', 'MESSAGE_MALFORMED'],
      ['no type', JSON.stringify({ version: '0.1.0', payload: 'e30=' }), 'MESSAGE_MALFORMED'],
      ['no payload', JSON.stringify({ version: '0.1.0', type: 'sample' }), 'MESSAGE_MALFORMED'],
      [
        'numeric payload',
        JSON.stringify({ version: '0.1.0', type: 'sample', payload: 1 }),
        'MESSAGE_MALFORMED',
      ],
      [
        'numeric version',
        JSON.stringify({ version: 1, type: 'sample', payload: 'e30=' }),
        'MESSAGE_MALFORMED',
      ],
      [
        'version 0.2.0',
        JSON.stringify({ version: '0.2.0', type: 'sample', payload: 'e30=' }),
        'VERSION_MISMATCH',
      ],
      [
        'version 0.1',
        JSON.stringify({ version: '0.1', type: 'sample', payload: 'e30=' }),
        'VERSION_MISMATCH',
      ],
      ['swid type', JSON.stringify({ version: '0.1.0', type: 'swid', payload: 'e30=' }), 'UNSUPPORTED_TYPE'],
      [
        'corim type',
        JSON.stringify({ version: '0.1.0', type: 'corim', payload: 'e30=' }),
        'UNSUPPORTED_TYPE',
      ],
      [
        'unknown type',
        JSON.stringify({ version: '0.1.0', type: 'Sample', payload: 'e30=' }),
        'UNSUPPORTED_TYPE',
      ],
    ] as const)('rejects %s', async (_name, msg, code) => {
      await rejects(rvps.register(msg), code);
    });

    it.each([
      ['base64url payload', '-_8A'],
      ['unpadded base64', 'e30'],
      ['base64 with garbage', 'e30=!'],
      ['payload not JSON', Buffer.from('{"a":').toString('base64')],
      ['payload not UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]).toString('base64')],
      ['payload an array', Buffer.from('[1,2]').toString('base64')],
      ['payload a string', Buffer.from('"svn"').toString('base64')],
      ['a name with a slash', Buffer.from('{"../etc/passwd":1}').toString('base64')],
      ['a dot-dot name', Buffer.from('{"..":1}').toString('base64')],
      ['an empty name', Buffer.from('{"":1}').toString('base64')],
      ['a name with a NUL', Buffer.from('{"a\\u0000b":1}').toString('base64')],
      ['an oversize name', Buffer.from(JSON.stringify({ ['n'.repeat(257)]: 1 })).toString('base64')],
    ])('rejects a sample %s', async (_name, payload) => {
      await rejects(
        rvps.register(JSON.stringify({ version: '0.1.0', type: 'sample', payload })),
        'PAYLOAD_MALFORMED',
      );
    });

    it('rejects a non-UTF-8 message body', async () => {
      await rejects(rvps.register(new Uint8Array([0xff, 0xfe, 0x7b, 0x7d])), 'MESSAGE_MALFORMED');
    });

    it('rejects an oversize message before parsing it', async () => {
      await rejects(rvps.register(' '.repeat(MAX_RVPS_MESSAGE_LENGTH + 1)), 'MESSAGE_TOO_LARGE');
    });

    it('rejects too many values in one message', async () => {
      const values = Object.fromEntries(
        Array.from({ length: MAX_REFERENCE_VALUES_PER_MESSAGE + 1 }, (_, i) => [`v${i}`, i]),
      );
      await rejects(rvps.register(sampleMessage(values)), 'MESSAGE_TOO_LARGE');
    });

    it('rejects a value nested deeper than the limit, storing nothing of that message', async () => {
      const kv = new MemoryKv();
      const r = createRvps(kv);
      const deep = `${'['.repeat(MAX_REFERENCE_VALUE_DEPTH + 1)}${']'.repeat(MAX_REFERENCE_VALUE_DEPTH + 1)}`;
      const payload = Buffer.from(`{"ok":1,"deep":${deep}}`).toString('base64');
      await rejects(
        r.register(JSON.stringify({ version: '0.1.0', type: 'sample', payload })),
        'MESSAGE_TOO_LARGE',
      );
      expect(kv.data.size).toBe(0);
      const atLimit = `${'['.repeat(MAX_REFERENCE_VALUE_DEPTH)}${']'.repeat(MAX_REFERENCE_VALUE_DEPTH)}`;
      await r.register(
        JSON.stringify({ type: 'sample', payload: Buffer.from(`{"ok":${atLimit}}`).toString('base64') }),
      );
      expect(kv.data.size).toBe(1);
    });

    it('handles a __proto__ name as plain data', async () => {
      const r = createRvps(new MemoryKv());
      await r.register(
        JSON.stringify({ type: 'sample', payload: Buffer.from('{"__proto__":[1]}').toString('base64') }),
      );
      expect(await r.query('__proto__')).toEqual([1]);
    });

    it('keeps error messages bounded for long hostile strings', async () => {
      const e = await rejects(
        rvps.register(JSON.stringify({ version: 'v'.repeat(10_000), type: 'sample', payload: '' })),
        'VERSION_MISMATCH',
      );
      expect(e.message.length).toBeLessThan(200);
    });
  });

  describe('corrupt stored records', () => {
    it.each([
      ['not JSON', '{'],
      ['not an object', '[1]'],
      ['no value', '{"version":"0.1.0","name":"x","expiration":"2026-01-01T00:00:00Z"}'],
      ['a malformed expiration', '{"version":"0.1.0","name":"x","expiration":"2026-01-01","value":1}'],
      [
        'a name that is not a string',
        '{"version":"0.1.0","name":5,"expiration":"2026-01-01T00:00:00Z","value":1}',
      ],
      ['no expiration', '{"value":1}'],
      ['hash-value that is not a list', '{"expired":"2026-01-01T00:00:00Z","hash-value":"1"}'],
      [
        'hash-value entries without a value',
        '{"expired":"2026-01-01T00:00:00Z","hash-value":[{"alg":"sha256"}]}',
      ],
    ])('reports %s as RECORD_CORRUPT', async (_name, raw) => {
      const kv = new MemoryKv();
      kv.data.set('reference_value\u0000x', Buffer.from(raw));
      await rejects(createRvps(kv).query('x'), 'RECORD_CORRUPT');
      await rejects(createRvps(kv).get('x'), 'RECORD_CORRUPT');
    });

    it.each([
      ["the operator's form, named by its key", '{"expiration":"2026-01-01T00:00:00Z","value":1}', 1],
      ['expired for expiration', '{"name":"x","expired":"2026-01-01T00:00:00.123Z","value":[2]}', [2]],
      [
        'the older list entry, whose value is its digests',
        '{"name":"x","expired":"2026-01-01T00:00:00Z","hash-value":[{"alg":"sha256","value":"ab"},{"alg":"sha384","value":"cd"}]}',
        ['ab', 'cd'],
      ],
    ])('reads %s', async (_what, raw, value) => {
      const kv = new MemoryKv();
      kv.data.set('reference_value\u0000x', Buffer.from(raw));
      // Before the 2026-01-01 expiration they carry; after it the policy sees nothing.
      expect(await createRvps(kv, { now: fixedNow }).query('x')).toEqual(value);
      expect((await createRvps(kv).get('x'))?.name).toBe('x');
      const after = () => new Date('2026-01-02T00:00:00Z');
      expect(await createRvps(kv, { now: after }).query('x')).toBeUndefined();
    });
  });
});
