import { generateTeeKeyPair } from '@broker/protocol';
import { describe, expect, it } from 'vitest';
import { AttestationTokenVerifier, jsonPointer } from './token.js';

const tee = generateTeeKeyPair().publicJwk;

async function verifier(extra: string[] = []) {
  return AttestationTokenVerifier.create({
    trustedCertsPaths: [],
    trustedJwkSets: [],
    extraTeekeyPaths: extra,
    insecureHeaderJwk: true,
  });
}

describe('jsonPointer', () => {
  const doc = { a: { 'b/c': [10, { 'd~e': 'x' }] }, '': 1 };
  it.each([
    ['', doc],
    ['/a/b~1c/0', 10],
    ['/a/b~1c/1/d~0e', 'x'],
    ['/', 1],
    ['/a/b~1c/2', undefined],
    ['/a/b~1c/01', undefined],
    ['/a/missing', undefined],
    ['a', undefined],
    ['/a/b~1c/0/deeper', undefined],
  ])('%j', (p, want) => {
    expect(jsonPointer(doc, p)).toEqual(want);
  });
});

describe('AttestationTokenVerifier.teePublicKey', () => {
  it('keeps only the known members', async () => {
    const v = await verifier();
    expect(v.teePublicKey({ 'tee-pubkey': { ...tee, kid: 'x', use: 'enc' } })).toEqual(tee);
  });

  it('reads the EAR runtime_data_claims key', async () => {
    const v = await verifier();
    const claims = {
      submods: {
        cpu0: { 'ear.veraison.annotated-evidence': { runtime_data_claims: { 'tee-pubkey': tee } } },
      },
    };
    expect(v.teePublicKey(claims)).toEqual(tee);
  });

  it('tries the configured pointers first, then the built-in ones in upstream order', async () => {
    const other = generateTeeKeyPair().publicJwk;
    const claims = {
      custom: { k: other },
      'tee-pubkey': tee,
      tdx: { attester_runtime_data: { 'tee-pubkey': tee } },
    };
    expect((await verifier(['/custom/k'])).teePublicKey(claims)).toEqual(other);
    expect(
      (await verifier()).teePublicKey({
        'tee-pubkey': other,
        customized_claims: { runtime_data: { 'tee-pubkey': tee } },
      }),
    ).toEqual(tee);
  });

  it('fails on a present but malformed key instead of looking further', async () => {
    const v = await verifier();
    expect(() =>
      v.teePublicKey({
        customized_claims: { runtime_data: { 'tee-pubkey': { kty: 'oct' } } },
        'tee-pubkey': tee,
      }),
    ).toThrow('Failed to parse Tee public key');
    expect(() => v.teePublicKey({ 'tee-pubkey': null })).toThrow('Failed to parse Tee public key');
    expect(() => v.teePublicKey({ 'tee-pubkey': { ...tee, crv: 'P-192' } })).toThrow(
      'Failed to parse Tee public key',
    );
    expect(() => v.teePublicKey({ 'tee-pubkey': { kty: 'RSA', n: 'AQAB', e: 'AQAB' } })).toThrow(
      'Failed to parse Tee public key',
    );
  });

  it('fails when no pointer resolves', async () => {
    const v = await verifier();
    expect(() => v.teePublicKey({ submods: {} })).toThrow('Tee public key not found in Attestation Token');
  });
});
