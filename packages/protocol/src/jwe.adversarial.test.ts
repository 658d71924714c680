// The ECDH-ES epk now reaches OpenSSL as an SPKI built from its raw coordinates: coordinates with
// leading zero bytes (which a JWK encoder must keep, and a careless one strips) must still make the
// fixed-length point, and coordinates that are no field element must be refused before any DH.
// jose (an independent JOSE implementation) makes the JWEs, with an ephemeral key chosen for its x.
import { createPublicKey, generateKeyPairSync, type KeyObject, webcrypto } from 'node:crypto';
import * as jose from 'jose';
import { describe, expect, it } from 'vitest';
import { JweInvalid } from './errors.js';
import {
  generateTeeKeyPair,
  jweDecrypt,
  jweEncrypt,
  parseProtectedHeader,
  serializeProtectedHeader,
} from './jwe.js';

const plaintext = new TextEncoder().encode('layer key');

/** An ephemeral private key whose public x starts with `zeros` zero bytes. */
function ephemeralWithLeadingZeros(namedCurve: 'P-256' | 'P-521', zeros: number): KeyObject {
  for (;;) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve });
    const x = Buffer.from(publicKey.export({ format: 'jwk' }).x ?? '', 'base64url');
    if (x.subarray(0, zeros).every((b) => b === 0)) return privateKey;
  }
}

describe('ECDH-ES+A256KW epk, attacked', () => {
  it.each([
    ['P-256', 'ECDH-ES+A256KW-P256', 1],
    ['P-521', 'ECDH-ES+A256KW-P521', 2],
  ] as const)(
    '%s: an epk x with leading zero bytes decrypts (jose keeps the full width)',
    async (crv, kind, zeros) => {
      const recipient = generateTeeKeyPair(kind);
      const epk = ephemeralWithLeadingZeros(crv, zeros);
      const jwe = await new jose.FlattenedEncrypt(plaintext)
        .setProtectedHeader({ alg: 'ECDH-ES+A256KW', enc: 'A256GCM' })
        .setKeyManagementParameters({
          epk: await webcrypto.subtle.importKey(
            'jwk',
            epk.export({ format: 'jwk' }),
            { name: 'ECDH', namedCurve: crv },
            true,
            ['deriveBits'],
          ),
        })
        .encrypt(createPublicKey(recipient.privateKey));
      const sent = parseProtectedHeader(jwe.protected ?? '') as unknown as { epk: { x: string } };
      expect(Buffer.from(sent.epk.x, 'base64url').subarray(0, zeros)).toEqual(Buffer.alloc(zeros));
      expect(Buffer.from(jweDecrypt(jwe, recipient.privateKey, { aadSource: 'protected' })).toString()).toBe(
        'layer key',
      );
    },
  );

  it('refuses coordinates that are no field element or the all-zero point, as invalid, before any DH', () => {
    const recipient = generateTeeKeyPair('ECDH-ES+A256KW-P256');
    const jwe = jweEncrypt(plaintext, recipient.publicJwk);
    const { epk } = parseProtectedHeader(jwe.protected) as unknown as { epk: Record<string, string> };
    const withEpk = (x: Buffer, y: Buffer) => ({
      ...jwe,
      protected: Buffer.from(
        serializeProtectedHeader({
          alg: 'ECDH-ES+A256KW',
          enc: 'A256GCM',
          epk: { ...epk, x: x.toString('base64url'), y: y.toString('base64url') },
        }),
      ).toString('base64url'),
    });
    const p = Buffer.from('ffffffff00000001000000000000000000000000ffffffffffffffffffffffff', 'hex');
    const y = Buffer.from(epk.y ?? '', 'base64url');
    expect(() => jweDecrypt(withEpk(p, y), recipient.privateKey)).toThrow(JweInvalid);
    expect(() => jweDecrypt(withEpk(Buffer.alloc(32, 0xff), y), recipient.privateKey)).toThrow(JweInvalid);
    expect(() => jweDecrypt(withEpk(Buffer.alloc(32), Buffer.alloc(32)), recipient.privateKey)).toThrow(
      JweInvalid,
    );
    // A P-521-sized point named P-256 does not slip into the P-256 SPKI.
    expect(() => jweDecrypt(withEpk(Buffer.alloc(66), Buffer.alloc(66)), recipient.privateKey)).toThrow(
      JweInvalid,
    );
  });
});
