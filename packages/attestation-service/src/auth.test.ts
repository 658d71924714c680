// Write authentication on the standalone attestation service, through its commands' flags: policies and
// reference values need an admin JWT (--admin-public-key) or a client certificate from --client-ca;
// evaluation, challenges, policy listing and reference value queries need nothing, as upstream.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signAdminToken } from '@broker/auth';
import { HealthService, HealthStatus, RvpsClient, type RvpsClientError } from '@broker/rvps-core';
import { makeTestPki, pem, type TestPki } from '@broker/rvps-core/testing';
import { attestation } from '@broker/trustee-protos';
import {
  type ChannelCredentials,
  credentials,
  Metadata,
  makeGenericClientConstructor,
  type ServiceError,
  status,
} from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grpcAsMain, restfulAsMain } from './cli.js';
import { SVN_POLICY, sampleEvidenceRequest } from './testing/index.js';

const silent = { out: () => {}, err: () => {} };
const dir = mkdtempSync(join(tmpdir(), 'as-auth-'));
let pki: TestPki;
const saved = process.env.RUST_LOG;
beforeAll(() => {
  process.env.RUST_LOG = 'off';
  pki = makeTestPki(dir);
});
afterAll(() => {
  if (saved === undefined) delete process.env.RUST_LOG;
  else process.env.RUST_LOG = saved;
  rmSync(dir, { recursive: true, force: true });
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

const POLICY = Buffer.from(SVN_POLICY).toString('base64url');

function grpcClient(port: number, creds: ChannelCredentials = credentials.createInsecure()) {
  const client = new attestation.AttestationServiceClient(`127.0.0.1:${port}`, creds);
  const meta = (token?: string) => {
    const m = new Metadata();
    if (token !== undefined) m.set('authorization', `Bearer ${token}`);
    return m;
  };
  return {
    setPolicy: (token?: string) =>
      new Promise<number>((resolve) =>
        client.setAttestationPolicy({ policyId: 'svn', policy: POLICY }, meta(token), (e) =>
          resolve(e ? e.code : status.OK),
        ),
      ),
    setPolicyError: () =>
      new Promise<ServiceError | null>((resolve) =>
        client.setAttestationPolicy({ policyId: 'svn', policy: POLICY }, meta(), (e) => resolve(e)),
      ),
    evaluate: () =>
      new Promise<number>((resolve) =>
        client.attestationEvaluate(
          { verificationRequests: [sampleEvidenceRequest({ nonce: 'n' })], policyIds: [] },
          (e) => resolve(e ? e.code : status.OK),
        ),
      ),
    challenge: () =>
      new Promise<number>((resolve) =>
        client.getAttestationChallenge({ inner: { tee: 'tdx', tee_params: '{}' } }, (e) =>
          resolve(e ? e.code : status.OK),
        ),
      ),
    close: () => client.close(),
  };
}

describe('grpc-as --admin-public-key', () => {
  it('refuses policy and reference value writes without a valid admin JWT; reads and evaluation stay open', async () => {
    const port = await freePort();
    const admin = readFileSync(pki.adminKey, 'utf8');
    const other = readFileSync(pki.otherKey, 'utf8');
    const seen: Record<string, unknown> = {};
    const code = await grpcAsMain(
      ['--socket', `127.0.0.1:${port}`, '--admin-public-key', pki.adminPub],
      silent,
      async () => {
        const c = grpcClient(port);
        const refused = await c.setPolicyError();
        seen.noToken = refused?.code;
        seen.noTokenMessage = refused?.details;
        seen.otherKey = await c.setPolicy(await signAdminToken(other));
        seen.reader = await c.setPolicy(await signAdminToken(admin, { role: 'reader' }));
        seen.admin = await c.setPolicy(await signAdminToken(admin));
        seen.evaluate = await c.evaluate();
        seen.challenge = await c.challenge();
        c.close();
        const rv = JSON.stringify({
          version: '0.1.0',
          type: 'sample',
          payload: Buffer.from('{"a":1}').toString('base64'),
        });
        const open = new RvpsClient(`http://127.0.0.1:${port}`);
        seen.registerNoToken = await open.register(rv).catch((e: unknown) => (e as RvpsClientError).code);
        seen.queryNoToken = await open.query('a');
        open.close();
        const signed = new RvpsClient(`http://127.0.0.1:${port}`, 5000, {
          token: () => signAdminToken(admin),
        });
        seen.registerToken = await signed.register(rv).then(() => status.OK);
        signed.close();
      },
    );
    expect(code).toBe(0);
    expect(seen).toEqual({
      noToken: status.UNAUTHENTICATED,
      noTokenMessage: expect.stringMatching(
        /SetAttestationPolicy needs authentication: .*authorization: Bearer/,
      ),
      otherKey: status.UNAUTHENTICATED,
      reader: status.PERMISSION_DENIED,
      admin: status.OK,
      evaluate: status.OK,
      challenge: status.OK,
      registerNoToken: status.UNAUTHENTICATED,
      queryNoToken: undefined,
      registerToken: status.OK,
    });
  });
});

describe('grpc-as --rvps-auth-private-key', () => {
  it('forwards registrations to an RVPS that requires an admin JWT with one it signs', async () => {
    const { createRvps, startRvpsServer } = await import('@broker/rvps-core');
    const { MemoryStorage } = await import('@broker/kv-storage');
    const { createWriteAuthorizer } = await import('@broker/auth');
    const { writeFileSync } = await import('node:fs');
    const rvps = await startRvpsServer({
      rvps: createRvps(new MemoryStorage()),
      address: '127.0.0.1:0',
      auth: await createWriteAuthorizer({ adminPublicKeys: [pki.adminPub] }),
    });
    const config = join(dir, 'remote-rvps.json');
    writeFileSync(
      config,
      JSON.stringify({ rvps_config: { type: 'GrpcRemote', address: `127.0.0.1:${rvps.port}` } }),
    );
    const rv = (name: string) =>
      JSON.stringify({
        version: '0.1.0',
        type: 'sample',
        payload: Buffer.from(`{"${name}":1}`).toString('base64'),
      });
    const seen: unknown[] = [];
    for (const extra of [[], ['--rvps-auth-private-key', pki.adminKey]]) {
      const port = await freePort();
      const code = await grpcAsMain(['-c', config, '-s', `127.0.0.1:${port}`, ...extra], silent, async () => {
        const client = new RvpsClient(`http://127.0.0.1:${port}`);
        const name = extra.length === 0 ? 'unsigned' : 'signed';
        seen.push(
          await client.register(rv(name)).then(
            () => 'ok',
            (e: unknown) => (e as Error).message,
          ),
        );
        seen.push(await client.query(name));
        client.close();
      });
      expect(code).toBe(0);
    }
    await rvps.close();
    expect(seen).toEqual([
      expect.stringMatching(/RegisterReferenceValue needs authentication/),
      undefined,
      'ok',
      '1',
    ]);
  });
});

describe('grpc-as with a GrpcRemote RVPS over mutual TLS', () => {
  it('trusts --rvps-cert-file and presents --rvps-client-cert: forwarded registrations pass the RVPS client CA', async () => {
    const { createRvps, startRvpsServer } = await import('@broker/rvps-core');
    const { MemoryStorage } = await import('@broker/kv-storage');
    const { createWriteAuthorizer } = await import('@broker/auth');
    const { writeFileSync } = await import('node:fs');
    const rvps = await startRvpsServer({
      rvps: createRvps(new MemoryStorage()),
      address: '127.0.0.1:0',
      tls: { certChain: pem(pki.serverCert), privateKey: pem(pki.serverKey), clientCa: pem(pki.clientCa) },
      auth: await createWriteAuthorizer({ clientCertificates: true }),
    });
    const config = join(dir, 'remote-rvps-tls.json');
    writeFileSync(
      config,
      JSON.stringify({ rvps_config: { type: 'GrpcRemote', address: `https://127.0.0.1:${rvps.port}` } }),
    );
    const rv = JSON.stringify({
      version: '0.1.0',
      type: 'sample',
      payload: Buffer.from('{"tls":1}').toString('base64'),
    });
    const trust = ['--rvps-cert-file', pki.serverCert];
    const seen: unknown[] = [];
    for (const extra of [
      trust,
      [...trust, '--rvps-client-cert', pki.clientCert, '--rvps-client-key', pki.clientKey],
    ]) {
      const port = await freePort();
      const code = await grpcAsMain(['-c', config, '-s', `127.0.0.1:${port}`, ...extra], silent, async () => {
        const client = new RvpsClient(`http://127.0.0.1:${port}`);
        seen.push(
          await client.register(rv).then(
            () => 'ok',
            (e: unknown) => (e as Error).message,
          ),
        );
        seen.push(await client.query('tls'));
        client.close();
      });
      expect(code).toBe(0);
    }
    await rvps.close();
    expect(seen).toEqual([expect.stringMatching(/needs authentication/), undefined, 'ok', '1']);
    const usage = { out: () => {}, err: () => {} };
    expect(await grpcAsMain(['--rvps-client-cert', pki.clientCert], usage)).toBe(2);
  });
});

describe('grpc-as --client-ca (mutual TLS)', () => {
  it('lets a client certificate from the CA write, refuses none or another CA, and reads without one', async () => {
    const port = await freePort();
    const seen: Record<string, unknown> = {};
    const tlsArgs = ['-t', pki.serverCert, '-k', pki.serverKey, '--client-ca', pki.clientCa];
    const code = await grpcAsMain(['-s', `127.0.0.1:${port}`, ...tlsArgs], silent, async () => {
      const ca = pem(pki.serverCert);
      const none = grpcClient(port, credentials.createSsl(ca));
      seen.none = await none.setPolicy();
      seen.noneEvaluate = await none.evaluate();
      none.close();
      const rogue = grpcClient(port, credentials.createSsl(ca, pem(pki.rogueKey), pem(pki.rogueCert)));
      seen.rogue = await rogue.setPolicy();
      rogue.close();
      const good = grpcClient(port, credentials.createSsl(ca, pem(pki.clientKey), pem(pki.clientCert)));
      seen.good = await good.setPolicy();
      good.close();
    });
    expect(code).toBe(0);
    expect(seen).toEqual({
      none: status.UNAUTHENTICATED,
      noneEvaluate: status.OK,
      rogue: status.UNAUTHENTICATED,
      good: status.OK,
    });
  });
});

function request(
  port: number,
  method: string,
  path: string,
  options: {
    body?: unknown;
    cert?: string;
    key?: string;
    token?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        ca: pem(pki.serverCert),
        ...(options.cert !== undefined && { cert: pem(options.cert), key: pem(options.key as string) }),
        agent: false,
        headers: {
          ...(body !== undefined && { 'content-type': 'application/json' }),
          ...(options.token !== undefined && { authorization: `Bearer ${options.token}` }),
          ...options.headers,
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => {
          text += d.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('restful-as with --client-ca and --admin-public-key', () => {
  it('answers POST /policy 401 without a credential, 200 with either; GET /policy is open; CORS for allowed origins', async () => {
    const port = await freePort();
    const admin = readFileSync(pki.adminKey, 'utf8');
    const seen: Record<string, unknown> = {};
    const policy = { policy_id: 'svn', policy: POLICY };
    const code = await restfulAsMain(
      [
        '--socket',
        `127.0.0.1:${port}`,
        '-t',
        pki.serverCert,
        '-k',
        pki.serverKey,
        '--client-ca',
        pki.clientCa,
        '--admin-public-key',
        pki.adminPub,
        '-r',
        'https://console.example,http://localhost:3000',
      ],
      silent,
      async () => {
        const none = await request(port, 'POST', '/policy', { body: policy });
        seen.none = none.status;
        seen.noneMessage = none.body;
        seen.rogue = (
          await request(port, 'POST', '/policy', { body: policy, cert: pki.rogueCert, key: pki.rogueKey })
        ).status;
        seen.badToken = (
          await request(port, 'POST', '/policy', {
            body: policy,
            token: await signAdminToken(readFileSync(pki.otherKey, 'utf8')),
          })
        ).status;
        seen.cert = (
          await request(port, 'POST', '/policy', { body: policy, cert: pki.clientCert, key: pki.clientKey })
        ).status;
        seen.token = (
          await request(port, 'POST', '/policy', { body: policy, token: await signAdminToken(admin) })
        ).status;
        const list = await request(port, 'GET', '/policy');
        seen.list = [list.status, list.body.includes('"svn"')];
        const preflight = await request(port, 'OPTIONS', '/policy', {
          headers: { origin: 'https://console.example', 'access-control-request-method': 'POST' },
        });
        seen.preflight = [preflight.status, preflight.headers['access-control-allow-origin']];
        const refused = await request(port, 'OPTIONS', '/policy', {
          headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
        });
        seen.refusedPreflight = [refused.status, refused.headers['access-control-allow-origin']];
      },
    );
    expect(code).toBe(0);
    expect(seen).toEqual({
      none: 401,
      noneMessage: expect.stringMatching(/POST \/policy needs authentication: present a client certificate/),
      rogue: 401,
      badToken: 401,
      cert: 200,
      token: 200,
      list: [200, true],
      preflight: [200, 'https://console.example'],
      refusedPreflight: [400, undefined],
    });
  });
});

describe('grpc.health.v1.Health on the grpc-as port', () => {
  it('answers SERVING for the server and its two services', async () => {
    const port = await freePort();
    const seen: unknown[] = [];
    const code = await grpcAsMain(['-s', `127.0.0.1:${port}`], silent, async () => {
      const Health = makeGenericClientConstructor(HealthService, 'Health');
      const client = new Health(`127.0.0.1:${port}`, credentials.createInsecure()) as unknown as {
        check(req: { service: string }, cb: (e: ServiceError | null, r?: { status: number }) => void): void;
        close(): void;
      };
      for (const service of [
        '',
        'attestation.AttestationService',
        'reference.ReferenceValueProviderService',
      ]) {
        seen.push(
          await new Promise((resolve) =>
            client.check({ service }, (e, r) => resolve(e ? e.code : r?.status)),
          ),
        );
      }
      client.close();
    });
    expect(code).toBe(0);
    expect(seen).toEqual([HealthStatus.SERVING, HealthStatus.SERVING, HealthStatus.SERVING]);
  });
});
