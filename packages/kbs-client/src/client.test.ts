import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Attester, SampleAttester, SampleDeviceAttester } from '@broker/attester';
import { jweEncrypt, runtimeDataDigest } from '@broker/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  KBS_CLIENT_USER_AGENT,
  KbsClient,
  type KbsClientOptions,
  resourceRequestPath,
  selectedHashAlgorithm,
} from './client.js';
import {
  EvidenceFailed,
  InvalidHashAlgorithm,
  InvalidResourcePath,
  InvalidToken,
  KbsBadResponse,
  KbsClientError,
  KbsRejected,
  KbsResourceMissing,
  KbsResourceNotFound,
  KbsUnauthorized,
  KbsUnreachable,
  KbsUntrustedCertificate,
  RcarHandshakeFailed,
  ResourceDecryptionFailed,
} from './errors.js';
import { TeeKeyPair } from './tee-key.js';
import { errorBody, FakeKbs, fakeToken } from './testing/fake-kbs.js';

const SECRET = Buffer.from('0123456789abcdef0123456789abcdef');

let kbs: FakeKbs;
let sleeps: number[];
const clients: KbsClient[] = [];

function client(extra: Partial<KbsClientOptions> = {}): KbsClient {
  const c = new KbsClient({
    url: kbs.url,
    attester: new SampleAttester(),
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    ...extra,
  } as KbsClientOptions);
  clients.push(c);
  return c;
}

/** The JWK with keys in sorted order, so JSON.stringify gives its JCS form (plain ASCII strings). */
function sortedJwk(jwk: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(jwk).sort(([a], [b]) => (a < b ? -1 : 1)));
}

function json(buf: Buffer): Record<string, unknown> {
  return JSON.parse(buf.toString('utf8'));
}

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

beforeEach(async () => {
  sleeps = [];
  kbs = await new FakeKbs().start();
  kbs.resources.set('default/key/one', SECRET);
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await kbs.stop();
});

describe('RCAR handshake and resource fetch', () => {
  it('sends upstream request bodies, headers and cookie, and decrypts the resource', async () => {
    const c = client();
    expect(await c.getResource('default/key/one')).toEqual(SECRET);
    expect(kbs.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      'POST /kbs/v0/auth',
      'POST /kbs/v0/attest',
      'GET /kbs/v0/resource/default/key/one',
    ]);
    const [auth, attest, get] = kbs.requests as [
      (typeof kbs.requests)[0],
      (typeof kbs.requests)[0],
      (typeof kbs.requests)[0],
    ];

    expect(json(auth.body)).toEqual({
      version: '0.4.0',
      tee: 'sample',
      'extra-params': { 'supported-hash-algorithms': ['sha256', 'sha384', 'sha512', 'sm3'] },
    });
    expect(auth.headers['content-type']).toBe('application/json');
    expect(auth.headers['user-agent']).toBe('attestation-agent-kbs-client/0.1.0');
    expect(auth.headers.cookie).toBeUndefined();

    const body = json(attest.body);
    expect(Object.keys(body).sort()).toEqual(['init-data', 'runtime-data', 'tee-evidence']);
    expect(body['init-data']).toBeNull();
    const rd = body['runtime-data'] as Record<string, unknown>;
    expect(Object.keys(rd).sort()).toEqual(['nonce', 'tee-pubkey']);
    expect(rd['tee-pubkey']).toEqual(c.teeKeyPair.publicJwk);
    expect(rd['tee-pubkey']).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ECDH-ES+A256KW' });
    const te = body['tee-evidence'] as Record<string, unknown>;
    expect(Object.keys(te).sort()).toEqual(['additional_evidence', 'primary_evidence']);
    expect(te.additional_evidence).toBe('');
    const digest = runtimeDataDigest({
      nonce: rd.nonce as string,
      'tee-pubkey': c.teeKeyPair.publicJwk,
      'additional-evidence': '',
    });
    expect(digest.length).toBe(48);
    expect(te.primary_evidence).toEqual({ svn: '1', report_data: digest.toString('base64') });
    expect(attest.headers.cookie).toMatch(/^kbs-session-id=[0-9a-f]{32}$/);

    expect(get.headers.cookie).toBe(attest.headers.cookie);
    expect(get.headers.authorization).toBeUndefined();
    expect(get.headers['user-agent']).toBe(KBS_CLIENT_USER_AGENT);
  });

  it('sends init-data as {"format":"toml","body"}', async () => {
    const toml = 'version = "0.1.0"\nalgorithm = "sha384"\n[data]\n';
    await client({ initData: toml }).getToken();
    expect(json(kbs.hits('/kbs/v0/attest')[0]!.body)['init-data']).toEqual({ format: 'toml', body: toml });
  });

  it('uses the hash algorithm the challenge selects, case-insensitively', async () => {
    kbs.challengeExtraParams = { 'selected-hash-algorithm': 'SHA512' };
    const c = client();
    await c.getToken();
    const ev = (
      json(kbs.hits('/kbs/v0/attest')[0]!.body)['tee-evidence'] as {
        primary_evidence: { report_data: string };
      }
    ).primary_evidence;
    expect(Buffer.from(ev.report_data, 'base64').length).toBe(64);
  });

  it('binds additional device evidence into the primary report data', async () => {
    const c = client({ additionalAttesters: [new SampleDeviceAttester()] });
    expect(await c.getResource('default/key/one')).toEqual(SECRET);
    const body = json(kbs.hits('/kbs/v0/attest')[0]!.body);
    const rd = body['runtime-data'] as { nonce: string };
    const te = body['tee-evidence'] as {
      additional_evidence: string;
      primary_evidence: { report_data: string };
    };
    const devices = JSON.parse(te.additional_evidence);
    const deviceDigest = runtimeDataDigest({ nonce: rd.nonce, 'tee-pubkey': c.teeKeyPair.publicJwk });
    expect(devices).toEqual({ sampledevice: { svn: '2', report_data: deviceDigest.toString('base64') } });
    const primary = runtimeDataDigest({
      nonce: rd.nonce,
      'tee-pubkey': c.teeKeyPair.publicJwk,
      'additional-evidence': te.additional_evidence,
    });
    expect(te.primary_evidence.report_data).toBe(primary.toString('base64'));
  });

  it('refuses device evidence beside SE, which cannot bind it (as upstream)', async () => {
    const se = { tee: 'se' as const, getEvidence: async () => ({}) };
    const c = client({ attester: se, additionalAttesters: [new SampleDeviceAttester()] });
    await expect(c.getToken()).rejects.toThrow('Cannot attest multiple devices on s390x platform.');
    expect(kbs.hits('/kbs/v0/attest')).toEqual([]);
  });

  it('works with P-521 and RSA TEE keys', async () => {
    for (const alg of ['ECDH-ES+A256KW-P521', 'RSA-OAEP-256'] as const) {
      expect(await client({ teeKeyAlgorithm: alg }).getResource('kbs:///default/key/one')).toEqual(SECRET);
    }
  });

  it('keeps a path prefix of the URL and drops a trailing slash', async () => {
    const prefixed = await new FakeKbs((h) =>
      http.createServer((req, res) => {
        req.url = (req.url ?? '').replace(/^\/prefix/, '');
        h(req, res);
      }),
    ).start();
    prefixed.resources.set('a/b/c', SECRET);
    try {
      const c = new KbsClient({ url: `${prefixed.url}/prefix/`, attester: new SampleAttester() });
      clients.push(c);
      expect(await c.getResource('a/b/c')).toEqual(SECRET);
      expect(c.url).toBe(`${prefixed.url}/prefix`);
    } finally {
      await prefixed.stop();
    }
  });
});

describe('token cache', () => {
  it('reuses the token and session until the token expires', async () => {
    let now = Date.now();
    kbs.now = () => now;
    const c = client({ now: () => now });
    const first = await c.getToken();
    expect((await c.getToken()).token).toBe(first.token);
    await c.getResource('default/key/one');
    await c.getResource('default/key/one');
    expect(kbs.hits('/kbs/v0/auth')).toHaveLength(1);

    now += 301_000;
    const second = await c.getToken();
    expect(second.token).not.toBe(first.token);
    expect(kbs.hits('/kbs/v0/auth')).toHaveLength(2);
    expect(second.teeKeyPair).toBe(first.teeKeyPair);
  });

  it('attest() always runs a fresh handshake', async () => {
    const c = client();
    const a = await c.attest();
    const b = await c.attest();
    expect(a.token).not.toBe(b.token);
    expect(kbs.hits('/kbs/v0/auth')).toHaveLength(2);
  });

  it('shares one handshake between concurrent requests', async () => {
    const c = client();
    const results = await Promise.all(Array.from({ length: 5 }, () => c.getResource('default/key/one')));
    expect(results.every((r) => r.equals(SECRET))).toBe(true);
    expect(kbs.hits('/kbs/v0/auth')).toHaveLength(1);
    expect(kbs.hits('/kbs/v0/attest')).toHaveLength(1);
  });
});

describe('retries', () => {
  it('retries the handshake 5 times with a 1 s pause, then succeeds', async () => {
    let fails = 4;
    kbs.override = (r) =>
      r.url === '/kbs/v0/auth' && fails-- > 0 ? { status: 500, body: 'overloaded' } : undefined;
    expect(await client().getResource('default/key/one')).toEqual(SECRET);
    expect(kbs.hits('/kbs/v0/auth')).toHaveLength(5);
    expect(sleeps).toEqual([1000, 1000, 1000, 1000]);
  });

  it('gives up after 5 handshake attempts with the last error', async () => {
    kbs.override = (r) =>
      r.url === '/kbs/v0/auth' ? { status: 401, body: errorBody('AttestationError', 'nope') } : undefined;
    const err = await failure(client().getToken());
    expect(err).toBeInstanceOf(RcarHandshakeFailed);
    expect((err as RcarHandshakeFailed).attempts).toBe(5);
    expect(err.message).toMatch(
      /^Unable to get token\. RCAR handshake retried 5 times\. Final attempt failed with: /,
    );
    const cause = err.cause as KbsUnauthorized;
    expect(cause).toBeInstanceOf(KbsUnauthorized);
    expect(cause.kind).toBe('AttestationError');
    expect(cause.detail).toBe('nope');
    expect(kbs.hits('/kbs/v0/auth')).toHaveLength(5);
    expect(sleeps).toHaveLength(4);
  });

  it('re-attests on a 401 from the resource and retries', async () => {
    let refused = false;
    kbs.override = (r) => {
      if (r.method === 'GET' && !refused) {
        refused = true;
        return { status: 401, body: errorBody('TokenVerifierError', 'Token Verifier error') };
      }
      return undefined;
    };
    expect(await client().getResource('default/key/one')).toEqual(SECRET);
    expect(kbs.requests.map((r) => r.url.split('/').pop())).toEqual([
      'auth',
      'attest',
      'one',
      'auth',
      'attest',
      'one',
    ]);
  });

  it('stops after 3 resource attempts on repeated 401s', async () => {
    kbs.override = (r) =>
      r.method === 'GET'
        ? { status: 401, body: errorBody('PolicyDeny', 'Access denied by policy') }
        : undefined;
    const err = await failure(client().getResource('default/key/one'));
    expect(err).toBeInstanceOf(KbsUnauthorized);
    expect((err as KbsUnauthorized).kind).toBe('PolicyDeny');
    expect((err as KbsUnauthorized).status).toBe(401);
    expect(kbs.hits('/kbs/v0/resource/default/key/one')).toHaveLength(3);
    expect(kbs.hits('/kbs/v0/auth')).toHaveLength(3);
  });

  it('does not retry a 404 or other statuses', async () => {
    const c = client();
    // Like trustee, the fake KBS answers a missing resource with 401 PluginInternalError.
    // As the guest components: attest again and retry, 3 GETs in all (a storage failure may pass).
    const missing = await failure(c.getResource('default/x/y'));
    expect(missing).toBeInstanceOf(KbsUnauthorized);
    expect(missing).not.toBeInstanceOf(KbsResourceMissing);
    expect((missing as KbsUnauthorized).kind).toBe('PluginInternalError');
    expect(kbs.hits('/kbs/v0/resource/default/x/y')).toHaveLength(3);
    // missingResourceIsFinal (the kbs-client command): one GET, no new handshake.
    const once = client({ missingResourceIsFinal: true });
    const authsBefore = kbs.hits('/kbs/v0/auth').length;
    const final = await failure(once.getResource('default/x/z'));
    expect(final).toBeInstanceOf(KbsResourceMissing);
    expect(final).toBeInstanceOf(KbsUnauthorized);
    expect((final as KbsResourceMissing).code).toBe('RESOURCE_NOT_FOUND');
    expect(kbs.hits('/kbs/v0/resource/default/x/z')).toHaveLength(1);
    expect(kbs.hits('/kbs/v0/auth')).toHaveLength(authsBefore + 1);
    kbs.override = (r) =>
      r.method === 'GET'
        ? { status: 404, body: errorBody('InvalidRequestPath', 'Request path x is invalid') }
        : undefined;
    const err = await failure(c.getResource('default/key/one'));
    expect(err).toBeInstanceOf(KbsResourceNotFound);
    expect((err as KbsResourceNotFound).kind).toBe('InvalidRequestPath');
    kbs.override = (r) => (r.method === 'GET' ? { status: 503, body: 'busy' } : undefined);
    const other = await failure(c.getResource('default/key/one'));
    expect(other).toBeInstanceOf(KbsRejected);
    expect(other).not.toBeInstanceOf(KbsUnauthorized);
    expect((other as KbsRejected).detail).toBe('busy');
  });
});

describe('passport mode (Bearer)', () => {
  async function tokenFor(key: TeeKeyPair): Promise<string> {
    // Attest once with that key to make the fake KBS know the token.
    const c = client({ teeKeyPair: key });
    const { token } = await c.getToken();
    kbs.requests.length = 0;
    return token;
  }

  it('sends the token as Bearer without a handshake', async () => {
    const key = TeeKeyPair.generate();
    const token = await tokenFor(key);
    const c = new KbsClient({ url: kbs.url, token, teeKeyPair: key });
    clients.push(c);
    expect(c.mode).toBe('passport');
    expect(await c.getResource('default/key/one')).toEqual(SECRET);
    expect(kbs.requests).toHaveLength(1);
    expect(kbs.requests[0]!.headers.authorization).toBe(`Bearer ${token}`);
    expect(kbs.requests[0]!.headers.cookie).toBeUndefined();
  });

  it('fails at once when a fixed token is refused', async () => {
    const c = new KbsClient({
      url: kbs.url,
      token: fakeToken({ exp: 1 }),
      teeKeyPair: TeeKeyPair.generate(),
    });
    clients.push(c);
    const err = await failure(c.getResource('default/key/one'));
    expect(err).toBeInstanceOf(KbsUnauthorized);
    expect((err as KbsUnauthorized).kind).toBe('TokenNotFound');
    expect(kbs.requests).toHaveLength(1);
  });

  it('asks the provider for a new token after a 401', async () => {
    const key = TeeKeyPair.generate();
    const good = await tokenFor(key);
    const handed: string[] = [];
    const tokens = [fakeToken({ exp: 4102444800 }), good];
    const c = new KbsClient({
      url: kbs.url,
      tokenProvider: {
        async getToken() {
          const token = tokens.shift() as string;
          handed.push(token);
          return { token, teeKeyPair: key };
        },
      },
    });
    clients.push(c);
    expect(await c.getResource('default/key/one')).toEqual(SECRET);
    expect(handed).toHaveLength(2);
    expect(kbs.requests.map((r) => r.headers.authorization)).toEqual(handed.map((t) => `Bearer ${t}`));
  });

  it('shares one provider call between concurrent refusals and renews an expired token before use', async () => {
    const key = TeeKeyPair.generate();
    const good = await tokenFor(key);
    let calls = 0;
    let now = Date.now();
    const c = new KbsClient({
      url: kbs.url,
      now: () => now,
      tokenProvider: {
        async getToken() {
          calls++;
          return {
            token: calls === 1 ? fakeToken({ exp: Math.floor(now / 1000) + 60 }) : good,
            teeKeyPair: key,
          };
        },
      },
    });
    clients.push(c);
    const results = await Promise.all(Array.from({ length: 4 }, () => c.getResource('default/key/one')));
    expect(results.every((r) => r.equals(SECRET))).toBe(true);
    expect(calls).toBe(2);

    now += 10 * 365 * 86_400_000; // past the fake KBS token's exp: renewed before the GET, no 401
    expect(await c.getResource('default/key/one')).toEqual(SECRET);
    expect(calls).toBe(3);
  });

  it('needs the key that the token certifies', () => {
    expect(() => new KbsClient({ url: kbs.url, token: fakeToken({}) })).toThrow(TypeError);
    expect(() => new KbsClient({ url: kbs.url })).toThrow(TypeError);
  });
});

describe('hostile KBS responses', () => {
  it('refuses an oversize resource response', async () => {
    kbs.resources.set('big/blob/x', Buffer.alloc(64 * 1024));
    const err = await failure(client({ maxResponseBytes: 8 * 1024 }).getResource('big/blob/x'));
    expect(err).toBeInstanceOf(KbsBadResponse);
    expect(err.message).toMatch(/larger than 8192 bytes/);
  });

  it('refuses an oversize streamed (chunked) response', async () => {
    const huge = await new FakeKbs((h) =>
      http.createServer((req, res) => {
        if (req.method === 'GET') {
          res.writeHead(200, { 'transfer-encoding': 'chunked' });
          for (let i = 0; i < 100; i++) res.write(Buffer.alloc(1024, 0x20));
          res.end();
          return;
        }
        h(req, res);
      }),
    ).start();
    try {
      const c = new KbsClient({ url: huge.url, attester: new SampleAttester(), maxResponseBytes: 4096 });
      clients.push(c);
      const err = await failure(c.getResource('a/b/c'));
      expect(err).toBeInstanceOf(KbsBadResponse);
    } finally {
      await huge.stop();
    }
  });

  it('reports a challenge that is not JSON or lacks a nonce', async () => {
    kbs.override = (r) => (r.url === '/kbs/v0/auth' ? { status: 200, body: '<html>' } : undefined);
    let err = await failure(client().getToken());
    expect(err).toBeInstanceOf(RcarHandshakeFailed);
    expect(err.cause).toBeInstanceOf(KbsBadResponse);
    expect((err.cause as Error).message).toMatch(/auth: response is not valid JSON/);

    kbs.override = (r) =>
      r.url === '/kbs/v0/auth' ? { status: 200, body: '{"extra-params":""}' } : undefined;
    err = await failure(client().getToken());
    expect((err.cause as Error).message).toMatch(/bad challenge: nonce: must be a string/);
  });

  it('reports an attest response without a usable token', async () => {
    kbs.override = (r) => (r.url === '/kbs/v0/attest' ? { status: 200, body: '{"tok":1}' } : undefined);
    let err = await failure(client().getToken());
    expect(err.cause).toBeInstanceOf(KbsBadResponse);
    kbs.override = (r) =>
      r.url === '/kbs/v0/attest' ? { status: 200, body: '{"token":"not-a-jwt"}' } : undefined;
    err = await failure(client().getToken());
    expect(err.cause).toBeInstanceOf(InvalidToken);
  });

  it('reports a resource body that is not a JWE for this key', async () => {
    const c = client();
    kbs.override = (r) => (r.method === 'GET' ? { status: 200, body: 'garbage' } : undefined);
    expect(await failure(c.getResource('default/key/one'))).toBeInstanceOf(KbsBadResponse);

    kbs.override = (r) =>
      r.method === 'GET' ? { status: 200, body: '{"protected":"e30","iv":"","tag":""}' } : undefined;
    expect(await failure(c.getResource('default/key/one'))).toBeInstanceOf(ResourceDecryptionFailed);

    const other = TeeKeyPair.generate();
    kbs.override = (r) =>
      r.method === 'GET'
        ? { status: 200, body: JSON.stringify(jweEncrypt(SECRET, other.publicJwk)) }
        : undefined;
    const err = await failure(c.getResource('default/key/one'));
    expect(err).toBeInstanceOf(ResourceDecryptionFailed);

    kbs.override = (r) => {
      if (r.method !== 'GET') return undefined;
      const jwe = jweEncrypt(SECRET, c.teeKeyPair.publicJwk);
      const ct = Buffer.from(jwe.ciphertext, 'base64url');
      ct[0] = (ct[0] ?? 0) ^ 1;
      return { status: 200, body: JSON.stringify({ ...jwe, ciphertext: ct.toString('base64url') }) };
    };
    expect(await failure(c.getResource('default/key/one'))).toBeInstanceOf(ResourceDecryptionFailed);
  });

  it('keeps a printable excerpt of a non-KBS error body', async () => {
    kbs.override = (r) =>
      r.method === 'GET' ? { status: 500, body: `oops\x00\x1b[31m${'x'.repeat(2000)}` } : undefined;
    const err = (await failure(client().getResource('default/key/one'))) as KbsRejected;
    expect(err.type).toBeNull();
    expect(err.kind).toBeNull();
    expect(err.detail.startsWith('oops??[31m')).toBe(true);
    expect(err.detail.length).toBeLessThan(600);
  });

  it('neutralises control characters and caps the detail of a KBS error body', async () => {
    kbs.override = (r) =>
      r.method === 'GET'
        ? { status: 401, body: errorBody('PolicyDeny', `\x1b]0;pwned\x07${'d'.repeat(10_000)}`) }
        : undefined;
    const err = (await failure(client().getResource('default/key/one'))) as KbsUnauthorized;
    expect(err.kind).toBe('PolicyDeny');
    expect(err.detail.startsWith('?]0;pwned?ddd')).toBe(true);
    expect(err.detail.length).toBeLessThanOrEqual(2049);
  });

  it('rejects a hash algorithm it does not know', () => {
    expect(selectedHashAlgorithm('')).toBe('sha384');
    expect(selectedHashAlgorithm({})).toBe('sha384');
    expect(selectedHashAlgorithm({ 'selected-hash-algorithm': 'Sha256' })).toBe('sha256');
    expect(selectedHashAlgorithm({ 'selected-hash-algorithm': 'sm3' })).toBe('sm3');
    expect(() => selectedHashAlgorithm({ 'selected-hash-algorithm': 'md5' })).toThrow(InvalidHashAlgorithm);
    expect(() => selectedHashAlgorithm({ 'selected-hash-algorithm': '' })).toThrow(InvalidHashAlgorithm);
    expect(() => selectedHashAlgorithm({ 'selected-hash-algorithm': 42 })).toThrow(/expected string, got 42/);
    expect(() => selectedHashAlgorithm({ 'selected-hash-algorithm': null })).toThrow(InvalidHashAlgorithm);
  });

  it('times out a KBS that never answers', async () => {
    const sockets = new Set<import('node:net').Socket>();
    const silent = http.createServer(() => {});
    silent.on('connection', (s) => sockets.add(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const c = new KbsClient({ url, attester: new SampleAttester(), timeoutMs: 50, sleep: async () => {} });
      clients.push(c);
      const err = await failure(c.getToken());
      expect(err.cause).toBeInstanceOf(KbsUnreachable);
      expect((err.cause as Error).message).toMatch(/no complete response within 50 ms/);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });

  it('keeps its connection for the requests after the handshake', async () => {
    const c = client();
    expect(await c.getResource('default/key/one')).toEqual(SECRET);
    const afterHandshake = kbs.connections;
    for (let i = 0; i < 3; i++) expect(await c.getResource('default/key/one')).toEqual(SECRET);
    expect(kbs.hits('/kbs/v0/resource/default/key/one')).toHaveLength(4);
    expect(kbs.connections).toBe(afterHandshake);
    // A connection the KBS closed while idle is replaced on the next request.
    kbs.dropIdleConnections();
    await new Promise((r) => setTimeout(r, 20));
    expect(await c.getResource('default/key/one')).toEqual(SECRET);
    expect(kbs.connections).toBe(afterHandshake + 1);
  });

  it('does not follow a redirect', async () => {
    const elsewhere = await new FakeKbs().start();
    elsewhere.resources.set('default/key/one', SECRET);
    try {
      const token = fakeToken({ exp: Math.floor(Date.now() / 1000) + 300 });
      const teeKeyPair = TeeKeyPair.generate();
      kbs.override = (r) =>
        r.method === 'GET'
          ? { status: 302, headers: { location: `${elsewhere.url}${r.url}` }, body: '' }
          : undefined;
      const c = client({ attester: undefined, token, teeKeyPair } as Partial<KbsClientOptions>);
      const err = (await failure(c.getResource('default/key/one'))) as KbsRejected;
      expect(err).toBeInstanceOf(KbsRejected);
      expect(err.status).toBe(302);
      expect(elsewhere.requests).toEqual([]);
    } finally {
      await elsewhere.stop();
    }
  });

  it('reports a refused connection as unreachable', async () => {
    const url = kbs.url;
    await kbs.stop();
    kbs = await new FakeKbs().start(); // keep afterEach happy
    const c = new KbsClient({ url, attester: new SampleAttester(), sleep: async () => {} });
    clients.push(c);
    const err = await failure(c.getToken());
    expect(err.cause).toBeInstanceOf(KbsUnreachable);
  });
});

describe('evidence', () => {
  it('wraps attester failures', async () => {
    const broken: Attester = {
      tee: 'sample',
      getEvidence: async () => {
        throw new Error('device gone');
      },
    };
    const err = await failure(client({ attester: broken }).getToken());
    expect(err.cause).toBeInstanceOf(EvidenceFailed);
    expect((err.cause as Error).message).toBe('get evidence from the sample attester failed: device gone');
    expect(kbs.hits('/kbs/v0/attest')).toHaveLength(0);
  });

  it('names an attester that returns nothing with a KbsClientError, code EVIDENCE_FAILED', async () => {
    const empty: Attester = { tee: 'sample', getEvidence: async () => undefined };
    const err = await failure(client({ attester: empty }).getToken());
    const inner = (err.cause as Error).cause;
    expect(inner).toBeInstanceOf(KbsClientError);
    expect((inner as KbsClientError).code).toBe('EVIDENCE_FAILED');
    expect((inner as Error).message).toBe('the attester returned no evidence');
  });

  it('hands the attester the raw digest', async () => {
    const seen: Uint8Array[] = [];
    const spy: Attester = {
      tee: 'sample',
      getEvidence: async (rd) => {
        seen.push(rd);
        return new SampleAttester().getEvidence(rd);
      },
    };
    const c = client({ attester: spy });
    await c.getToken();
    const body = json(kbs.hits('/kbs/v0/attest')[0]!.body);
    const nonce = (body['runtime-data'] as { nonce: string }).nonce;
    const expected = createHash('sha384')
      .update(
        JSON.stringify({ 'additional-evidence': '', nonce, 'tee-pubkey': sortedJwk(c.teeKeyPair.publicJwk) }),
      )
      .digest();
    expect(seen).toHaveLength(1);
    expect(Buffer.from(seen[0]!).equals(expected)).toBe(true);
  });
});

describe('resourceRequestPath', () => {
  it('accepts paths, kbs URIs (host ignored, query kept) and objects', () => {
    expect(resourceRequestPath('a/b/c')).toBe('/kbs/v0/resource/a/b/c');
    expect(resourceRequestPath('kbs:///a/b/c')).toBe('/kbs/v0/resource/a/b/c');
    expect(resourceRequestPath('kbs://other.example:9/a/b/c?v=1')).toBe('/kbs/v0/resource/a/b/c?v=1');
    expect(resourceRequestPath({ repository: 'a', type: 'b', tag: 'c' })).toBe('/kbs/v0/resource/a/b/c');
  });

  it("maps kbs+<plugin>:// URIs to the plugin's path, as guest-components does", () => {
    expect(resourceRequestPath('kbs+resource:///a/b/c')).toBe('/kbs/v0/resource/a/b/c');
    expect(resourceRequestPath('kbs+sample:///a/b/c')).toBe('/kbs/v0/sample/a/b/c');
    expect(resourceRequestPath('kbs+nebula-ca://kbs.example:8080/credential?name=n&ip=10.0.0.2%2F24')).toBe(
      '/kbs/v0/nebula-ca/credential?name=n&ip=10.0.0.2%2F24',
    );
    expect(resourceRequestPath({ plugin: 'sample', path: ['x'], query: 'a=1' })).toBe('/kbs/v0/sample/x?a=1');
    expect(resourceRequestPath({ plugin: 'resource', path: ['a', 'b', 'c'] })).toBe('/kbs/v0/resource/a/b/c');
  });

  it('refuses traversal and malformed paths before any request', () => {
    for (const bad of [
      '../b/c',
      'a/b',
      'a/b/c/d',
      'a//c',
      '%2e%2e/b/c',
      'kbs:///a/b/..',
      'kbs+:///a/b/c',
      'kbs+sample:///a/../c',
      'kbs+sample:///',
      'kbs+Sample:///a',
    ]) {
      expect(() => resourceRequestPath(bad)).toThrow(InvalidResourcePath);
    }
    expect(() => resourceRequestPath({ repository: '..', type: 'b', tag: 'c' })).toThrow(InvalidResourcePath);
    expect(() => resourceRequestPath({ plugin: '../admin', path: ['x'] })).toThrow(InvalidResourcePath);
    expect(() => resourceRequestPath({ plugin: 'sample', path: ['..'] })).toThrow(InvalidResourcePath);
  });
});

describe('HTTPS with a custom CA', () => {
  let dir: string;
  let cert: string;
  let key: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kbs-client-tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
    key = readFileSync(join(dir, 'key.pem'), 'utf8');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('trusts the given certificate and refuses without it', async () => {
    const tls = await new FakeKbs((h) => https.createServer({ cert, key }, h)).start('https');
    tls.resources.set('a/b/c', SECRET);
    try {
      const ok = new KbsClient({ url: tls.url, certPem: cert, attester: new SampleAttester() });
      clients.push(ok);
      expect(await ok.getResource('a/b/c')).toEqual(SECRET);

      let pauses = 0;
      const untrusting = new KbsClient({
        url: tls.url,
        attester: new SampleAttester(),
        sleep: async () => {
          pauses++;
        },
      });
      clients.push(untrusting);
      const err = await failure(untrusting.getToken());
      // At once and as it is: never retried (five handshakes cannot make a certificate trusted).
      expect(err).toBeInstanceOf(KbsUntrustedCertificate);
      expect(err).toBeInstanceOf(KbsUnreachable);
      expect((err as KbsUntrustedCertificate).code).toBe('TLS_UNTRUSTED');
      expect(pauses).toBe(0);
      expect(err.message).not.toMatch(/Node\.js|--use-|NODE_/);
      expect(err.message).toMatch(/self.signed|certificate/i);
    } finally {
      await tls.stop();
    }
  });

  it('resumes the TLS session when it connects again', async () => {
    const tls = await new FakeKbs((h) => https.createServer({ cert, key }, h)).start('https');
    tls.resources.set('a/b/c', SECRET);
    try {
      const c = new KbsClient({ url: tls.url, certPem: cert, attester: new SampleAttester() });
      clients.push(c);
      expect(await c.getResource('a/b/c')).toEqual(SECRET);
      const before = tls.tlsResumed.length;
      tls.dropIdleConnections();
      await new Promise((r) => setTimeout(r, 20));
      expect(await c.getResource('a/b/c')).toEqual(SECRET);
      // Only the first connection makes a full handshake.
      expect(tls.tlsResumed).toEqual([false, ...Array(before).fill(true)]);
    } finally {
      await tls.stop();
    }
  });

  it('fails each request, not the constructor, when the certificate does not load', async () => {
    const c = new KbsClient({
      url: 'https://127.0.0.1:1',
      certPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n',
      attester: new SampleAttester(),
      sleep: async () => {},
    });
    clients.push(c);
    const err = await failure(c.getToken());
    expect(err.cause).toBeInstanceOf(KbsUnreachable);
    expect((err.cause as Error).message).toMatch(/^POST https:\/\/127\.0\.0\.1:1\/kbs\/v0\/auth: /);
  });
});
