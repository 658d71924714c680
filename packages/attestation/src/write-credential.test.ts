// The admin JWTs the KBS signs for a remote attestation service or RVPS must pass the check those
// services make (the KBS admin API's, role admin), whatever kind of key the operator gives.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAdminAuthorizer } from '@broker/auth';
import { afterAll, describe, expect, it } from 'vitest';
import { adminTokenSigner, WRITE_TOKEN_LIFETIME_SECONDS } from './write-credential.js';

const dir = mkdtempSync(join(tmpdir(), 'write-credential-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function pair(name: string, type: 'ed25519' | 'ec' | 'rsa', curve?: string) {
  const { privateKey, publicKey } =
    type === 'ec'
      ? generateKeyPairSync('ec', { namedCurve: curve as string })
      : type === 'rsa'
        ? generateKeyPairSync('rsa', { modulusLength: 2048 })
        : generateKeyPairSync('ed25519');
  const pub = join(dir, `${name}.pub`);
  writeFileSync(pub, publicKey.export({ type: 'spki', format: 'pem' }));
  return { key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, pub };
}

async function verifier(pub: string, now: () => number) {
  return createAdminAuthorizer(
    {
      mode: 'AuthenticatedAuthorization',
      identityProviders: [{ publicKeyUri: pub }],
      acls: [{ role: 'admin', allowedEndpoints: '.*' }],
    },
    now,
  );
}

describe('adminTokenSigner', () => {
  it.each([
    ['Ed25519', 'ed25519', undefined],
    ['P-256', 'ec', 'prime256v1'],
    ['P-384', 'ec', 'secp384r1'],
    ['RSA', 'rsa', undefined],
  ] as const)(
    'signs with an %s key a token the services accept, for five minutes',
    async (name, type, curve) => {
      const { key, pub } = pair(name, type, curve);
      let now = Date.now();
      const token = await adminTokenSigner(key, () => now)();
      const auth = await verifier(pub, () => now);
      expect(auth.check({ authorization: `Bearer ${token}`, path: '/write' }).principal).toBeDefined();
      now += (WRITE_TOKEN_LIFETIME_SECONDS + 120) * 1000;
      expect(() => auth.check({ authorization: `Bearer ${token}`, path: '/write' })).toThrow();
    },
  );

  it('refuses at once a key that cannot sign: a public key, a P-521 key, garbage', () => {
    const { pub } = pair('refused', 'ed25519');
    expect(() => adminTokenSigner(readFileSync(pub))).toThrow(/not an unencrypted PEM private key/);
    const p521 = generateKeyPairSync('ec', { namedCurve: 'secp521r1' }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    }) as string;
    expect(() => adminTokenSigner(p521)).toThrow(/P-256, P-384\) or RSA, not an EC key on secp521r1/);
    expect(() => adminTokenSigner('x'.repeat(20_000))).toThrow(/longer than/);
  });
});
