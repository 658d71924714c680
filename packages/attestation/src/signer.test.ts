import { execFileSync } from 'node:child_process';
import { createPublicKey, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@broker/cli';
import { decodeProtectedHeader, importJWK, jwtVerify } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadSigner } from './signer.js';

let dir: string;
const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] });

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'broker-signer-'));
  // A CA and a leaf certificate for the token key, the way an operator would make them.
  openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', join(dir, 'sec1.key'));
  openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', join(dir, 'ca.key'));
  openssl(
    'req',
    '-x509',
    '-new',
    '-key',
    join(dir, 'ca.key'),
    '-subj',
    '/CN=test CA',
    '-days',
    '2',
    '-out',
    join(dir, 'ca.pem'),
  );
  openssl(
    'req',
    '-new',
    '-key',
    join(dir, 'sec1.key'),
    '-subj',
    '/CN=token signer',
    '-out',
    join(dir, 'leaf.csr'),
  );
  openssl(
    'x509',
    '-req',
    '-in',
    join(dir, 'leaf.csr'),
    '-CA',
    join(dir, 'ca.pem'),
    '-CAkey',
    join(dir, 'ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    join(dir, 'leaf.pem'),
  );
  writeFileSync(
    join(dir, 'chain.pem'),
    readFileSync(join(dir, 'leaf.pem'), 'utf8') + readFileSync(join(dir, 'ca.pem'), 'utf8'),
  );
  openssl(
    'genpkey',
    '-algorithm',
    'EC',
    '-pkeyopt',
    'ec_paramgen_curve:P-384',
    '-out',
    join(dir, 'p384.key'),
  );
  openssl('genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', join(dir, 'rsa.key'));
  writeFileSync(join(dir, 'garbage.pem'), 'not a key');
  writeFileSync(join(dir, 'nocert.pem'), 'nothing here');
});

async function configError(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('EAR token signer', () => {
  it('signs with an ephemeral P-256 key when none is configured; header jwk verifies, no x5c', async () => {
    const s = await loadSigner(undefined);
    expect(Object.keys(s.publicJwk)).toEqual(['alg', 'kty', 'crv', 'x', 'y']);
    expect(s.certChainPem).toBeUndefined();
    const jwt = s.signJwt('{"a":1}');
    expect(decodeProtectedHeader(jwt)).toEqual({ typ: 'JWT', alg: 'ES256', jwk: s.publicJwk });
    const { payload } = await jwtVerify(jwt, await importJWK(s.publicJwk, 'ES256'));
    expect(payload).toEqual({ a: 1 });
    // Each start gets its own key.
    expect((await loadSigner(undefined)).publicJwk.x).not.toBe(s.publicJwk.x);
  });

  it('loads a SEC1 P-256 key with its chain: x5c is the std-b64 DER chain, leaf first', async () => {
    const s = await loadSigner({
      keyPath: join(dir, 'sec1.key'),
      certPath: join(dir, 'chain.pem'),
      certUrl: 'https://example.com/chain.pem',
    });
    expect(Object.keys(s.publicJwk)).toEqual(['alg', 'x5u', 'x5c', 'kty', 'crv', 'x', 'y']);
    const leaf = new X509Certificate(readFileSync(join(dir, 'leaf.pem')));
    const ca = new X509Certificate(readFileSync(join(dir, 'ca.pem')));
    expect(s.publicJwk.x5c).toEqual([leaf.raw.toString('base64'), ca.raw.toString('base64')]);
    expect(s.publicJwk.x5u).toBe('https://example.com/chain.pem');
    expect(s.certChainPem).toBe(readFileSync(join(dir, 'chain.pem'), 'utf8'));
    const jwt = s.signJwt('{"b":2}');
    const { payload } = await jwtVerify(jwt, leaf.publicKey);
    expect(payload).toEqual({ b: 2 });
    expect(createPublicKey({ key: s.publicJwk, format: 'jwk' }).equals(leaf.publicKey)).toBe(true);
  });

  it('loads a PKCS#8 key', async () => {
    const s = await loadSigner({ keyPath: join(dir, 'ca.key') });
    expect(s.publicJwk.crv).toBe('P-256');
  });

  it('refuses a chain whose leaf is not the signing key', async () => {
    expect(
      await configError(loadSigner({ keyPath: join(dir, 'ca.key'), certPath: join(dir, 'chain.pem') })),
    ).toContain('cert_path');
  });

  it.each([
    ['a P-384 key', 'p384.key', 'P-256'],
    ['an RSA key', 'rsa.key', 'P-256'],
    ['a file that is no key', 'garbage.pem', 'not a PEM private key'],
    ['a missing file', 'missing.pem', 'cannot read'],
  ])('refuses %s', async (_name, file, text) => {
    expect(await configError(loadSigner({ keyPath: join(dir, file) }))).toContain(text);
  });

  it('refuses a certificate file without certificates', async () => {
    expect(
      await configError(loadSigner({ keyPath: join(dir, 'sec1.key'), certPath: join(dir, 'nocert.pem') })),
    ).toContain('no PEM certificate');
  });
});
