// Issue 14, defect 1: the verifier's caches hold nothing from a token whose signature does not verify, and
// what they hold for verified tokens is bounded by bytes as well as entries.
import { generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JwtVerificationError } from './jws.js';
import { makeChain, type TestChain } from './testing/pki.js';
import { b64url, publicJwk, signJwt } from './testing/tokens.js';
import { JwtVerifier } from './verifier.js';
import { certificatesFromPem } from './x5c.js';

const es = () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
let dir: string;
let chain: TestChain;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kbs-jwt-cache-'));
  chain = makeChain(dir, 'a');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const nowSeconds = () => Math.floor(Date.now() / 1000);

const padCache = new Map<number, string>();
/** JSON of many small members, about `chars` long; built once per size. */
function padJson(chars: number): string {
  let pad = padCache.get(chars);
  if (pad === undefined) {
    const o: Record<string, number> = {};
    for (let i = 0; i * 16 < chars; i++) o[`k${i}`] = i;
    pad = JSON.stringify(o);
    padCache.set(chars, pad);
  }
  return pad;
}

/**
 * A token of about `size` characters that parses (header and payload are JSON objects) and whose
 * signature is 64 zero bytes: what an attacker without a trusted key can send. Every call gives a
 * different token. The payload is many small members, whose parsed form takes several times the token's
 * own size.
 */
export function bogusToken(header: Record<string, unknown>, size: number): string {
  const payload = `{"exp":${nowSeconds() + 3600},"nonce":"${randomBytes(8).toString('hex')}","pad":${padJson((size * 3) / 4)}}`;
  return `${b64url(header)}.${Buffer.from(payload).toString('base64url')}.${Buffer.alloc(64).toString('base64url')}`;
}

function headerJwk(key: KeyObject, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...publicJwk(key), alg: 'ES256', ...extra };
}

describe('JwtVerifier caches and unauthenticated tokens', () => {
  it('keeps nothing from 300 unique 120 KB tokens with a bogus signature, in any trust mode', () => {
    const signer = es();
    const certs = certificatesFromPem(chain.rootPem, 'root');
    const jwks = [{ ...headerJwk(signer), kty: 'EC', kid: 'as' }];
    const verifiers = {
      insecure: new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }),
      x5c: new JwtVerifier({ jwks: [], certs, pemKeys: [], insecureHeaderJwk: false }),
      kid: new JwtVerifier({ jwks, certs: [], pemKeys: [], insecureHeaderJwk: false }),
    };
    const headers = {
      // A usable header key (insecure mode takes any), a key endorsed by the trusted chain, a known kid.
      insecure: () => ({ alg: 'ES256', jwk: headerJwk(es()) }),
      x5c: () => ({ alg: 'ES256', jwk: headerJwk(chain.leafKey, { x5c: chain.x5c }) }),
      kid: () => ({ alg: 'ES256', kid: 'as' }),
    };
    for (const [mode, v] of Object.entries(verifiers)) {
      const header = headers[mode as keyof typeof headers];
      for (let i = 0; i < 100; i++) {
        const token = bogusToken(header(), 120 * 1024);
        expect(() => v.verify(token), mode).toThrow(JwtVerificationError);
      }
      expect(v.cacheUsage, mode).toEqual({
        verified: { entries: 0, bytes: 0 },
        headerKeys: { entries: 0, bytes: 0 },
      });
    }
  });

  it('caches a header key only once a token signed by it verified', () => {
    const certs = certificatesFromPem(chain.rootPem, 'root');
    const v = new JwtVerifier({ jwks: [], certs, pemKeys: [], insecureHeaderJwk: false });
    const jwk = headerJwk(chain.leafKey, { x5c: chain.x5c });
    // The endorsed key with padding members: each JSON is a different cache id.
    for (let i = 0; i < 20; i++) {
      const token = bogusToken(
        { alg: 'ES256', jwk: { ...jwk, pad: randomBytes(512).toString('hex') } },
        1024,
      );
      expect(() => v.verify(token)).toThrow(/signature does not verify/);
    }
    expect(v.cacheUsage.headerKeys.entries).toBe(0);
    const good = signJwt({ alg: 'ES256', jwk }, { exp: nowSeconds() + 60 }, chain.leafKey);
    v.verify(good);
    expect(v.cacheUsage.headerKeys.entries).toBe(1);
    expect(v.cacheUsage.verified.entries).toBe(1);
  });

  it('bounds the verified tokens by bytes as well as entries', () => {
    const key = es();
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true });
    const pad = 'p'.repeat(11 * 1024);
    let last = '';
    for (let i = 0; i < 1200; i++) {
      last = signJwt({ alg: 'ES256', jwk: headerJwk(key) }, { exp: nowSeconds() + 600, i, pad }, key);
      v.verify(last);
    }
    const { verified } = v.cacheUsage;
    expect(last.length).toBeGreaterThan(15_000);
    expect(verified.bytes).toBeLessThanOrEqual(32 * 1024 * 1024);
    expect(verified.entries).toBeLessThan(1200);
    expect(verified.entries).toBeGreaterThan(100);
    // The newest is still served from the cache (the same frozen claims object).
    expect(v.verify(last)).toBe(v.verify(last));
    expect(Object.isFrozen(v.verify(last))).toBe(true);
  });
});

describe('admin tokens go through the same verifier', () => {
  it('keeps nothing from unique 120 KB bogus admin tokens', async () => {
    const { createAdminAuthorizer } = await import('./admin.js');
    const idp = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = join(dir, 'idp.pem');
    writeFileSync(pem, idp.publicKey.export({ type: 'spki', format: 'pem' }));
    const jwks = join(dir, 'idp.jwks');
    writeFileSync(jwks, JSON.stringify({ keys: [{ ...headerJwk(idp.privateKey), kid: 'idp' }] }));
    const a = await createAdminAuthorizer({
      mode: 'AuthenticatedAuthorization',
      identityProviders: [{ publicKeyUri: pem }, { jwkSetUri: `file://${jwks}` }],
      acls: [{ role: 'admin', allowedEndpoints: '^/kbs/v0/.+$' }],
    });
    const path = '/kbs/v0/resource-policy';
    for (let i = 0; i < 100; i++) {
      const header = i % 2 === 0 ? { alg: 'ES256' } : { alg: 'ES256', kid: 'idp' };
      const authorization = `Bearer ${bogusToken(header, 120 * 1024)}`;
      expect(() => a.check({ authorization, path })).toThrow(/Cannot verify token/);
    }
    expect(a.cacheUsage?.()).toEqual({ entries: 0, bytes: 0 });
    const good = signJwt({ alg: 'ES256' }, { exp: nowSeconds() + 60, role: 'admin' }, idp.privateKey);
    expect(a.check({ authorization: `Bearer ${good}`, path }).principal).toBe('admin');
    expect(a.cacheUsage?.().entries).toBe(1);
  });
});
