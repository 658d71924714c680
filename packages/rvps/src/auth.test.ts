// Write authentication on the RVPS: registrations need an admin JWT or a client certificate from the
// client CA once either is configured; queries and the health service stay open.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWriteAuthorizer, signAdminToken } from '@broker/auth';
import { MemoryStorage } from '@broker/kv-storage';
import {
  createRvps,
  HealthService,
  HealthStatus,
  type RunningRvpsServer,
  RvpsClient,
  type RvpsClientError,
  startRvpsServer,
} from '@broker/rvps-core';
import { makeTestPki, pem, sampleMessage, type TestPki } from '@broker/rvps-core/testing';
import { credentials, makeGenericClientConstructor, status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'rvps-auth-'));
let pki: TestPki;
beforeAll(() => {
  pki = makeTestPki(dir);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const code = (e: unknown) => (e as RvpsClientError).code;

describe('rvps writes with an admin public key', () => {
  let server: RunningRvpsServer;
  let addr: string;
  beforeAll(async () => {
    server = await startRvpsServer({
      rvps: createRvps(new MemoryStorage()),
      address: '127.0.0.1:0',
      auth: await createWriteAuthorizer({ adminPublicKeys: [pki.adminPub] }),
    });
    addr = `http://127.0.0.1:${server.port}`;
  });
  afterAll(() => server.close());

  it('refuses a registration without a token with UNAUTHENTICATED naming what is missing; queries still work', async () => {
    const client = new RvpsClient(addr);
    const err = await client.register(sampleMessage({ open: 1 })).catch((e: unknown) => e);
    expect(code(err)).toBe(status.UNAUTHENTICATED);
    expect((err as Error).message).toMatch(
      /RegisterReferenceValue needs authentication: .*authorization: Bearer/,
    );
    expect(await client.query('open')).toBeUndefined();
    client.close();
  });

  it('registers with a token signed by the trusted key', async () => {
    const key = readFileSync(pki.adminKey, 'utf8');
    const client = new RvpsClient(addr, 5000, { token: () => signAdminToken(key) });
    await client.register(sampleMessage({ signed: 'yes' }));
    expect(await new RvpsClient(addr).query('signed')).toBe('"yes"');
    client.close();
  });

  it('refuses a token signed by another key, an expired one, and one whose role may not write', async () => {
    const other = readFileSync(pki.otherKey, 'utf8');
    const admin = readFileSync(pki.adminKey, 'utf8');
    const cases: [() => Promise<string>, number, RegExp][] = [
      [() => signAdminToken(other), status.UNAUTHENTICATED, /admin token was refused/],
      [
        () => signAdminToken(admin, { now: () => Date.now() - 3 * 3600_000 }),
        status.UNAUTHENTICATED,
        /admin token was refused/,
      ],
      [() => signAdminToken(admin, { role: 'reader' }), status.PERMISSION_DENIED, /role may not write/],
      [async () => 'not-a-jwt', status.UNAUTHENTICATED, /admin token was refused/],
    ];
    for (const [token, want, message] of cases) {
      const client = new RvpsClient(addr, 5000, { token });
      const err = await client.register(sampleMessage({ refused: 1 })).catch((e: unknown) => e);
      expect(code(err)).toBe(want);
      expect((err as Error).message).toMatch(message);
      client.close();
    }
    expect(await new RvpsClient(addr).query('refused')).toBeUndefined();
  });
});

describe('rvps writes with a client CA (mutual TLS)', () => {
  let server: RunningRvpsServer;
  let addr: string;
  beforeAll(async () => {
    server = await startRvpsServer({
      rvps: createRvps(new MemoryStorage()),
      address: '127.0.0.1:0',
      tls: {
        certChain: pem(pki.serverCert),
        privateKey: pem(pki.serverKey),
        clientCa: pem(pki.clientCa),
      },
      auth: await createWriteAuthorizer({ clientCertificates: true }),
    });
    addr = `https://127.0.0.1:${server.port}`;
  });
  afterAll(() => server.close());

  it('lets a client without a certificate query but not register', async () => {
    const client = new RvpsClient(addr, 5000, { caCert: pem(pki.serverCert) });
    expect(await client.query('x')).toBeUndefined();
    const err = await client.register(sampleMessage({ x: 1 })).catch((e: unknown) => e);
    expect(code(err)).toBe(status.UNAUTHENTICATED);
    expect((err as Error).message).toMatch(/client certificate issued by the client CA/);
    client.close();
  });

  it('registers with a certificate from the client CA', async () => {
    const client = new RvpsClient(addr, 5000, {
      caCert: pem(pki.serverCert),
      clientCert: { certChain: pem(pki.clientCert), privateKey: pem(pki.clientKey) },
    });
    await client.register(sampleMessage({ mtls: 'ok' }));
    expect(await client.query('mtls')).toBe('"ok"');
    client.close();
  });

  it('refuses a certificate from another CA', async () => {
    const client = new RvpsClient(addr, 5000, {
      caCert: pem(pki.serverCert),
      clientCert: { certChain: pem(pki.rogueCert), privateKey: pem(pki.rogueKey) },
    });
    const err = await client.register(sampleMessage({ rogue: 1 })).catch((e: unknown) => e);
    expect(code(err)).toBe(status.UNAUTHENTICATED);
    expect(await client.query('rogue')).toBeUndefined();
    client.close();
  });
});

describe('rvps without write authentication (upstream default)', () => {
  it('accepts anyone', async () => {
    const server = await startRvpsServer({ rvps: createRvps(new MemoryStorage()), address: '127.0.0.1:0' });
    const client = new RvpsClient(`http://127.0.0.1:${server.port}`);
    await client.register(sampleMessage({ open: 1 }));
    expect(await client.query('open')).toBe('1');
    client.close();
    await server.close();
  });
});

describe('grpc.health.v1.Health on the RVPS port', () => {
  it('answers Check and Watch with SERVING, unknown services with NOT_FOUND, and stops promptly with a Watch open', async () => {
    const server = await startRvpsServer({ rvps: createRvps(new MemoryStorage()), address: '127.0.0.1:0' });
    const Health = makeGenericClientConstructor(HealthService, 'Health');
    const client = new Health(`127.0.0.1:${server.port}`, credentials.createInsecure()) as unknown as {
      check(req: { service: string }, cb: (e: { code: number } | null, r?: { status: number }) => void): void;
      watch(req: { service: string }): NodeJS.EventEmitter & { cancel(): void };
      close(): void;
    };
    const check = (service: string) =>
      new Promise<{ code?: number; status?: number }>((resolve) =>
        client.check({ service }, (e, r) => resolve(e ? { code: e.code } : { status: r?.status as number })),
      );
    expect(await check('')).toEqual({ status: HealthStatus.SERVING });
    expect(await check('reference.ReferenceValueProviderService')).toEqual({ status: HealthStatus.SERVING });
    expect(await check('no.such.Service')).toEqual({ code: status.NOT_FOUND });
    const watch = client.watch({ service: '' });
    const first = await new Promise<{ status: number }>((resolve) => watch.once('data', resolve));
    expect(first.status).toBe(HealthStatus.SERVING);
    watch.on('error', () => {});
    const t0 = Date.now();
    await server.close();
    expect(Date.now() - t0).toBeLessThan(2000);
    client.close();
  });
});
