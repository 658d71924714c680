// Two rvps processes' worth of servers on one PostgreSQL database (trustee's rvps.json with
// `storage_type = "Postgres"`): a value registered through one is answered by the other at its next
// query, a replaced value too (no cache in front of a shared store), and the rows are trustee's.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type PostgresServer, startPostgresServer } from '@broker/kv-storage/testing';
import { RvpsClient } from '@broker/rvps-core';
import { sampleMessage } from '@broker/rvps-core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rvpsMain } from './cli.js';

let db: PostgresServer;
const dir = mkdtempSync(join(tmpdir(), 'rvps-postgres-'));
const savedLog = process.env.RUST_LOG;

beforeAll(async () => {
  db = await startPostgresServer();
  process.env.RUST_LOG = 'off';
}, 60_000);
afterAll(async () => {
  await db?.dispose();
  rmSync(dir, { recursive: true, force: true });
  if (savedLog === undefined) delete process.env.RUST_LOG;
  else process.env.RUST_LOG = savedLog;
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

function capture() {
  const err: string[] = [];
  return { io: { out: () => undefined, err: (t: string) => void err.push(t) }, err };
}

describe('rvps on PostgreSQL', () => {
  it('shares reference values between two servers on one database, with no stale answer', async () => {
    const config = join(dir, 'rvps.json');
    writeFileSync(
      config,
      JSON.stringify({
        storage: {
          storage_type: 'Postgres',
          backends: {
            postgres: { host: '127.0.0.1', port: db.port, username: 'postgres', password: db.password },
          },
        },
      }),
    );
    const [a, b] = [`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`];
    const io = capture();
    const code = await rvpsMain(['-c', config, '-a', a], io.io, async () => {
      const inner = await rvpsMain(['-c', config, '-a', b], io.io, async () => {
        const ca = new RvpsClient(`http://${a}`);
        const cb = new RvpsClient(`http://${b}`);
        try {
          await ca.register(sampleMessage({ svn: ['1'] }));
          expect(await cb.query('svn')).toBe('["1"]');
          await cb.register(sampleMessage({ svn: ['2'] }));
          expect(await ca.query('svn')).toBe('["2"]');
          expect(await cb.query('svn')).toBe('["2"]');
        } finally {
          ca.close();
          cb.close();
        }
      });
      expect(inner).toBe(0);
    });
    expect(code, io.err.join('')).toBe(0);
    expect(await db.psql("SELECT key FROM reference_value WHERE key = 'svn'")).toBe('svn\n');
    expect(await db.psql("SELECT convert_from(value, 'UTF8') LIKE '%\"2\"%' FROM reference_value")).toBe(
      't\n',
    );
  });

  it('fails to start, naming the database, when it cannot be reached', async () => {
    const config = join(dir, 'down.json');
    const port = await freePort();
    writeFileSync(
      config,
      JSON.stringify({
        storage: { storage_type: 'postgres', backends: { postgres: { host: '127.0.0.1', port } } },
      }),
    );
    const io = capture();
    const started = Date.now();
    const code = await rvpsMain(['-c', config, '-a', `127.0.0.1:${await freePort()}`], io.io, async () => {});
    console.log(`rvps with an unreachable database gave up after ${Date.now() - started} ms`);
    expect(code).toBe(1);
    expect(io.err.join('')).toContain(
      `PostgreSQL at postgresql://postgres@127.0.0.1:${port}/postgres is unreachable`,
    );
  }, 30_000);
});
