import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { StorageUnavailable } from './errors.js';
import { InvalidStorageKey } from './keys.js';
import {
  DEFAULT_POSTGRES_CONFIG,
  describePostgresTarget,
  type PostgresEvent,
  PostgresStorage,
  PostgresStorageError,
  type PostgresStorageOptions,
  postgresTarget,
  redactPostgresUrl,
  tableName,
} from './postgres.js';
import { type PostgresServer, startPostgresServer } from './testing/postgres-server.js';
import { freeLoopbackPort } from './testing/redis-server.js';
import type { Namespace } from './types.js';

const enc = (s: string) => Buffer.from(s, 'utf8');
const dec = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString('utf8'));
const NAMESPACES: Namespace[] = [
  'kbs',
  'repository',
  'kbs_protocol_session',
  'attestation_service_policy',
  'reference_value',
  'provisioner',
];
/** trustee's set-up.sql, unchanged: it creates the table `key_value` of trustee's own backend test. */
const TRUSTEE_SETUP_SQL = readFileSync(vector('trustee/key-value-storage/postgres/set-up.sql'), 'utf8');

let server: PostgresServer;

beforeAll(async () => {
  server = await startPostgresServer();
}, 60_000);

afterAll(async () => {
  await server?.dispose();
});

beforeEach(async () => {
  await server.psql(`${[...NAMESPACES, 'key_value'].map((t) => `DROP TABLE IF EXISTS ${t};`).join('\n')}`);
});

const target = () =>
  ({
    kind: 'config',
    config: {
      ...DEFAULT_POSTGRES_CONFIG,
      host: '127.0.0.1',
      port: server.port,
      password: server.password,
    },
  }) as const;
const open = (options: Partial<PostgresStorageOptions> = {}) =>
  PostgresStorage.open({ target: target(), ...options });

/** Polls (no timing threshold) until `f` stops failing with StorageUnavailable. */
async function untilAvailable<T>(f: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await f();
    } catch (e) {
      expect(e).toBeInstanceOf(StorageUnavailable);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

describe('PostgresStorage', () => {
  it("keeps each namespace in a table of that name with trustee's columns (key TEXT PRIMARY KEY, value BYTEA)", async () => {
    const s = await open();
    expect(await s.set('repository', 'default/key/one', Buffer.from([0, 1, 0xff]))).toBe(true);
    expect(await server.psql("SELECT key || '=' || encode(value, 'hex') FROM repository")).toBe(
      'default/key/one=0001ff\n',
    );
    const columns = await server.psql(
      "SELECT column_name || ':' || data_type FROM information_schema.columns WHERE table_name = 'repository' ORDER BY column_name",
    );
    expect(columns).toBe('key:text\nvalue:bytea\n');
    const pk = await server.psql(
      "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'repository'::regclass AND i.indisprimary",
    );
    expect(pk).toBe('key\n');
    await s.close();
  });

  it('sets, gets, lists and deletes per namespace', async () => {
    const s = await open();
    await s.set('repository', 'default/key/one', enc('1'));
    await s.set('repository', 'default/key/two', enc('2'));
    await s.set('kbs', 'resource-policy.rego', enc('p'));
    expect(dec(await s.get('repository', 'default/key/one'))).toBe('1');
    expect(await s.get('kbs', 'default/key/one')).toBeUndefined();
    expect(await s.list('repository')).toEqual(['default/key/one', 'default/key/two']);
    expect(await s.list('reference_value')).toEqual([]);
    await s.set('repository', 'default/key/one', enc('1b'));
    expect(dec(await s.get('repository', 'default/key/one'))).toBe('1b');
    expect(await s.delete('repository', 'default/key/one')).toBe(true);
    expect(await s.delete('repository', 'default/key/one')).toBe(false);
    expect(await s.get('repository', 'default/key/one')).toBeUndefined();
    expect(s.isShared()).toBe(true);
    await s.close();
  });

  it('round-trips every byte value and the empty value, and does not share memory with callers', async () => {
    const s = await open();
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await s.set('repository', 'r/t/all', all);
    await s.set('repository', 'r/t/empty', new Uint8Array(0));
    const v = Buffer.from([0, 255, 13, 10, 0x80, 0xc3, 0x28]);
    const written = s.set('repository', 'r/t/bin', v);
    v[0] = 7;
    await written;
    expect(Buffer.from((await s.get('repository', 'r/t/all')) as Uint8Array)).toEqual(all);
    expect((await s.get('repository', 'r/t/empty'))?.byteLength).toBe(0);
    expect(Buffer.from((await s.get('repository', 'r/t/bin')) as Uint8Array)).toEqual(
      Buffer.from([0, 255, 13, 10, 0x80, 0xc3, 0x28]),
    );
    expect(await server.psql("SELECT md5(value) FROM repository WHERE key = 'r/t/all'")).toBe(
      `${(await import('node:crypto')).createHash('md5').update(all).digest('hex')}\n`,
    );
    await s.close();
  });

  it('keeps the existing value when overwrite is false, and exactly one of racing writers wins', async () => {
    const s = await open();
    expect(await s.set('kbs', 'a.rego', enc('first'), { overwrite: false })).toBe(true);
    expect(await s.set('kbs', 'a.rego', enc('second'), { overwrite: false })).toBe(false);
    expect(dec(await s.get('kbs', 'a.rego'))).toBe('first');
    // Two stores (two replicas' pools) racing on one key.
    const other = await open();
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 === 0 ? s : other).set('kbs', 'race.rego', enc(`w${i}`), { overwrite: false }),
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(dec(await s.get('kbs', 'race.rego'))).toBe(`w${results.indexOf(true)}`);
    await other.close();
    await s.close();
  });

  it('stores a record with a lifetime as is: trustee has no expiry column, the owner sweeps it', async () => {
    const s = await open();
    expect(s.expiresKeys()).toBe(false);
    expect(await s.set('kbs_protocol_session', 'abc', enc('x'), { ttlMs: 60_000 })).toBe(true);
    expect(dec(await s.get('kbs_protocol_session', 'abc'))).toBe('x');
    await expect(s.set('kbs', 'k', enc('x'), { ttlMs: 0 })).rejects.toThrow(RangeError);
    await s.close();
  });

  it.each([
    ["'; DROP TABLE repository; --"],
    ['a"b'],
    ["o'brien"],
    ['back\\slash'],
    ['$1'],
    ['100%_like'],
    ['ключ/键/🔑'],
    [' leading and trailing '],
  ])('stores the hostile key %j as data, never as SQL', async (key) => {
    const s = await open();
    await s.set('repository', 'r/t/other', enc('other'));
    expect(await s.set('repository', key, enc('v'))).toBe(true);
    expect(dec(await s.get('repository', key))).toBe('v');
    expect((await s.list('repository')).sort()).toEqual([key, 'r/t/other'].sort());
    // The table is still there with both rows, and the key is stored exactly.
    expect(await server.psql('SELECT count(*) FROM repository')).toBe('2\n');
    expect(
      await server.psql(
        `SELECT encode(convert_to(key, 'UTF8'), 'hex') FROM repository WHERE key <> 'r/t/other'`,
      ),
    ).toBe(`${Buffer.from(key, 'utf8').toString('hex')}\n`);
    // A pattern-like key matches only itself.
    expect(await s.get('repository', '%')).toBeUndefined();
    expect(await s.delete('repository', key)).toBe(true);
    expect(await s.list('repository')).toEqual(['r/t/other']);
    await s.close();
  });

  it.each([
    ['', /empty/],
    ['x\u0000y', /NUL characters cannot be stored/],
    ['a\nb', /control characters/],
    ['\u007f', /control characters/],
    ['lone\ud800', /lone surrogate/],
    ['k'.repeat(2000), /longer than/],
  ])('refuses the key %j clearly, before reaching the database', async (key, why) => {
    const s = await open();
    for (const op of [
      () => s.set('repository', key, enc('x')),
      () => s.set('repository', key, enc('x'), { overwrite: false }),
      () => s.get('repository', key),
      () => s.delete('repository', key),
    ]) {
      const err = await op().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidStorageKey);
      expect((err as Error).message).toMatch(why);
    }
    // Nothing was sent: the table was never even created.
    expect(await server.psql("SELECT to_regclass('repository') IS NULL")).toBe('t\n');
    await s.close();
  });

  it('refuses a table name that is not a plain identifier', async () => {
    for (const ns of ['repository"; DROP TABLE kbs; --', 'Repository', '', '1abc', 'a'.repeat(64), 'a b']) {
      const err = (() => {
        try {
          tableName(ns);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(PostgresStorageError);
      expect((err as PostgresStorageError).code).toBe('INVALID_TABLE');
    }
    expect(tableName('reference_value')).toBe('"reference_value"');
    const s = await open();
    await expect(s.list('kbs"; DROP TABLE kbs; --' as Namespace)).rejects.toMatchObject({
      code: 'INVALID_TABLE',
    });
    await s.close();
  });

  it("reads and writes tables created by trustee's set-up.sql, with rows that psql wrote and reads", async () => {
    // trustee's script as published (table key_value, the one its own backend test uses), and the same
    // statement for a KBS namespace, as an operator of trustee's KBS has to run it.
    await server.psql(TRUSTEE_SETUP_SQL);
    await server.psql(TRUSTEE_SETUP_SQL.replace('key_value', 'repository'));
    await server.psql(`
      INSERT INTO key_value (key, value) VALUES ('test', 'test'::bytea);
      INSERT INTO repository (key, value) VALUES ('default/key/bin', decode('00ff0a0d27', 'hex'));
      INSERT INTO repository (key, value) VALUES ('default/key/text', convert_to('written by psql', 'UTF8'));
    `);
    const s = await open({ createTables: false });
    const kv = 'key_value' as Namespace;
    expect(await s.list(kv)).toEqual(['test']);
    expect(dec(await s.get(kv, 'test'))).toBe('test');
    expect(await s.set(kv, 'test', enc('test2'), { overwrite: false })).toBe(false);
    expect(Buffer.from((await s.get('repository', 'default/key/bin')) as Uint8Array).toString('hex')).toBe(
      '00ff0a0d27',
    );
    expect(dec(await s.get('repository', 'default/key/text'))).toBe('written by psql');
    await s.set('repository', 'default/key/ours', Buffer.from([0xde, 0xad, 0, 0xbe, 0xef]));
    await s.set('repository', 'default/key/text', enc('overwritten here'));
    expect(
      await server.psql(
        "SELECT key || '=' || encode(value, 'hex') FROM repository WHERE key LIKE 'default/key/%' ORDER BY key",
      ),
    ).toBe(
      [
        'default/key/bin=00ff0a0d27',
        'default/key/ours=dead00beef',
        `default/key/text=${enc('overwritten here').toString('hex')}`,
        '',
      ].join('\n'),
    );
    expect(await s.delete(kv, 'test')).toBe(true);
    expect(await server.psql('SELECT count(*) FROM key_value')).toBe('0\n');
    await s.close();
  });

  it('keeps working when an operator drops and recreates a table under its prepared statements', async () => {
    const s = await open({ createTables: false });
    await server.psql(TRUSTEE_SETUP_SQL.replace('key_value', 'repository'));
    await s.set('repository', 'a', enc('1'));
    expect(dec(await s.get('repository', 'a'))).toBe('1');
    await server.psql(
      `DROP TABLE repository;\n${TRUSTEE_SETUP_SQL.replace('key_value', 'repository')}\nINSERT INTO repository VALUES ('b'::bytea, 'a');`,
    );
    expect(dec(await s.get('repository', 'a'))).toBe('b');
    expect(await s.list('repository')).toEqual(['a']);
    await s.close();
  });

  it('names the table and the statement to run when it is missing and may not be created', async () => {
    const s = await open({ createTables: false });
    const err = await s.get('reference_value', 'x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PostgresStorageError);
    expect((err as PostgresStorageError).code).toBe('MISSING_TABLE');
    expect((err as Error).message).toContain(
      'run CREATE TABLE IF NOT EXISTS "reference_value" (value BYTEA, key TEXT PRIMARY KEY)',
    );
    await s.close();
  });

  it('creates a missing table once, even when replicas race to create it', async () => {
    const stores = await Promise.all([open(), open(), open()]);
    const wrote = await Promise.all(
      stores.flatMap((st, i) =>
        NAMESPACES.map((ns) => st.set(ns, `k${i}`, enc(`v${i}`), { overwrite: false })),
      ),
    );
    expect(wrote.every(Boolean)).toBe(true);
    for (const ns of NAMESPACES) expect(await stores[0]?.list(ns)).toEqual(['k0', 'k1', 'k2']);
    await Promise.all(stores.map((st) => st.close()));
  });

  it('reports a NULL value (allowed by the schema) as a malformed value', async () => {
    await server.psql(`${TRUSTEE_SETUP_SQL.replace('key_value', 'kbs')}
      INSERT INTO kbs (key) VALUES ('resource-policy.rego');`);
    const s = await open();
    await expect(s.get('kbs', 'resource-policy.rego')).rejects.toMatchObject({ code: 'MALFORMED_VALUE' });
    await s.close();
  });

  it('reads hostile rows that other writers left without failing the rest of the table', async () => {
    await server.psql(`${TRUSTEE_SETUP_SQL.replace('key_value', 'repository')}
      INSERT INTO repository (key, value) VALUES (E'bad\\nkey', 'x'::bytea);
      INSERT INTO repository (key, value) VALUES (repeat('k', 5000), 'x'::bytea);
      INSERT INTO repository (key, value) VALUES ('big', decode(repeat('ab', 2 * 1024 * 1024), 'hex'));
      INSERT INTO repository (key, value) VALUES ('fine', 'ok'::bytea);`);
    const s = await open();
    const keys = await s.list('repository');
    expect(keys).toHaveLength(4);
    expect(keys).toContain('bad\nkey');
    // Keys this store would not write are not read either, with the usual error.
    await expect(s.get('repository', 'bad\nkey')).rejects.toBeInstanceOf(InvalidStorageKey);
    await expect(s.get('repository', 'k'.repeat(5000))).rejects.toBeInstanceOf(InvalidStorageKey);
    expect((await s.get('repository', 'big'))?.byteLength).toBe(2 * 1024 * 1024);
    expect(dec(await s.get('repository', 'fine'))).toBe('ok');
    await s.close();
  });

  it('reports a table whose value column is not BYTEA as malformed, not as bytes', async () => {
    await server.psql(
      "CREATE TABLE kbs (value TEXT, key TEXT PRIMARY KEY); INSERT INTO kbs VALUES ('text', 'k');",
    );
    const s = await open();
    const err = await s.get('kbs', 'k').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PostgresStorageError);
    expect((err as PostgresStorageError).code).toBe('MALFORMED_VALUE');
    expect((err as Error).message).toMatch(/not BYTEA/);
    await expect(s.list('kbs')).resolves.toEqual(['k']);
    await s.close();
  });

  it('takes POSTGRES_URL over the configured fields, as trustee does, and never shows the password', async () => {
    const config = { ...DEFAULT_POSTGRES_CONFIG, host: 'db.invalid', password: 'unused' };
    expect(postgresTarget(config, {})).toEqual({ kind: 'config', config });
    expect(postgresTarget(config, { POSTGRES_URL: '' })).toEqual({ kind: 'config', config });
    const t = postgresTarget(config, { POSTGRES_URL: server.url });
    expect(t).toEqual({ kind: 'url', url: server.url });
    expect(describePostgresTarget(t)).not.toContain(server.password);
    expect(describePostgresTarget({ kind: 'config', config })).toBe(
      'postgresql://postgres@db.invalid:5432/postgres',
    );
    expect(redactPostgresUrl('postgresql://u:pw@h:1/d?password=pw2')).toBe('postgresql://u:***@h:1/d');
    const s = await PostgresStorage.open({ target: t });
    await s.set('kbs', 'via-url', enc('1'));
    expect(await server.psql("SELECT key FROM kbs WHERE key = 'via-url'")).toBe('via-url\n');
    await s.close();
  });

  it('reaches the server over its Unix socket when POSTGRES_URL names the directory (?host=)', async () => {
    const s = await PostgresStorage.open({
      target: {
        kind: 'url',
        url: `postgresql:///postgres?host=${encodeURIComponent(server.dir)}&port=${server.port}&user=postgres`,
      },
    });
    await s.set('kbs', 'via-socket', enc('1'));
    expect(await server.psql("SELECT key FROM kbs WHERE key = 'via-socket'")).toBe('via-socket\n');
    await s.close();
  });

  it('connects with a username and password holding URL and SQL metacharacters, given as fields', async () => {
    const password = `p@ss:w/rd?#%'"\\ ;`;
    const quoted = password.replaceAll("'", "''");
    await server.psql(`DROP ROLE IF EXISTS "odd user@x";
      CREATE ROLE "odd user@x" LOGIN PASSWORD '${quoted}';
      GRANT CREATE ON SCHEMA public TO "odd user@x";`);
    const s = await PostgresStorage.open({
      target: { kind: 'config', config: { ...target().config, username: 'odd user@x', password } },
    });
    await s.set('kbs', 'odd', enc('1'));
    expect(await server.psql("SELECT tableowner FROM pg_tables WHERE tablename = 'kbs'")).toBe(
      'odd user@x\n',
    );
    await s.close();
    await server.psql(
      'DROP TABLE kbs; REVOKE CREATE ON SCHEMA public FROM "odd user@x"; DROP ROLE "odd user@x";',
    );
  });

  it('fails at once on a wrong password, naming the server but not the password', async () => {
    const err = await PostgresStorage.open({
      target: { kind: 'config', config: { ...target().config, password: 'wr0ng-secret' } },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageUnavailable);
    expect((err as Error).message).toContain(`127.0.0.1:${server.port}`);
    expect((err as Error).message).toMatch(/password authentication failed/);
    expect((err as Error).message).not.toContain('wr0ng-secret');
  });

  it.each([
    ['not a url', /is not a URL/],
    ['postgresql://u:s3cret@127.0.0.1:notaport/db', /is not a URL/],
    ['postgresql://u:s3cret@[::1/db', /is not a URL/],
    ['redis://u:s3cret@127.0.0.1:1/0', /must start with postgresql:\/\/ or postgres:\/\/, found redis:/],
    ['postgresql:///db', /has no host/],
  ])('refuses the POSTGRES_URL %j at once, without repeating it', async (url, message) => {
    const err = await PostgresStorage.open({ target: { kind: 'url', url } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PostgresStorageError);
    expect((err as PostgresStorageError).code).toBe('INVALID_URL');
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).not.toContain('s3cret');
  });

  it('gives up at start when the database cannot be reached', async () => {
    const port = await freeLoopbackPort();
    const started = Date.now();
    const err = await PostgresStorage.open({
      target: { kind: 'url', url: `postgresql://u:s3cret@127.0.0.1:${port}/db` },
      startupTimeoutMs: 300,
    }).catch((e: unknown) => e);
    console.log(`unreachable database: open gave up after ${Date.now() - started} ms`);
    expect(err).toBeInstanceOf(StorageUnavailable);
    expect((err as Error).message).toContain(`127.0.0.1:${port}`);
    expect((err as Error).message).not.toContain('s3cret');
  });

  it('fails every operation with StorageUnavailable while the database is down, and recovers when it returns', async () => {
    const events: PostgresEvent['kind'][] = [];
    const s = await open({ connectTimeoutMs: 500, onEvent: (e) => events.push(e.kind) });
    await s.set('repository', 'r/t/kept', enc('persisted'));
    await server.stop();
    try {
      const started = Date.now();
      for (const op of [
        () => s.get('repository', 'r/t/kept'),
        () => s.set('repository', 'r/t/x', enc('x')),
        () => s.set('repository', 'r/t/y', enc('y'), { overwrite: false }),
        () => s.delete('repository', 'r/t/kept'),
        () => s.list('repository'),
      ]) {
        const err = await op().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(StorageUnavailable);
        expect((err as Error).message).toContain(`127.0.0.1:${server.port}`);
        expect((err as Error).message).not.toContain(server.password);
      }
      console.log(`database down: five operations failed in ${Date.now() - started} ms`);
    } finally {
      await server.start();
    }
    const restarted = Date.now();
    const value = await untilAvailable(() => s.get('repository', 'r/t/kept'));
    console.log(`database restarted: first read served ${Date.now() - restarted} ms after it was up`);
    expect(dec(value)).toBe('persisted');
    expect(await s.get('repository', 'r/t/x')).toBeUndefined();
    expect(events).toContain('disconnected');
    expect(events).toContain('reconnected');
    await s.close();
  });

  it('serves again after a restart it did not see, retrying a read on the connection the server closed', async () => {
    const s = await open();
    await s.set('kbs', 'k', enc('v'));
    // Warm several pooled connections, then restart under them.
    await Promise.all(Array.from({ length: 5 }, () => s.get('kbs', 'k')));
    await server.stop();
    await server.start();
    expect(dec(await untilAvailable(() => s.get('kbs', 'k')))).toBe('v');
    expect(await untilAvailable(() => s.list('kbs'))).toEqual(['k']);
    await s.close();
  });

  it('gives up on a write blocked by a lock held elsewhere (statement_timeout), without calling it an outage', async () => {
    const events: PostgresEvent['kind'][] = [];
    const s = await open({ statementTimeoutMs: 300, onEvent: (e) => events.push(e.kind) });
    await s.set('kbs', 'locked', enc('before'));
    // Another session holds the row for two seconds.
    const holder = server.psql(
      "BEGIN; SELECT key FROM kbs WHERE key = 'locked' FOR UPDATE; SELECT pg_sleep(2); COMMIT;",
    );
    // Wait until the lock is held: the holder shows up as sleeping.
    while (
      (await server.psql(
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(2)%' AND pid <> pg_backend_pid()",
      )) === '0\n'
    )
      await new Promise((r) => setTimeout(r, 20));
    const started = Date.now();
    const err = await s.set('kbs', 'locked', enc('after')).catch((e: unknown) => e);
    console.log(`write blocked by a lock: failed after ${Date.now() - started} ms`);
    expect(err).toBeInstanceOf(StorageUnavailable);
    expect((err as Error).message).toMatch(/statement timeout/);
    expect(events).not.toContain('disconnected');
    await holder;
    expect(await s.set('kbs', 'locked', enc('after'))).toBe(true);
    expect(dec(await s.get('kbs', 'locked'))).toBe('after');
    await s.close();
  });

  it('times out when the database hangs, caps the queries left waiting, and carries on once it answers', async () => {
    const s = await open({ connectTimeoutMs: 300, statementTimeoutMs: 300, maxPendingQueries: 8 });
    await s.set('repository', 'r/t/k', enc('v'));
    server.freeze(true);
    const resume = setTimeout(() => server.freeze(false), 20_000);
    try {
      const started = Date.now();
      const waiting = Array.from({ length: 8 }, () => s.get('repository', 'r/t/k').catch((e: unknown) => e));
      const ninth = await s.get('repository', 'r/t/k').catch((e: unknown) => e);
      expect(ninth).toBeInstanceOf(StorageUnavailable);
      expect((ninth as Error).message).toMatch(/8 queries are already waiting/);
      for (const err of await Promise.all(waiting)) expect(err).toBeInstanceOf(StorageUnavailable);
      console.log(`hung database: 8 queries failed within ${Date.now() - started} ms`);
    } finally {
      server.freeze(false);
      clearTimeout(resume);
    }
    await untilAvailable(() => s.set('repository', 'r/t/other', enc('other')));
    expect(dec(await s.get('repository', 'r/t/k'))).toBe('v');
    expect(dec(await s.get('repository', 'r/t/other'))).toBe('other');
    await s.close();
  });
});
