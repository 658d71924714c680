import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AdminAccessDenied,
  type AdminConfig,
  AdminError,
  bearerToken,
  createAdminAuthorizer,
} from './admin.js';
import { publicJwk, signJwt } from './testing/tokens.js';

const NOW = 2_000_000_000;
const clock = () => NOW * 1000;
let dir: string;
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ed = generateKeyPairSync('ed25519');
const jwksKey = generateKeyPairSync('ec', { namedCurve: 'P-256' });

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kbs-admin-'));
  for (const [name, k] of [
    ['ec', ec],
    ['rsa', rsa],
    ['ed', ed],
  ] as const) {
    writeFileSync(join(dir, `${name}.pem`), k.publicKey.export({ type: 'spki', format: 'pem' }));
  }
  writeFileSync(
    join(dir, 'jwks.json'),
    JSON.stringify({ keys: [{ ...publicJwk(jwksKey.privateKey), kid: 'idp', alg: 'ES256' }] }),
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function config(overrides: Partial<{ issuer: string; audience: string }> = {}): AdminConfig {
  return {
    mode: 'AuthenticatedAuthorization',
    identityProviders: [
      { publicKeyUri: join(dir, 'ec.pem'), ...overrides },
      { publicKeyUri: `file://${join(dir, 'rsa.pem')}`, ...overrides },
      { publicKeyUri: join(dir, 'ed.pem'), ...overrides },
      { jwkSetUri: `file://${join(dir, 'jwks.json')}`, ...overrides },
    ],
    acls: [
      { role: 'resource-admin', allowedEndpoints: '^/kbs/v0/resource/.+$' },
      { role: 'policy-admin', allowedEndpoints: '^/kbs/v0/(resource|attestation)-policy$' },
    ],
  };
}

const claims = (extra: Record<string, unknown> = {}) => ({ exp: NOW + 60, role: 'resource-admin', ...extra });
const uri = '/kbs/v0/resource/default/key/1';

describe('bearerToken', () => {
  it.each([
    ['Bearer abc', 'abc'],
    ['Bearer ', ''],
    ['bearer abc', undefined],
    ['Basic abc', undefined],
    ['Bearer', undefined],
    [undefined, undefined],
  ])('%j', (h, want) => {
    expect(bearerToken(h)).toBe(want);
  });
});

describe('admin authorization modes', () => {
  it('InsecureAllowAll lets everyone in; DenyAll nobody', async () => {
    const allow = await createAdminAuthorizer({ mode: 'InsecureAllowAll' });
    expect(allow.check({ authorization: undefined, path: uri })).toEqual({ principal: 'insecure' });
    const deny = await createAdminAuthorizer({ mode: 'DenyAll' });
    expect(() => deny.check({ authorization: 'Bearer x', path: uri })).toThrow(
      'Admin access denied: Admin access denied as DenyAll authorization_mode is enabled',
    );
  });
});

describe('AuthenticatedAuthorization', () => {
  it.each([
    ['ES256 with a P-256 PEM key', { alg: 'ES256' }, ec.privateKey],
    ['RS256 with an RSA PEM key', { alg: 'RS256' }, rsa.privateKey],
    ['EdDSA with an Ed25519 PEM key', { alg: 'EdDSA' }, ed.privateKey],
    ['ES256 with a JWKS key by kid', { alg: 'ES256', kid: 'idp' }, jwksKey.privateKey],
  ])('accepts %s', async (_what, header, key) => {
    const a = await createAdminAuthorizer(config(), clock);
    expect(a.check({ authorization: `Bearer ${signJwt(header, claims(), key)}`, path: uri })).toEqual({
      principal: 'resource-admin',
    });
  });

  it.each([
    ['an RSA key with an ES256 header', { alg: 'ES256' }, rsa.privateKey],
    ['a P-256 key with an ES384 header', { alg: 'ES384' }, ec.privateKey],
    ['an unknown key', { alg: 'ES256' }, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey],
  ])('refuses %s', async (_what, header, key) => {
    const a = await createAdminAuthorizer(config(), clock);
    expect(() => a.check({ authorization: `Bearer ${signJwt(header, claims(), key)}`, path: uri })).toThrow(
      'Cannot verify token with any of the issuers',
    );
  });

  it('requires exp, refuses expiry beyond the leeway, and requires the role claim', async () => {
    const a = await createAdminAuthorizer(config(), clock);
    const tok = (c: Record<string, unknown>) => `Bearer ${signJwt({ alg: 'ES256' }, c, ec.privateKey)}`;
    expect(() => a.check({ authorization: tok({ role: 'resource-admin' }), path: uri })).toThrow(
      /any of the issuers/,
    );
    expect(() => a.check({ authorization: tok(claims({ exp: NOW - 61 })), path: uri })).toThrow(
      /any of the issuers/,
    );
    expect(() => a.check({ authorization: tok({ exp: NOW + 60 }), path: uri })).toThrow(
      'Missing required `role` claim in JWT',
    );
    expect(() => a.check({ authorization: tok(claims({ role: 7 })), path: uri })).toThrow(AdminAccessDenied);
  });

  it('checks iss and aud only when configured', async () => {
    const a = await createAdminAuthorizer(config({ issuer: 'idp-1', audience: 'kbs' }), clock);
    const tok = (c: Record<string, unknown>) => `Bearer ${signJwt({ alg: 'ES256' }, c, ec.privateKey)}`;
    expect(
      a.check({ authorization: tok(claims({ iss: 'idp-1', aud: ['x', 'kbs'] })), path: uri }).principal,
    ).toBe('resource-admin');
    expect(() => a.check({ authorization: tok(claims({ iss: 'idp-2', aud: 'kbs' })), path: uri })).toThrow(
      /any of the issuers/,
    );
    expect(() => a.check({ authorization: tok(claims({ iss: 'idp-1', aud: 'other' })), path: uri })).toThrow(
      /any of the issuers/,
    );
    expect(() => a.check({ authorization: tok(claims({ iss: 'idp-1' })), path: uri })).toThrow(
      /any of the issuers/,
    );
  });

  it('matches the anchored ACL regex against the routed path, per role', async () => {
    const a = await createAdminAuthorizer(config(), clock);
    const res = `Bearer ${signJwt({ alg: 'ES256' }, claims(), ec.privateKey)}`;
    const pol = `Bearer ${signJwt({ alg: 'ES256' }, claims({ role: 'policy-admin' }), ec.privateKey)}`;
    expect(() => a.check({ authorization: res, path: '/kbs/v0/resource-policy' })).toThrow(
      'Admin access denied: Role resource-admin not allowed for path /kbs/v0/resource-policy',
    );
    expect(a.check({ authorization: pol, path: '/kbs/v0/resource-policy' }).principal).toBe('policy-admin');
    expect(() => a.check({ authorization: pol, path: '/kbs/v0/resource/a/b/c' })).toThrow(/not allowed/);
    const other = `Bearer ${signJwt({ alg: 'ES256' }, claims({ role: 'nobody' }), ec.privateKey)}`;
    expect(() => a.check({ authorization: other, path: uri })).toThrow(/Role nobody not allowed/);
  });

  it('needs a Bearer header', async () => {
    const a = await createAdminAuthorizer(config(), clock);
    expect(() => a.check({ authorization: undefined, path: uri })).toThrow(
      'Failed to parse HTTP Auth Bearer header',
    );
    expect(() => a.check({ authorization: 'Basic Zm9vOmJhcg==', path: uri })).toThrow(AdminError);
  });

  it('refuses to start when an identity provider key cannot be read', async () => {
    await expect(
      createAdminAuthorizer({
        mode: 'AuthenticatedAuthorization',
        identityProviders: [{ publicKeyUri: join(dir, 'nope.pem') }],
        acls: [],
      }),
    ).rejects.toThrow(/identity_providers\[0\].*nope\.pem/);
  });
});
