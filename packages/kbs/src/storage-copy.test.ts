import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DEFAULT_POSTGRES_CONFIG,
  LocalFsStorage,
  LocalJsonStorage,
  PostgresStorage,
  RedisStorage,
} from '@broker/kv-storage';
import { type PostgresServer, startPostgresServer, startRedisServer } from '@broker/kv-storage/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { kbsStorageMain, type NamespaceReport } from './storage-copy.js';

const MIN = `[http_server]
insecure_http = true
[admin]
authorization_mode = "DenyAll"
`;
const TABLES = [
  'kbs',
  'repository',
  'kbs_protocol_session',
  'attestation_service_policy',
  'reference_value',
  'provisioner',
];

let db: PostgresServer;
let dir: string;

beforeAll(async () => {
  db = await startPostgresServer();
}, 60_000);
afterAll(async () => {
  await db?.dispose();
});
beforeEach(async () => {
  await db.psql(TABLES.map((t) => `DROP TABLE IF EXISTS ${t};`).join('\n'));
  dir = mkdtempSync(join(tmpdir(), 'kbs-storage-copy-'));
  return () => rmSync(dir, { recursive: true, force: true });
});

function configFile(name: string, storage: string): string {
  const path = join(dir, name);
  writeFileSync(path, `${MIN}${storage}`);
  return path;
}

const localFs = (sub = 'fs') =>
  configFile(
    `${sub}.toml`,
    `[storage_backend]\nstorage_type = "LocalFs"\n[storage_backend.backends.local_fs]\ndir_path = "${join(dir, sub)}"\n`,
  );
const localJson = () =>
  configFile(
    'json.toml',
    `[storage_backend]\nstorage_type = "LocalJson"\n[storage_backend.backends.local_json]\nfile_dir_path = "${join(dir, 'json')}"\n`,
  );
const postgres = () =>
  configFile(
    'pg.toml',
    `[storage_backend]\nstorage_type = "Postgres"\n[storage_backend.backends.postgres]\nhost = "127.0.0.1"\nport = ${db.port}\npassword = "${db.password}"\n`,
  );

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await kbsStorageMain(argv, {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
    env: {},
  });
  return { code, out, err };
}

async function report(...argv: string[]): Promise<Record<string, NamespaceReport>> {
  const r = await run(...argv, '--json');
  expect(r.code, r.err + r.out).toBe(0);
  const parsed = JSON.parse(r.out) as { namespaces: NamespaceReport[] };
  return Object.fromEntries(parsed.namespaces.map((n) => [n.namespace, n]));
}

const BINARY = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(4096)]);

async function seedLocalFs(sub = 'fs'): Promise<void> {
  const s = await LocalFsStorage.open({ dirPath: join(dir, sub), fsync: false });
  await s.set('kbs', 'resource-policy.rego', Buffer.from('package policy\ndefault allow := true\n'));
  await s.set('repository', 'default/key/bin', BINARY);
  await s.set('repository', 'default/key/text', Buffer.from('hello'));
  await s.set('repository', 'other/cert/empty', new Uint8Array(0));
  await s.set('attestation_service_policy', 'default_cpu.rego', Buffer.from('package policy\n'));
  await s.set('reference_value', 'svn', Buffer.from('{"name":"svn","value":["1"]}'));
  await s.set('provisioner', 'default/0f8fad5b-d9cb-469f-a165-70867728950e/root', randomBytes(32));
  await s.close();
}

describe('kbs-storage copy', () => {
  it('reports without writing, then copies LocalFs to PostgreSQL byte for byte, then finds everything identical', async () => {
    await seedLocalFs();
    const from = localFs();
    const to = postgres();
    const dry = await run('copy', '--from', from, '--to', to);
    expect(dry.code, dry.err).toBe(0);
    expect(dry.out).toContain('dry run (nothing written; --apply copies)');
    expect(dry.out).toContain('repository: LocalFs');
    expect(dry.out).toContain('3 keys: 3 to create, 0 identical');
    // The dry run created nothing, not even a table.
    expect(await db.psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")).toBe('0\n');

    const applied = await report('copy', '--from', from, '--to', to, '--apply');
    expect(applied.repository).toMatchObject({ keys: 3, create: 3, written: 3, failed: [] });
    expect(applied.kbs).toMatchObject({ keys: 1, written: 1 });
    expect(applied.attestation_service_policy).toMatchObject({ keys: 1, written: 1 });
    expect(applied.reference_value).toMatchObject({ keys: 1, written: 1 });
    expect(applied.provisioner).toMatchObject({ keys: 1, written: 1 });
    expect(await db.psql("SELECT md5(value) FROM repository WHERE key = 'default/key/bin'")).toBe(
      `${createHash('md5').update(BINARY).digest('hex')}\n`,
    );
    expect(await db.psql("SELECT length(value) FROM repository WHERE key = 'other/cert/empty'")).toBe('0\n');
    expect(await db.psql('SELECT key FROM reference_value')).toBe('svn\n');

    const again = await report('copy', '--from', from, '--to', to);
    for (const ns of ['kbs', 'repository', 'attestation_service_policy', 'reference_value', 'provisioner']) {
      expect(again[ns]?.identical).toBe(again[ns]?.keys);
      expect(again[ns]?.create).toBe(0);
    }
  });

  it('keeps differing values unless --overwrite, and never touches keys only in the destination', async () => {
    await seedLocalFs();
    const from = localFs();
    const to = postgres();
    await report('copy', '--from', from, '--to', to, '--apply');
    await db.psql(`UPDATE repository SET value = 'changed'::bytea WHERE key = 'default/key/text';
      INSERT INTO repository (key, value) VALUES ('default/key/extra', 'x'::bytea);`);
    const kept = await report('copy', '--from', from, '--to', to, '--apply', '--namespace', 'repository');
    expect(Object.keys(kept)).toEqual(['repository']);
    expect(kept.repository).toMatchObject({ differ: 1, identical: 2, onlyInDestination: 1, written: 0 });
    expect(
      await db.psql("SELECT convert_from(value, 'UTF8') FROM repository WHERE key = 'default/key/text'"),
    ).toBe('changed\n');
    const replaced = await report('copy', '--from', from, '--to', to, '--apply', '--overwrite');
    expect(replaced.repository).toMatchObject({ differ: 1, written: 1, onlyInDestination: 1 });
    expect(
      await db.psql("SELECT convert_from(value, 'UTF8') FROM repository WHERE key = 'default/key/text'"),
    ).toBe('hello\n');
    expect(await db.psql("SELECT count(*) FROM repository WHERE key = 'default/key/extra'")).toBe('1\n');
  });

  it('copies PostgreSQL back to LocalJson and LocalFs with the same bytes', async () => {
    await seedLocalFs();
    await report('copy', '--from', localFs(), '--to', postgres(), '--apply');
    await report('copy', '--from', postgres(), '--to', localJson(), '--apply');
    await report('copy', '--from', postgres(), '--to', localFs('fs2'), '--apply');
    const json = await LocalJsonStorage.open({ dirPath: join(dir, 'json') });
    const fs2 = await LocalFsStorage.open({ dirPath: join(dir, 'fs2') });
    for (const s of [json, fs2]) {
      expect(Buffer.from((await s.get('repository', 'default/key/bin')) as Uint8Array).equals(BINARY)).toBe(
        true,
      );
      expect((await s.get('repository', 'other/cert/empty'))?.byteLength).toBe(0);
      expect((await s.list('repository')).sort()).toEqual([
        'default/key/bin',
        'default/key/text',
        'other/cert/empty',
      ]);
      await s.close();
    }
  });

  it('copies PostgreSQL to Redis and back, with the same bytes', async () => {
    const redis = await startRedisServer({ persistence: 'off' });
    try {
      await seedLocalFs();
      await report('copy', '--from', localFs(), '--to', postgres(), '--apply');
      const toRedis = configFile(
        'redis.toml',
        `[storage_backend]\nstorage_type = "Redis"\n[storage_backend.backends.redis]\nurl = "${redis.url}"\n`,
      );
      const there = await report('copy', '--from', postgres(), '--to', toRedis, '--apply');
      expect(there.repository).toMatchObject({ keys: 3, written: 3 });
      const r = await RedisStorage.open({ url: redis.url });
      expect(Buffer.from((await r.get('repository', 'default/key/bin')) as Uint8Array).equals(BINARY)).toBe(
        true,
      );
      await r.close();
      await db.psql('DROP TABLE repository;');
      const back = await report('copy', '--from', toRedis, '--to', postgres(), '--apply');
      expect(back.repository).toMatchObject({ keys: 3, create: 3, written: 3 });
      expect(back.kbs).toMatchObject({ keys: 1, identical: 1, written: 0 });
      expect(await db.psql("SELECT md5(value) FROM repository WHERE key = 'default/key/bin'")).toBe(
        `${createHash('md5').update(BINARY).digest('hex')}\n`,
      );
    } finally {
      await redis.dispose();
    }
  });

  it('lists the keys a destination refuses and exits 1, copying the rest', async () => {
    const pg = await PostgresStorage.open({
      target: {
        kind: 'config',
        config: { ...DEFAULT_POSTGRES_CONFIG, host: '127.0.0.1', port: db.port, password: db.password },
      },
    });
    await pg.set('repository', "default/key/it's", Buffer.from('quote'));
    await pg.set('repository', 'default/key/fine', Buffer.from('fine'));
    await pg.close();
    const r = await run(
      'copy',
      '--from',
      postgres(),
      '--to',
      localFs(),
      '--apply',
      '--namespace',
      'repository',
    );
    expect(r.code).toBe(1);
    expect(r.out).toContain('1 written and read back equal');
    expect(r.out).toMatch(/failed: "default\/key\/it's": invalid storage key/);
  });

  it.each([
    ['the same store on both sides', () => ['copy', '--from', localFs(), '--to', localFs()], /same store/],
    [
      'a Memory store',
      () => ['copy', '--from', configFile('mem.toml', ''), '--to', localFs()],
      /Memory store, which lives only inside a running KBS/,
    ],
    [
      'an unknown namespace',
      () => ['copy', '--from', localFs(), '--to', postgres(), '--namespace', 'x'],
      /expected one of/,
    ],
    ['no --to', () => ['copy', '--from', localFs()], /missing option '--to'/],
    ['no subcommand', () => [], /missing command/],
  ])('refuses %s with a usage error', async (_what, argv, message) => {
    const r = await run(...argv());
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
  });
});
