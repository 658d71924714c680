import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryStorage } from '@broker/kv-storage';
import { createRvps, type RunningRvpsServer, RvpsClient, startRvpsServer } from '@broker/rvps-core';
import { makeTestPki, sampleMessage } from '@broker/rvps-core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rvpsMain, rvpsToolMain } from './cli.js';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t) }, out, err };
}

describe('rvps-tool', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rvps-tool-'));
  let server: RunningRvpsServer;
  let addr: string;
  beforeAll(async () => {
    server = await startRvpsServer({ rvps: createRvps(new MemoryStorage()), address: '127.0.0.1:0' });
    addr = `http://127.0.0.1:${server.port}`;
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers a message file and queries the value back, with trustee options', async () => {
    const file = join(dir, 'message.json');
    writeFileSync(file, sampleMessage({ 'svn.x': [7] }));
    const reg = capture();
    expect(await rvpsToolMain(['register', '--path', file, '-a', addr], reg.io)).toBe(0);
    const q = capture();
    expect(await rvpsToolMain(['query', '-r', 'svn.x', '--addr', addr], q.io)).toBe(0);
    expect(q.out.join('')).toBe('[7]\n');
    const missing = capture();
    expect(await rvpsToolMain(['query', '--reference-value-id', 'nope', '-a', addr], missing.io)).toBe(0);
    expect(missing.out).toEqual([]);
    expect(missing.err.join('')).toMatch(/No reference values found/);
  });

  it('reports a refused message as a runtime failure (1) and usage mistakes as 2', async () => {
    const file = join(dir, 'bad.json');
    writeFileSync(file, sampleMessage({ a: 1 }, '9.9.9'));
    const c = capture();
    expect(await rvpsToolMain(['register', '-p', file, '-a', addr], c.io)).toBe(1);
    expect(c.err.join('')).toMatch(/^rvps-tool: .*Register reference value/);
    expect(await rvpsToolMain(['register', '-a', addr], capture().io)).toBe(2);
    expect(await rvpsToolMain(['query', '-r', 'x', '-a', '127.0.0.1:1'], capture().io)).toBe(1);
  });
});

describe('rvps command', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rvps-cmd-'));
  const saved = process.env.RUST_LOG;
  afterAll(() => {
    if (saved === undefined) delete process.env.RUST_LOG;
    else process.env.RUST_LOG = saved;
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves from trustee's rvps.json with LocalFs storage until stopped, and keeps the values", async () => {
    process.env.RUST_LOG = 'off';
    const config = join(dir, 'rvps.json');
    writeFileSync(
      config,
      JSON.stringify({
        storage: { storage_type: 'LocalFs', backends: { local_fs: { dir_path: join(dir, 'fs') } } },
        extractors: { swid_extractor: {} },
      }),
    );
    const port = server0Port();
    const address = `127.0.0.1:${await port}`;
    const io = capture();
    expect(
      await rvpsMain(['-c', config, '-a', address], io.io, async () => {
        const client = new RvpsClient(`http://${address}`);
        await client.register(sampleMessage({ kept: 'yes' }));
        client.close();
      }),
    ).toBe(0);
    expect(
      await rvpsMain(['-c', config, '-a', address], io.io, async () => {
        const client = new RvpsClient(`http://${address}`);
        expect(await client.query('kept')).toBe('"yes"');
        client.close();
      }),
    ).toBe(0);
    expect(io.err.join('')).toBe('');
  });

  it('with --admin-public-key, rvps-tool registers only with --auth-private-key of that key', async () => {
    process.env.RUST_LOG = 'off';
    const pki = makeTestPki(dir);
    const msg = join(dir, 'auth-message.json');
    writeFileSync(msg, sampleMessage({ authed: 1 }));
    const address = `127.0.0.1:${await server0Port()}`;
    const io = capture();
    expect(
      await rvpsMain(
        ['--config', join(dir, 'none.json'), '--address', address, '--admin-public-key', pki.adminPub],
        io.io,
        async () => {
          const url = `http://${address}`;
          const open = capture();
          expect(await rvpsToolMain(['register', '-p', msg, '-a', url], open.io)).toBe(1);
          expect(open.err.join('')).toMatch(/needs authentication/);
          const wrong = capture();
          expect(
            await rvpsToolMain(
              ['register', '-p', msg, '-a', url, '--auth-private-key', pki.otherKey],
              wrong.io,
            ),
          ).toBe(1);
          expect(wrong.err.join('')).toMatch(/admin token was refused/);
          const signed = capture();
          expect(
            await rvpsToolMain(
              ['register', '-p', msg, '-a', url, '--auth-private-key', pki.adminKey],
              signed.io,
            ),
          ).toBe(0);
          const q = capture();
          expect(await rvpsToolMain(['query', '-r', 'authed', '-a', url], q.io)).toBe(0);
          expect(q.out.join('')).toBe('1\n');
        },
      ),
    ).toBe(0);
  });

  it('refuses --client-ca without TLS, and one of -t/-k without the other, as usage errors', async () => {
    const a = capture();
    expect(await rvpsMain(['--client-ca', '/nonexistent/ca.pem'], a.io, async () => {})).toBe(2);
    expect(a.err.join('')).toMatch(/--client-ca needs --https-pubkey-cert/);
    expect(await rvpsMain(['-t', '/nonexistent/cert.pem'], capture().io, async () => {})).toBe(2);
  });

  it('stops with 1 on an invalid configuration', async () => {
    process.env.RUST_LOG = 'off';
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"storage": {"storage_type": "LocalJson"}}');
    const io = capture();
    expect(await rvpsMain(['-c', bad], io.io, async () => {})).toBe(1);
    expect(io.err.join('')).toMatch(/Local JSON configuration is required/);
  });
});

function server0Port(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
