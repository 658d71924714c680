// The KBS's client of a remote attestation service (coco_as_grpc) against our gRPC AS as trustee's
// docker-compose runs it: lazy connection, the AS down and back, RVPS calls over the same channel; and
// this project's credentials for an AS process (grpc-as) that authenticates writes.
import { createHash, createPublicKey } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AttestationFailed, createGrpcAttestationService } from '@broker/attestation';
import {
  openAttestationService,
  parseAsConfig,
  type RunningAsGrpcServer,
  startAsGrpcServer,
} from '@broker/attestation-service';
import { createLogger } from '@broker/cli';
import { parseKbsConfigText, startKbs } from '@broker/kbs';
import { MemoryStorage } from '@broker/kv-storage';
import { canonicalJson, generateTeeKeyPair, runtimeDataDigest } from '@broker/protocol';
import { createRvps, RvpsClient, startRvpsServer } from '@broker/rvps-core';
import { makeTestPki, type TestPki } from '@broker/rvps-core/testing';
import { compactVerify, decodeProtectedHeader, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, freePort, type Running, start, waitForListen } from './helpers/process.js';

const silent = createLogger({
  name: 'remote-as',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

function sampleRequest(runtimeData: Record<string, unknown>, svn = '1') {
  const reportData = createHash('sha384').update(canonicalJson(runtimeData), 'utf8').digest();
  return {
    tee: 'sample' as const,
    evidence: { svn, report_data: reportData.toString('base64') },
    runtimeData,
    runtimeDataHashAlgorithm: 'sha384' as const,
    initData: null,
    additional: [],
    policyIds: ['default'],
  };
}

async function claimsOf(token: string) {
  const key = createPublicKey({ key: decodeProtectedHeader(token).jwk as JWK as never, format: 'jwk' });
  return JSON.parse(Buffer.from((await compactVerify(token, key)).payload).toString('utf8'));
}

/** Retries while the channel waits out its reconnect backoff (bounded by attempts, not by time). */
async function eventually<T>(f: () => Promise<T>, attempts = 40): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await f();
    } catch (e) {
      if (i >= attempts) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

describe('KBS → remote attestation service (coco_as_grpc)', () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
  });

  async function startAs(port: number): Promise<RunningAsGrpcServer & { stopAll(): Promise<void> }> {
    const opened = await openAttestationService(parseAsConfig({}), silent);
    const server = await startAsGrpcServer({
      service: opened.service,
      rvps: opened.rvps,
      address: `127.0.0.1:${port}`,
    });
    return {
      ...server,
      async stopAll() {
        await server.close();
        await opened.close();
      },
    };
  }

  it('starts while the AS is down, fails attestations with upstream error, and recovers when the AS comes up', async () => {
    const port = await freePort();
    const remote = createGrpcAttestationService({ asAddr: `http://127.0.0.1:${port}`, poolSize: 2 });
    closers.push(() => remote.close());
    const down = await remote.verify(sampleRequest({ nonce: 'a' })).catch((e: unknown) => e);
    expect(down).toBeInstanceOf(AttestationFailed);
    expect((down as Error).message).toBe('RCAR handshake Attest failed');

    const as = await startAs(port);
    const token = await eventually(() => remote.verify(sampleRequest({ nonce: 'b' })));
    expect(
      (await claimsOf(token)).submods.cpu0['ear.veraison.annotated-evidence'].runtime_data_claims,
    ).toEqual({
      nonce: 'b',
    });

    // Down mid-run, then back on the same port.
    await as.stopAll();
    expect(await remote.verify(sampleRequest({ nonce: 'c' })).catch((e: unknown) => e)).toBeInstanceOf(
      AttestationFailed,
    );
    const again = await startAs(port);
    closers.push(() => again.stopAll());
    expect(typeof (await eventually(() => remote.verify(sampleRequest({ nonce: 'd' }))))).toBe('string');
  });

  it('sets policies and registers and reads reference values through the AS', async () => {
    const as = await startAs(0);
    closers.push(() => as.stopAll());
    const remote = createGrpcAttestationService({ asAddr: `http://127.0.0.1:${as.port}` });
    closers.push(() => remote.close());
    await remote.registerReferenceValue(
      JSON.stringify({
        version: '0.1.0',
        type: 'sample',
        payload: Buffer.from('{"svn":["4"]}').toString('base64'),
      }),
    );
    expect(await remote.getReferenceValue('svn')).toEqual(['4']);
    expect(await remote.getReferenceValue('unknown')).toBeUndefined();
    await remote.setPolicy(
      'default_cpu',
      'package policy\nimport rego.v1\ndefault executables := 33\nexecutables := 2 if { input.sample.svn in query_reference_value("svn") }\ntrust_claims := {"executables": executables}\n',
    );
    const token = await remote.verify(sampleRequest({ nonce: 'e' }, '4'));
    expect((await claimsOf(token)).submods.cpu0['ear.trustworthiness-vector'].executables).toBe(2);
    await expect(remote.setPolicy('p', 'package policy\nx if {')).rejects.toThrow(
      /Set Attestation Policy Failed/,
    );
    await expect(remote.registerReferenceValue('{"version":"9"}')).rejects.toThrow(/remote RVPS/);
    expect(remote.signerPublicJwk).toBeUndefined();
  });

  it('refuses an as_addr without a scheme, as tonic would', () => {
    expect(() => createGrpcAttestationService({ asAddr: '127.0.0.1:50004' })).toThrow(/http:\/\/HOST:PORT/);
  });
});

describe('KBS configured with [attestation_service] type = "coco_as_grpc"', () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
  });

  /** /auth then /attest with the sample TEE; the /attest response. */
  async function attest(base: string): Promise<{ status: number; body: string }> {
    const auth = await fetch(`${base}/kbs/v0/auth`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ version: '0.4.0', tee: 'sample', 'extra-params': {} }),
    });
    expect(auth.status).toBe(200);
    const cookie = (auth.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const { nonce } = (await auth.json()) as { nonce: string };
    const key = generateTeeKeyPair();
    const digest = runtimeDataDigest({ nonce, 'tee-pubkey': key.publicJwk, 'additional-evidence': '' });
    const res = await fetch(`${base}/kbs/v0/attest`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/json' },
      body: JSON.stringify({
        'init-data': null,
        'runtime-data': { nonce, 'tee-pubkey': key.publicJwk },
        'tee-evidence': {
          primary_evidence: { svn: '1', report_data: digest.toString('base64') },
          additional_evidence: '',
        },
      }),
    });
    return { status: res.status, body: await res.text() };
  }

  it('starts before the AS, answers 401 AttestationError while it is down, and attests once it is up', async () => {
    const asPort = await freePort();
    const kbs = await startKbs(
      parseKbsConfigText(`[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[attestation_service]
type = "coco_as_grpc"
as_addr = "http://127.0.0.1:${asPort}"
pool_size = 10
timeout = 5
`),
      { logger: silent },
    );
    closers.push(() => kbs.close());
    const base = kbs.urls[0] as string;

    const down = await attest(base);
    expect(down.status).toBe(401);
    expect(down.body).toContain('AttestationError');

    const opened = await openAttestationService(parseAsConfig({}), silent);
    const server = await startAsGrpcServer({
      service: opened.service,
      rvps: opened.rvps,
      address: `127.0.0.1:${asPort}`,
    });
    closers.push(async () => {
      await server.close();
      await opened.close();
    });
    const up = await eventually(async () => {
      const r = await attest(base);
      if (r.status !== 200) throw new Error(`attest: ${r.status} ${r.body}`);
      return r;
    });
    const { token } = JSON.parse(up.body) as { token: string };
    const claims = await claimsOf(token);
    expect(
      Object.keys(claims.submods.cpu0['ear.veraison.annotated-evidence'].runtime_data_claims).sort(),
    ).toEqual(['additional-evidence', 'nonce', 'tee-pubkey']);
  });
});

describe('KBS built-in attestation service with [attestation_service.rvps_config] type = "GrpcRemote"', () => {
  const config = (port: number) =>
    parseKbsConfigText(`[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[attestation_service]
type = "coco_as_builtin"
[attestation_service.rvps_config]
type = "GrpcRemote"
address = "127.0.0.1:${port}"
`);

  it('registers and reads reference values in the RVPS process through the admin API', async () => {
    const rvps = await startRvpsServer({ rvps: createRvps(new MemoryStorage()), address: '127.0.0.1:0' });
    const kbs = await startKbs(config(rvps.port), { logger: silent });
    try {
      const base = kbs.urls[0] as string;
      const message = JSON.stringify({
        version: '0.1.0',
        type: 'sample',
        payload: Buffer.from('{"remote.svn":["9"]}').toString('base64'),
      });
      const post = await fetch(`${base}/kbs/v0/reference-value`, { method: 'POST', body: message });
      expect(post.status).toBe(200);
      const client = new RvpsClient(`http://127.0.0.1:${rvps.port}`);
      expect(await client.query('remote.svn')).toBe('["9"]');
      client.close();
      const get = await fetch(`${base}/kbs/v0/reference-value/remote.svn`);
      expect([get.status, await get.text()]).toEqual([200, '["9"]']);
    } finally {
      await kbs.close();
      await rvps.close();
    }
  });

  it('does not start while the RVPS is unreachable, as trustee', async () => {
    const port = await freePort();
    await expect(startKbs(config(port), { logger: silent })).rejects.toThrow(
      /attestation service initialization failed|RVPS/,
    );
  });
});

describe('KBS coco_as_grpc writes to an attestation service that authenticates them', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kbs-remote-as-auth-'));
  const procs: Running[] = [];
  let pki: TestPki;
  beforeAll(() => {
    pki = makeTestPki(dir);
  });
  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function startGrpcAs(extra: string[]): Promise<number> {
    const port = await freePort();
    const as = start(binary('grpc-as'), ['--socket', `127.0.0.1:${port}`, ...extra], {
      env: { ...process.env, RUST_LOG: 'warn' },
    });
    procs.push(as);
    await waitForListen({ port }, as);
    return port;
  }

  /** The admin API's writes through a KBS whose [attestation_service] ends with `keys`. */
  async function writeThroughKbs(asAddr: string, keys: string, name: string) {
    const kbs = await startKbs(
      parseKbsConfigText(`[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[attestation_service]
type = "coco_as_grpc"
as_addr = "${asAddr}"
${keys}
`),
      { logger: silent },
    );
    try {
      const base = kbs.urls[0] as string;
      const policy = await fetch(`${base}/kbs/v0/attestation-policy`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          policy_id: 'remote-written',
          policy: Buffer.from(
            'package policy\nimport rego.v1\ndefault executables := 3\ntrust_claims := {"executables": executables}\n',
          ).toString('base64url'),
        }),
      });
      const rv = await fetch(`${base}/kbs/v0/reference-value`, {
        method: 'POST',
        body: JSON.stringify({
          version: '0.1.0',
          type: 'sample',
          payload: Buffer.from(JSON.stringify({ [name]: ['1'] })).toString('base64'),
        }),
      });
      const read = await fetch(`${base}/kbs/v0/reference-value/${name}`);
      return {
        policy: [policy.status, await policy.text()],
        referenceValue: [rv.status, await rv.text()],
        read: [read.status, await read.text()],
      };
    } finally {
      await kbs.close();
    }
  }

  it('signs an admin JWT with admin_private_key for a grpc-as with --admin-public-key; without it the write is refused naming the key', async () => {
    const port = await startGrpcAs(['--admin-public-key', pki.adminPub]);
    const addr = `http://127.0.0.1:${port}`;

    const none = await writeThroughKbs(addr, '', 'unsigned');
    expect(none.policy[0]).toBe(401);
    expect(none.policy[1]).toContain('AttestationError');
    expect(none.policy[1]).toMatch(/refused the attestation policy \(UNAUTHENTICATED: .*admin_private_key/);
    expect(none.referenceValue[0]).toBe(401);
    expect(none.referenceValue[1]).toContain('RvpsError');
    expect(none.referenceValue[1]).toMatch(
      /refused the reference value \(UNAUTHENTICATED: .*admin_private_key/,
    );
    expect(none.read[1]).toContain('No reference value found');

    const other = await writeThroughKbs(addr, `admin_private_key = "${pki.otherKey}"`, 'untrusted');
    expect(other.policy[0]).toBe(401);
    expect(other.policy[1]).toMatch(/UNAUTHENTICATED: .*was not accepted/);

    const signed = await writeThroughKbs(addr, `admin_private_key = "${pki.adminKey}"`, 'signed');
    expect(signed).toEqual({ policy: [200, ''], referenceValue: [200, ''], read: [200, '["1"]'] });
  });

  it('presents client_cert/client_key over TLS to a grpc-as with --client-ca, trusting ca_cert', async () => {
    const port = await startGrpcAs(['-t', pki.serverCert, '-k', pki.serverKey, '--client-ca', pki.clientCa]);
    const addr = `https://127.0.0.1:${port}`;
    const trust = `ca_cert = "${pki.serverCert}"`;

    const none = await writeThroughKbs(addr, trust, 'no-cert');
    expect(none.policy[0]).toBe(401);
    expect(none.policy[1]).toMatch(/UNAUTHENTICATED: .*client_cert and client_key/);

    const rogue = await writeThroughKbs(
      addr,
      `${trust}\nclient_cert = "${pki.rogueCert}"\nclient_key = "${pki.rogueKey}"`,
      'rogue-cert',
    );
    expect(rogue.policy[0]).toBe(401);

    const good = await writeThroughKbs(
      addr,
      `${trust}\nclient_cert = "${pki.clientCert}"\nclient_key = "${pki.clientKey}"`,
      'client-cert',
    );
    expect(good).toEqual({ policy: [200, ''], referenceValue: [200, ''], read: [200, '["1"]'] });
  });

  it('registers through a built-in AS into a GrpcRemote rvps that requires a credential: rvps_config admin_private_key, or a client certificate', async () => {
    const plainPort = await freePort();
    const plain = start(binary('rvps'), [
      '--address',
      `127.0.0.1:${plainPort}`,
      '--admin-public-key',
      pki.adminPub,
    ]);
    procs.push(plain);
    await waitForListen({ port: plainPort }, plain);
    const tlsPort = await freePort();
    const tls = start(binary('rvps'), [
      '--address',
      `127.0.0.1:${tlsPort}`,
      '-t',
      pki.serverCert,
      '-k',
      pki.serverKey,
      '--client-ca',
      pki.clientCa,
    ]);
    procs.push(tls);
    await waitForListen({ port: tlsPort }, tls);
    const register = async (rvpsTable: string, name: string) => {
      const kbs = await startKbs(
        parseKbsConfigText(`[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[attestation_service]
type = "coco_as_builtin"
[attestation_service.rvps_config]
type = "GrpcRemote"
${rvpsTable}
`),
        { logger: silent },
      );
      try {
        const base = kbs.urls[0] as string;
        const rv = await fetch(`${base}/kbs/v0/reference-value`, {
          method: 'POST',
          body: JSON.stringify({
            version: '0.1.0',
            type: 'sample',
            payload: Buffer.from(JSON.stringify({ [name]: ['1'] })).toString('base64'),
          }),
        });
        const read = await fetch(`${base}/kbs/v0/reference-value/${name}`);
        return { referenceValue: [rv.status, await rv.text()], read: read.status };
      } finally {
        await kbs.close();
      }
    };
    const plainAddr = `address = "127.0.0.1:${plainPort}"`;
    const none = await register(plainAddr, 'rvps-unsigned');
    expect(none.referenceValue[0]).toBe(401);
    expect(none.referenceValue[1]).toMatch(
      /remote RVPS refused the reference value \(UNAUTHENTICATED: .*\[attestation_service.rvps_config\] admin_private_key/,
    );
    expect(await register(`${plainAddr}\nadmin_private_key = "${pki.adminKey}"`, 'rvps-signed')).toEqual({
      referenceValue: [200, ''],
      read: 200,
    });
    const tlsAddr = `address = "https://127.0.0.1:${tlsPort}"\nca_cert = "${pki.serverCert}"`;
    expect((await register(tlsAddr, 'rvps-no-cert')).referenceValue[1]).toMatch(/UNAUTHENTICATED/);
    expect(
      await register(
        `${tlsAddr}\nclient_cert = "${pki.clientCert}"\nclient_key = "${pki.clientKey}"`,
        'rvps-cert',
      ),
    ).toEqual({ referenceValue: [200, ''], read: 200 });
  });

  it('does not start with an admin_private_key it cannot read or use', async () => {
    const config = (key: string) =>
      parseKbsConfigText(`[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "DenyAll"
[attestation_service]
type = "coco_as_grpc"
admin_private_key = "${key}"
`);
    await expect(startKbs(config(join(dir, 'missing.key')), { logger: silent })).rejects.toThrow(
      /admin_private_key: cannot read/,
    );
    await expect(startKbs(config(pki.adminPub), { logger: silent })).rejects.toThrow(
      /not an unencrypted PEM private key/,
    );
  });
});
