// trustee's grpc-as serves the token signer's JWK Set as plain HTTP/1.1 `GET /.well-known/jwks.json`
// on its gRPC port. Peers we did not write: Debian's curl fetches it (plaintext and TLS), Debian's
// python3-grpcio checks health on the same port, jose verifies a token from the same service with it;
// raw sockets send what a hostile client would.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { createWriteAuthorizer } from '@broker/auth';
import { createLogger } from '@broker/cli';
import { makeTestPki, pem, type TestPki } from '@broker/rvps-core/testing';
import { attestation } from '@broker/trustee-protos';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { createLocalJWKSet, type JSONWebKeySet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAsConfig } from './config.js';
import { JWKS_PATH, type RunningAsGrpcServer, startAsGrpcServer } from './grpc.js';
import { type OpenedAttestationService, openAttestationService } from './service.js';
import { sampleEvidenceRequest } from './testing/index.js';

const run = promisify(execFile);
const PROBE = resolve(import.meta.dirname, '../../../test/helpers/grpc_probe.py');
const SERVING = 1;
/** Short, so the hostile-input tests see a stalled connection closed; nothing here is timed. */
const TIMEOUT_MS = 300;

const silent = createLogger({
  name: 'attestation-service',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

async function curl(...args: string[]): Promise<{ status: number; body: string }> {
  const { stdout } = await run('/usr/bin/curl', ['-sS', '--max-time', '20', '-w', '\n%{http_code}', ...args]);
  const cut = stdout.lastIndexOf('\n');
  return { status: Number(stdout.slice(cut + 1)), body: stdout.slice(0, cut) };
}

async function probe(target: string, ...steps: string[]): Promise<unknown[]> {
  const { stdout } = await run('/usr/bin/python3', [PROBE, target, ...steps], { timeout: 30_000 });
  return JSON.parse(stdout);
}

/** Sends `bytes` (nothing if empty) and collects everything the server writes until it closes. */
function exchange(port: number, bytes: string, tls?: { ca: Buffer; alpn?: string[] }): Promise<string> {
  return new Promise((done, fail) => {
    const socket =
      tls === undefined
        ? tcpConnect(port, '127.0.0.1')
        : tlsConnect({ port, host: '127.0.0.1', ca: tls.ca, ALPNProtocols: tls.alpn ?? ['http/1.1'] });
    const chunks: Buffer[] = [];
    socket.on(tls === undefined ? 'connect' : 'secureConnect', () => {
      if (bytes !== '') socket.write(bytes);
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' ? undefined : fail(e)));
    socket.on('close', () => done(Buffer.concat(chunks).toString('latin1')));
  });
}

function evaluate(client: attestation.AttestationServiceClient): Promise<string> {
  return new Promise((done, fail) =>
    client.attestationEvaluate(
      { verificationRequests: [sampleEvidenceRequest({ nonce: 'jwks' })], policyIds: [] },
      new Metadata(),
      { deadline: Date.now() + 30_000 },
      (e: ServiceError | null, r?: attestation.AttestationResponse) =>
        e ? fail(e) : done((r as attestation.AttestationResponse).attestationToken),
    ),
  );
}

describe("grpc-as's GET /.well-known/jwks.json on the gRPC port", () => {
  let dir: string;
  let pki: TestPki;
  let opened: OpenedAttestationService;
  let plain: RunningAsGrpcServer;
  let secure: RunningAsGrpcServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'grpc-jwks-'));
    pki = makeTestPki(dir);
    opened = await openAttestationService(parseAsConfig({}), silent);
    const common = {
      service: opened.service,
      rvps: opened.rvps,
      logger: silent,
      connectionTimeoutMs: TIMEOUT_MS,
    };
    plain = await startAsGrpcServer({ ...common, address: '127.0.0.1:0' });
    secure = await startAsGrpcServer({
      ...common,
      address: '127.0.0.1:0',
      tls: { certChain: pem(pki.serverCert), privateKey: pem(pki.serverKey), clientCa: pem(pki.clientCa) },
      auth: await createWriteAuthorizer({ clientCertificates: true }),
    });
  });
  afterAll(async () => {
    await plain?.close();
    await secure?.close();
    await opened?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('curl fetches the JWK Set over plaintext; it verifies a token AttestationEvaluate returns on the same port', async () => {
    const res = await curl(`http://127.0.0.1:${plain.port}${JWKS_PATH}`);
    expect(res.status).toBe(200);
    const jwks = JSON.parse(res.body) as JSONWebKeySet;
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256' });
    expect(jwks.keys[0]).not.toHaveProperty('d');

    const client = new attestation.AttestationServiceClient(
      `127.0.0.1:${plain.port}`,
      credentials.createInsecure(),
    );
    try {
      const token = await evaluate(client);
      const { payload } = await jwtVerify(token, createLocalJWKSet(jwks));
      expect(payload).toHaveProperty('submods');
    } finally {
      client.close();
    }
  });

  it('python3-grpcio health checks pass on the same port, plaintext and TLS', async () => {
    expect(
      await probe(`127.0.0.1:${plain.port}`, 'health:', 'health:attestation.AttestationService'),
    ).toEqual([SERVING, SERVING]);
    expect(
      await probe(
        `127.0.0.1:${secure.port}`,
        `tls=${pki.serverCert}`,
        'health:attestation.AttestationService',
      ),
    ).toEqual([SERVING]);
  });

  it('under TLS a client certificate still reaches the gRPC handlers: SetAttestationPolicy needs one the client CA issued', async () => {
    const target = `127.0.0.1:${secure.port}`;
    const [none] = await probe(target, `tls=${pki.serverCert}`, 'set-policy');
    expect((none as string[])[0]).toBe('UNAUTHENTICATED');
    const [rogue] = await probe(
      target,
      `tls=${pki.serverCert}:${pki.rogueCert}:${pki.rogueKey}`,
      'set-policy',
    );
    expect((rogue as string[])[0]).not.toBe('OK');
    expect(
      await probe(target, `tls=${pki.serverCert}:${pki.clientCert}:${pki.clientKey}`, 'set-policy'),
    ).toEqual([['OK', '']]);
  });

  it('curl fetches the same JWK Set over TLS (ALPN h2 and http/1.1 offered, HTTP/1.1 forced, HEAD)', async () => {
    const url = `https://127.0.0.1:${secure.port}${JWKS_PATH}`;
    const expected = JSON.parse((await curl(`http://127.0.0.1:${plain.port}${JWKS_PATH}`)).body);
    for (const args of [[url], ['--http1.1', url]]) {
      const res = await curl('--cacert', pki.serverCert, ...args);
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toEqual(expected);
    }
    const head = await curl('--cacert', pki.serverCert, '-I', url);
    expect(head.status).toBe(200);
    expect(head.body).toMatch(/content-type: application\/json/i);
    // Without trusting the server's certificate curl refuses: this is TLS, not plaintext.
    await expect(curl(url)).rejects.toThrow();
  });

  it('answers 404 for other paths and 405 for a POST, reading no body', async () => {
    expect((await curl(`http://127.0.0.1:${plain.port}/`)).status).toBe(404);
    expect((await curl(`http://127.0.0.1:${plain.port}/attestation.AttestationService/x`)).status).toBe(404);
    const post = await curl('-X', 'POST', '-d', '{"keys":[]}', `http://127.0.0.1:${plain.port}${JWKS_PATH}`);
    expect(post.status).toBe(405);
    // A body announced on a GET is refused, and the connection closed rather than drained.
    const reply = await exchange(
      plain.port,
      `GET ${JWKS_PATH} HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n${'a'.repeat(1000)}`,
    );
    expect(reply).toMatch(/^HTTP\/1\.1 413 /);
    expect(reply).toMatch(/connection: close/i);
  });

  it('refuses a garbage first line with 400 and an oversized header with 431, then closes', async () => {
    expect(await exchange(plain.port, '\x16\x03\x01\x02\x00garbage \x00\r\n\r\n')).toMatch(
      /^HTTP\/1\.1 400 /,
    );
    expect(await exchange(plain.port, 'GET / HTTP/1.1\r\nhost: x\r\n\r\nGARBAGE\r\n\r\n')).toMatch(
      /^HTTP\/1\.1 404 (?:(?!GARBAGE)[\s\S])*$/,
    );
    const big = `GET ${JWKS_PATH} HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`;
    expect(await exchange(plain.port, big)).toMatch(/^HTTP\/1\.1 431 /);
    const tlsBig = await exchange(secure.port, big, { ca: pem(pki.serverCert) });
    expect(tlsBig).toMatch(/^HTTP\/1\.1 431 /);
  });

  it('closes a connection that stalls in the HTTP/2 preface, in a request head, before or after a TLS handshake', async () => {
    // Each exchange resolves only when the server closes the connection.
    expect(await exchange(plain.port, 'PRI * HTTP/2.0\r\n')).toBe('');
    expect(await exchange(plain.port, '')).toBe('');
    expect(await exchange(plain.port, `GET ${JWKS_PATH} HTTP/1.1\r\nhost: x\r\nx-slow: a`)).toBe('');
    expect(
      await exchange(secure.port, `GET ${JWKS_PATH} HTTP/1.1\r\nhost: x\r\n`, { ca: pem(pki.serverCert) }),
    ).toBe('');
    expect(await exchange(secure.port, '\x16\x03\x01')).toBe('');
  });

  it('under TLS refuses a client offering neither h2 nor http/1.1', async () => {
    await expect(exchange(secure.port, '', { ca: pem(pki.serverCert), alpn: ['spdy/3'] })).rejects.toThrow(
      /no application protocol|alert number 120/i,
    );
  });
});
