import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryStorage } from '@broker/kv-storage';
import { createRvps, RvpsClient, startRvpsServer } from '@broker/rvps-core';
import { attestation } from '@broker/trustee-protos';
import { credentials, Metadata } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attestationServiceMain, grpcAsMain, restfulAsMain } from './cli.js';

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

  it('serves both listeners over TLS with -t and -k', async () => {
    const cert = join(dir, 'as.crt');
    const key = join(dir, 'as.key');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
        '-keyout',
        key,
        '-out',
        cert,
      ],
      { stdio: 'ignore' },
    );
    const [grpcPort, restPort] = [await freePort(), await freePort()];
    const seen: unknown[] = [];
    const io = capture();
    const code = await attestationServiceMain(
      ['-s', `127.0.0.1:${grpcPort}`, '--rest', `127.0.0.1:${restPort}`, '-t', cert, '-k', key],
      io.io,
      async () => {
        const ca = readFileSync(cert);
        seen.push(
          await new Promise((resolve, reject) =>
            https
              .get(`https://127.0.0.1:${restPort}/healthz`, { ca }, (res) => resolve(res.statusCode))
              .on('error', reject),
          ),
        );
        const client = new attestation.AttestationServiceClient(
          `127.0.0.1:${grpcPort}`,
          credentials.createSsl(ca),
        );
        seen.push(
          await new Promise((resolve, reject) =>
            client.getAttestationChallenge({ inner: { tee: 'tdx', tee_params: '{}' } }, (e, r) =>
              e ? reject(e) : resolve(r),
            ),
          ),
        );
        client.close();
        // A plaintext client gets nothing from the TLS listener.
        const plain = new attestation.AttestationServiceClient(
          `127.0.0.1:${grpcPort}`,
          credentials.createInsecure(),
        );
        seen.push(
          await new Promise((resolve) =>
            plain.getAttestationChallenge(
              { inner: { tee: 'tdx', tee_params: '{}' } },
              new Metadata(),
              { deadline: Date.now() + 5000 },
              (e) => resolve(e?.code),
            ),
          ),
        );
        plain.close();
      },
    );
    expect(io.err.join('').slice(0, 600)).toBe('');
    expect(code).toBe(0);
    expect(seen[0]).toBe(200);
    expect(seen[1]).toEqual({ attestationChallenge: '' });
    expect(seen[2]).not.toBe(undefined);
  });

  it('refuses a certificate without its key (2), as trustee, and an invalid config (1)', async () => {
    const c0 = capture();
    expect(await attestationServiceMain(['-t', 'cert.pem'], c0.io)).toBe(2);
    expect(c0.err.join('')).toMatch(/HTTPS public key cert and private key must be provided/);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"storage_backend": {"storage_type": "LocalFs"}}');
    const c = capture();
    expect(await attestationServiceMain(['-c', bad], c.io)).toBe(1);
    expect(c.err.join('')).toMatch(/Local FS configuration is required/);
  });

  it("prints trustee's flags and defaults for grpc-as and restful-as, and refuses the other's flags (2)", async () => {
    const g = capture();
    expect(await grpcAsMain(['--help'], g.io)).toBe(0);
    const gh = g.out.join('');
    expect(gh).toMatch(/^Usage: grpc-as /);
    expect(gh).toMatch(/-s, --socket <ADDRESS> .*\[default: 127\.0\.0\.1:3000\]/);
    expect(gh).toMatch(/-c, --config-file <FILE>/);
    expect(gh).toMatch(/--admin-public-key <FILE>/);
    const r = capture();
    expect(await restfulAsMain(['--help'], r.io)).toBe(0);
    const rh = r.out.join('');
    expect(rh).toMatch(/^Usage: restful-as /);
    expect(rh).toMatch(/-s, --socket <ADDRESS> .*\[default: 0\.0\.0\.0:8080\]/);
    expect(rh).toMatch(/-r, --allowed_origin <ORIGIN>/);
    const bad = capture();
    expect(await grpcAsMain(['--rest', '127.0.0.1:0'], bad.io)).toBe(2);
    expect(bad.err.join('')).toMatch(/--rest/);
    expect(await restfulAsMain(['-r', 'ftp://x'], capture().io)).toBe(2);
    const ca = capture();
    expect(await restfulAsMain(['--client-ca', 'ca.pem'], ca.io)).toBe(2);
    expect(ca.err.join('')).toMatch(/--client-ca needs --https-pubkey-cert/);
  });
});
