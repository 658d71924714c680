import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt, JwtExpired, JwtVerificationError, publicKeyFromJwk } from './jws.js';
import { TrustMaterialError } from './sources.js';
import { makeChain, type TestChain } from './testing/pki.js';
import { b64url, publicJwk, signJwt } from './testing/tokens.js';
import { JwtVerifier } from './verifier.js';
import { certificatesFromPem, verifyX5cEndorsement } from './x5c.js';

const FIXTURES = vector('trustee/jwk');
const NOW_MS = Date.UTC(2030, 0, 1);
const NOW = NOW_MS / 1000;
const clock = () => NOW_MS;

const es = () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
let dir: string;
let chain: TestChain;
let otherChain: TestChain;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kbs-jwt-'));
  chain = makeChain(dir, 'a');
  otherChain = makeChain(dir, 'b');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function headerJwkToken(
  key: KeyObject,
  payload: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): string {
  const jwk = { ...publicJwk(key), alg: 'ES256', ...extra };
  return signJwt({ typ: 'JWT', alg: 'ES256', jwk }, payload, key);
}

describe("x5c endorsement (trustee's kbs/test_data/jwk scenarios)", () => {
  it.each([
    ['01', 'leaf issued by a trusted self-signed root', true],
    ['02', 'x5c leaf key differs from the JWK', false],
    ['03', 'no x5c', false],
    ['04', 'issuer not among the trusted certificates', false],
    ['05', 'leaf, intermediate, trusted root', true],
    ['06', 'intermediates out of order, decoy root trusted too', true],
    ['07', 'x5c also carries part of the trust store', true],
  ])('scenario %s: %s', (n, _what, ok) => {
    const jwk = JSON.parse(readFileSync(join(FIXTURES, `scenario${n}-jwk.json`), 'utf8')) as Record<
      string,
      unknown
    >;
    const trusted = certificatesFromPem(
      readFileSync(join(FIXTURES, `scenario${n}-trust.pem`), 'utf8'),
      'trust.pem',
    );
    const check = () =>
      verifyX5cEndorsement(publicKeyFromJwk(jwk), jwk.x5c, trusted, new Date('2027-01-01T00:00:00Z'));
    if (ok) expect(check).not.toThrow();
    else expect(check).toThrow(JwtVerificationError);
  });

  it('refuses a chain outside its validity period', () => {
    const jwk = JSON.parse(readFileSync(join(FIXTURES, 'scenario01-jwk.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    const trusted = certificatesFromPem(
      readFileSync(join(FIXTURES, 'scenario01-trust.pem'), 'utf8'),
      'trust.pem',
    );
    expect(() =>
      verifyX5cEndorsement(publicKeyFromJwk(jwk), jwk.x5c, trusted, new Date('2040-01-01T00:00:00Z')),
    ).toThrow(/not valid at this time/);
  });

  it('refuses garbage in x5c', () => {
    const key = publicKeyFromJwk(publicJwk(es()));
    const trusted = certificatesFromPem(chain.rootPem, 'root');
    expect(() => verifyX5cEndorsement(key, ['%%%'], trusted)).toThrow(/not base64/);
    expect(() => verifyX5cEndorsement(key, ['AAAA'], trusted)).toThrow(/not an X.509/);
    expect(() => verifyX5cEndorsement(key, 'x', trusted)).toThrow(/Empty x5c/);
    expect(() => verifyX5cEndorsement(key, new Array(11).fill(chain.x5c[0]), trusted)).toThrow(
      /more than 10/,
    );
  });
});

describe('JwtVerifier with a header JWK', () => {
  const valid = { exp: NOW + 300, iat: NOW };

  it('insecure mode: accepts a good token and returns its claims', () => {
    const key = es();
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, clock);
    expect(v.verify(headerJwkToken(key, { ...valid, sub: 'x' })).sub).toBe('x');
  });

  it('accepts exp within the 60 s leeway and refuses it beyond', () => {
    const key = es();
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, clock);
    expect(() => v.verify(headerJwkToken(key, { exp: NOW - 60 }))).not.toThrow();
    expect(() => v.verify(headerJwkToken(key, { exp: NOW - 61 }))).toThrow(JwtExpired);
    expect(() => v.verify(headerJwkToken(key, {}))).toThrow(/exp claim is missing/);
    expect(() => v.verify(headerJwkToken(key, { exp: 'tomorrow' }))).toThrow(/not a timestamp/);
  });

  it('refuses a token whose header JWK is not the key that signed it', () => {
    const signer = es();
    const jwk = { ...publicJwk(es()), alg: 'ES256' };
    const token = signJwt({ alg: 'ES256', jwk }, valid, signer);
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, clock);
    expect(() => v.verify(token)).toThrow(/signature does not verify/);
  });

  it.each([
    ['alg none', { alg: 'none' }, /header alg "none" is not allowed/],
    ['HS256', { alg: 'HS256' }, /header alg "HS256" is not allowed/],
    ['no alg', {}, /not allowed/],
  ])('refuses %s', (_what, header, re) => {
    const key = es();
    const jwk = { ...publicJwk(key), alg: 'ES256' };
    const token = `${b64url({ ...header, jwk })}.${b64url(valid)}.`;
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, clock);
    expect(() => v.verify(token)).toThrow(re);
  });

  it('refuses a symmetric header key and a JWK without alg', () => {
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, clock);
    const hs = `${b64url({ alg: 'ES256', jwk: { kty: 'oct', k: 'c2VjcmV0', alg: 'HS256' } })}.${b64url(valid)}.AAAA`;
    expect(() => v.verify(hs)).toThrow(/kty "oct" is not supported/);
    const key = es();
    const noAlg = signJwt({ alg: 'ES256', jwk: publicJwk(key) }, valid, key);
    expect(() => v.verify(noAlg)).toThrow(/Failed to find key_algorithm/);
  });

  it("refuses a header alg other than the key's alg", () => {
    const key = generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey;
    const jwk = { ...publicJwk(key), alg: 'ES256' };
    const token = signJwt({ alg: 'ES384', jwk }, valid, key);
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, clock);
    expect(() => v.verify(token)).toThrow(/does not match/);
  });

  it('secure mode: accepts a key whose x5c reaches a trusted root', () => {
    const v = new JwtVerifier(
      { jwks: [], certs: certificatesFromPem(chain.rootPem, 'root'), pemKeys: [], insecureHeaderJwk: false },
      () => Date.now(),
    );
    const now = Math.floor(Date.now() / 1000);
    const token = headerJwkToken(chain.leafKey, { exp: now + 60 }, { x5c: chain.x5c });
    expect(v.verify(token).exp).toBe(now + 60);
  });

  it('secure mode: refuses a chain from another root, a missing x5c and a JWK swapped under a good x5c', () => {
    const v = new JwtVerifier(
      { jwks: [], certs: certificatesFromPem(chain.rootPem, 'root'), pemKeys: [], insecureHeaderJwk: false },
      () => Date.now(),
    );
    const now = Math.floor(Date.now() / 1000);
    expect(() =>
      v.verify(headerJwkToken(otherChain.leafKey, { exp: now + 60 }, { x5c: otherChain.x5c })),
    ).toThrow(/cannot be validated by trust anchor/);
    expect(() => v.verify(headerJwkToken(chain.leafKey, { exp: now + 60 }))).toThrow(/No x5c/);
    const attacker = es();
    expect(() => v.verify(headerJwkToken(attacker, { exp: now + 60 }, { x5c: chain.x5c }))).toThrow(
      /jwk does not match x5c/,
    );
  });

  it('secure mode without trusted certificates refuses header keys', () => {
    const v = new JwtVerifier(
      {
        jwks: [{ kty: 'EC', kid: 'x', alg: 'ES256', ...publicJwk(es()) }],
        certs: [],
        pemKeys: [],
        insecureHeaderJwk: false,
      },
      clock,
    );
    expect(() => v.verify(headerJwkToken(es(), valid))).toThrow(/trusted cert is empty/);
  });
});

describe('JwtVerifier decode cache', () => {
  it('still checks the signature and expiry of a token whose claims it has seen', () => {
    let now = NOW_MS;
    const key = es();
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, () => now);
    const token = headerJwkToken(key, { exp: NOW + 10, n: 1 });
    const first = v.verify(token);
    expect(Object.isFrozen(first)).toBe(true);
    expect(v.verify(token)).toBe(first);
    const [h, p] = token.split('.');
    const other = signJwt({ alg: 'ES256' }, { x: 1 }, es()).split('.')[2];
    expect(() => v.verify(`${h}.${p}.${other}`)).toThrow(/signature does not verify/);
    expect(() => v.verify(`${h}.${p}.`)).toThrow(/signature/);
    now += 71_000;
    expect(() => v.verify(token)).toThrow(JwtExpired);
  });
});

describe('JwtVerifier verification cache', () => {
  it('checks expiry on every use of a token whose signature it verified', () => {
    let now = NOW_MS;
    const key = es();
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, () => now);
    const token = headerJwkToken(key, { exp: NOW + 5 });
    expect(v.verify(token).exp).toBe(NOW + 5);
    now += 65_000; // exp + leeway reached exactly: still accepted
    expect(v.verify(token).exp).toBe(NOW + 5);
    now += 1_000;
    expect(() => v.verify(token)).toThrow(JwtExpired);
    expect(() => v.verify(token)).toThrow(JwtExpired);
  });

  it('never serves a cached result for a token that differs in any character', () => {
    const key = es();
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, clock);
    const token = headerJwkToken(key, { exp: NOW + 300 });
    v.verify(token);
    // A character inside the signature: the last one may carry only padding bits.
    const i = token.length - 10;
    const other = token[i] === 'A' ? 'B' : 'A';
    expect(() => v.verify(`${token.slice(0, i)}${other}${token.slice(i + 1)}`)).toThrow(JwtVerificationError);
    expect(() => v.verify(`${token}A`)).toThrow(JwtVerificationError);
    expect(() => v.verify(` ${token}`)).toThrow(JwtVerificationError);
  });

  it('does not remember failures: a refused token is checked again', () => {
    let now = NOW_MS;
    const key = es();
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, () => now);
    const token = headerJwkToken(key, { exp: NOW - 120 });
    expect(() => v.verify(token)).toThrow(JwtExpired);
    now -= 120_000;
    expect(v.verify(token).exp).toBe(NOW - 120);
  });

  it('redoes the x5c endorsement once the cached verification is a minute old', () => {
    const certs = certificatesFromPem(chain.rootPem, 'root');
    let now = Date.now();
    const v = new JwtVerifier({ jwks: [], certs, pemKeys: [], insecureHeaderJwk: false }, () => now);
    const exp = Math.floor(now / 1000) + 10 * 365 * 86400;
    const token = headerJwkToken(chain.leafKey, { exp }, { x5c: chain.x5c });
    expect(v.verify(token).exp).toBe(exp);
    // Past the chain's validity (30 days): the cached entry has aged out, the chain is checked and refused.
    now += 40 * 86400 * 1000;
    expect(() => v.verify(token)).toThrow(/validity|expired|not valid/i);
  });
});

describe('JwtVerifier with trusted JWK sets and PEM keys', () => {
  const valid = { exp: NOW + 300 };

  it('finds the key by kid in a JWK set file', async () => {
    const key = es();
    const path = join(dir, 'jwks.json');
    writeFileSync(
      path,
      JSON.stringify({ keys: [{ ...publicJwk(key), kid: 'k1', alg: 'ES256', use: 'sig' }] }),
    );
    const v = await JwtVerifier.create({ trustedJwkSets: [`file://${path}`], now: clock });
    expect(v.verify(signJwt({ alg: 'ES256', kid: 'k1' }, { ...valid, a: 1 }, key)).a).toBe(1);
    expect(() => v.verify(signJwt({ alg: 'ES256', kid: 'k2' }, valid, key))).toThrow(
      /Failed to find Jwk with kid/,
    );
    expect(() => v.verify(signJwt({ alg: 'ES256' }, valid, key))).toThrow(/Failed to decode kid/);
    expect(() => v.verify(signJwt({ alg: 'ES256', kid: 'k1' }, valid, es()))).toThrow(
      /signature does not verify/,
    );
  });

  it('tries PEM keys with the header algorithm when no key is selected', async () => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const ed = generateKeyPairSync('ed25519');
    const ecPath = join(dir, 'ec.pem');
    const edPath = join(dir, 'ed.pem');
    writeFileSync(ecPath, ec.publicKey.export({ type: 'spki', format: 'pem' }));
    writeFileSync(edPath, ed.publicKey.export({ type: 'spki', format: 'pem' }));
    const v = await JwtVerifier.create({ trustedPemKeys: [ecPath, edPath], now: clock });
    expect(v.verify(signJwt({ alg: 'ES256' }, { ...valid, who: 'ec' }, ec.privateKey)).who).toBe('ec');
    expect(v.verify(signJwt({ alg: 'EdDSA' }, { ...valid, who: 'ed' }, ed.privateKey)).who).toBe('ed');
    expect(() => v.verify(signJwt({ alg: 'EdDSA' }, { exp: NOW - 100 }, ed.privateKey))).toThrow(
      /any provided key/,
    );
  });

  it('refuses to start without trust material unless insecure', async () => {
    await expect(JwtVerifier.create({})).rejects.toThrow(TrustMaterialError);
    await expect(JwtVerifier.create({})).rejects.toThrow(/no trusted verification materials/);
    await expect(JwtVerifier.create({ insecureHeaderJwk: true })).resolves.toBeInstanceOf(JwtVerifier);
  });

  it('names a trust source it cannot read or parse', async () => {
    await expect(JwtVerifier.create({ trustedCertsPaths: [join(dir, 'missing.pem')] })).rejects.toThrow(
      /missing\.pem/,
    );
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"nokeys": 1}');
    await expect(JwtVerifier.create({ trustedJwkSets: [bad] })).rejects.toThrow(/no "keys" array/);
    await expect(JwtVerifier.create({ trustedJwkSets: ['ftp://x/jwks'] })).rejects.toThrow(
      /unsupported scheme/,
    );
  });
});

describe('decodeJwt on hostile input', () => {
  it.each([
    ['empty', ''],
    ['two parts', 'a.b'],
    ['four parts', 'a.b.c.d'],
    ['bad base64 header', '!!.e30.AA'],
    ['header not JSON', `${b64url('nope')}.e30.AA`],
    ['header an array', `${b64url([1])}.e30.AA`],
    ['payload not an object', `${b64url({ alg: 'ES256' })}.${b64url('1')}.AA`],
    ['too long', `${'a'.repeat(200_000)}.e30.AA`],
  ])('%s', (_what, token) => {
    expect(() => decodeJwt(token)).toThrow(JwtVerificationError);
  });

  it('refuses an ES256 signature of the wrong length', () => {
    const key = es();
    const good = headerJwkToken(key, { exp: NOW + 10 });
    const v = new JwtVerifier({ jwks: [], certs: [], pemKeys: [], insecureHeaderJwk: true }, clock);
    const [h, p] = good.split('.');
    expect(() => v.verify(`${h}.${p}.${Buffer.alloc(63).toString('base64url')}`)).toThrow(/signature/);
  });
});
