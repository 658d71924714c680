import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRvps, MemoryStorage } from '@broker/kbs';
import { RvpsClient, startRvpsServer } from '@broker/rvps';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attestationServiceMain } from './cli.js';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t) }, out, err };
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

describe('attestation-service command', () => {
  const dir = mkdtempSync(join(tmpdir(), 'as-cli-'));
  const saved = process.env.RUST_LOG;
  beforeAll(() => {
    process.env.RUST_LOG = 'off';
  });
  afterAll(() => {
    if (saved === undefined) delete process.env.RUST_LOG;
    else process.env.RUST_LOG = saved;
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves gRPC and REST from trustee's docker-compose config shape (remote RVPS, LocalFs)", async () => {
    const rvps = await startRvpsServer({ rvps: createRvps(new MemoryStorage()), address: '127.0.0.1:0' });
    const config = join(dir, 'as-config.json');
    writeFileSync(
      config,
      JSON.stringify({
        storage_backend: {
          storage_type: 'LocalFs',
          backends: { local_fs: { dir_path: join(dir, 'storage') } },
        },
        rvps_config: { type: 'GrpcRemote', address: `http://127.0.0.1:${rvps.port}` },
        attestation_token_broker: { duration_min: 5 },
        verifier_config: { nvidia_verifier: { type: 'Remote' } },
      }),
    );
    const [grpcPort, restPort] = [await freePort(), await freePort()];
    const seen: unknown[] = [];
    const code = await attestationServiceMain(
      ['-c', config, '-s', `127.0.0.1:${grpcPort}`, '--rest', `127.0.0.1:${restPort}`],
      capture().io,
      async () => {
        seen.push((await fetch(`http://127.0.0.1:${restPort}/healthz`)).status);
        // The RVPS service on the gRPC port proxies to the remote RVPS.
        const client = new RvpsClient(`http://127.0.0.1:${grpcPort}`);
        seen.push(await client.query('__healthcheck__'));
        client.close();
      },
    );
    await rvps.close();
    expect(code).toBe(0);
    expect(seen).toEqual([200, undefined]);
  });

  it('refuses TLS options it does not implement (2) and an invalid config (1)', async () => {
    expect(await attestationServiceMain(['-t', 'cert.pem'], capture().io)).toBe(2);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"storage_backend": {"storage_type": "LocalFs"}}');
    const c = capture();
    expect(await attestationServiceMain(['-c', bad], c.io)).toBe(1);
    expect(c.err.join('')).toMatch(/Local FS configuration is required/);
  });
});
