// Hostile CCA tokens: malformed CBOR, wrong structure, missing or oversized claims, unknown
// profiles and algorithms are refused with a named error before any claim is reported.
import { createHash, generateKeyPairSync } from 'node:crypto';
import { Tag } from 'cbor2';
import { describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { encodeCbor, signCoseSign1 } from './cose.js';
import { CcaVerifier } from './index.js';
import { parseRvStore, parseTaStore } from './stores.js';
import { type ClaimsMap, createTestCcaPlatform, encodeCcaToken } from './test-token.js';
import { MAX_CCA_TOKEN_BYTES, parseCcaToken } from './token.js';

const platform = createTestCcaPlatform();
const CHALLENGE = Buffer.alloc(48, 0x5a);
const verifier = new CcaVerifier();

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(VerificationError);
    return `${(e as VerificationError).code}: ${(e as Error).message}`;
  }
  return 'accepted';
}

function withPlatform(change: (m: ClaimsMap) => void): Buffer {
  const p = platform.platformClaims();
  change(p);
  return encodeCcaToken(p, platform.realmClaims(CHALLENGE), platform.cpak, platform.rak);
}
function withRealm(change: (m: ClaimsMap) => void): Buffer {
  const r = platform.realmClaims(CHALLENGE);
  change(r);
  return encodeCcaToken(platform.platformClaims(), r, platform.cpak, platform.rak);
}

describe('CCA token parsing', () => {
  it('the simulated platform token verifies, with the report data zero-padded to 64 bytes', async () => {
    const [r] = await verifier.evaluate(
      { token: [...platform.token(CHALLENGE)] },
      { reportData: CHALLENGE, cca: { stores: platform.stores } },
    );
    expect(r!.claims.report_data).toBe(Buffer.concat([CHALLENGE, Buffer.alloc(16)]).toString('hex'));
  });

  it('the simulated stores round-trip through the tastore.json and rvstore.json formats', async () => {
    const stores = {
      trustAnchors: parseTaStore(platform.taStoreJson),
      platformRefValues: parseRvStore(platform.rvStoreJson),
    };
    await expect(
      verifier.evaluate(
        { token: [...platform.token(CHALLENGE)] },
        { reportData: CHALLENGE, cca: { stores } },
      ),
    ).resolves.toHaveLength(1);
  });

  it('every truncation is refused as malformed', () => {
    const token = platform.token(CHALLENGE);
    for (let n = 0; n < token.length; n += 7) {
      expect(refusal(() => parseCcaToken(token.subarray(0, n)))).toMatch(/^REPORT_MALFORMED: CCA/);
    }
  });

  it.each([
    [
      'trailing bytes',
      () => Buffer.concat([platform.token(CHALLENGE), Buffer.from([0])]),
      /not one well-formed CBOR/,
    ],
    ['another tag', () => encodeCbor(new Tag(400, new Map())), /tag-399/],
    [
      'an unknown collection key',
      () => encodeCbor(new Tag(399, new Map([[1, new Uint8Array(1)]]))),
      /unknown key 1/,
    ],
    [
      'no realm token',
      () => encodeCbor(new Tag(399, new Map([[44234, signCoseSign1(encodeCbor(new Map()), platform.cpak)]]))),
      /missing realm token/,
    ],
    [
      'an untagged COSE_Sign1',
      () =>
        encodeCbor(
          new Tag(
            399,
            new Map([
              [44234, encodeCbor([1, 2, 3, 4])],
              [44241, encodeCbor([1])],
            ]),
          ),
        ),
      /tag 18/,
    ],
    ['no platform challenge', () => withPlatform((m) => m.delete(10)), /platform token lacks challenge/],
    [
      'a 31-byte platform challenge',
      () => withPlatform((m) => m.set(10, Buffer.alloc(31))),
      /challenge is 31 bytes/,
    ],
    [
      'a 32-byte instance id',
      () => withPlatform((m) => m.set(256, Buffer.alloc(32))),
      /instance-id is 32 bytes/,
    ],
    ['an unknown lifecycle', () => withPlatform((m) => m.set(2395, 0x7000)), /lifecycle 0x7000/],
    ['an unknown hash name', () => withPlatform((m) => m.set(2402, 'sha-384')), /sha-256 or sha-512/],
    ['no sw-components', () => withPlatform((m) => m.set(2399, [])), /sw-components is empty/],
    [
      'a sw-component with an unknown key',
      () =>
        withPlatform((m) =>
          m.set(2399, [
            new Map<number, unknown>([
              [2, Buffer.alloc(32)],
              [5, Buffer.alloc(32)],
              [9, 1],
            ]),
          ]),
        ),
      /unknown key 9/,
    ],
    [
      'a sw-component without signer-id',
      () => withPlatform((m) => m.set(2399, [new Map([[2, Buffer.alloc(32)]])])),
      /lacks signer-id/,
    ],
    [
      'a claim of the wrong type',
      () => withPlatform((m) => m.set(2401, 'cfcf')),
      /config must be a byte string/,
    ],
    [
      'a 63-byte realm challenge',
      () => withRealm((m) => m.set(10, Buffer.alloc(63))),
      /realm token challenge is 63 bytes/,
    ],
    [
      'three REMs',
      () => withRealm((m) => m.set(44239, [Buffer.alloc(32), Buffer.alloc(32), Buffer.alloc(32)])),
      /3 slots, not 4/,
    ],
    ['a 96-byte raw RAK', () => withRealm((m) => m.set(44237, Buffer.alloc(96))), /public-key is 96 bytes/],
  ])('refuses %s', (_what, build, message) => {
    expect(refusal(() => parseCcaToken(build()))).toMatch(message);
  });

  it('unknown platform and realm profiles are unsupported versions', () => {
    expect(
      refusal(() => parseCcaToken(withPlatform((m) => m.set(265, 'http://arm.com/CCA-SSD/2.0.0')))),
    ).toMatch(/^UNSUPPORTED_VERSION: CCA platform profile/);
    expect(refusal(() => parseCcaToken(withRealm((m) => m.set(265, 'tag:arm.com,2099:realm'))))).toMatch(
      /^UNSUPPORTED_VERSION: CCA realm profile/,
    );
  });

  it('under the realm profile the RAK claim is a COSE_Key, bound and verified like a raw point', async () => {
    const jwk = platform.rak.export({ format: 'jwk' });
    const coseKey = Buffer.from(
      encodeCbor(
        new Map<number, unknown>([
          [1, 2],
          [-1, 2],
          [-2, Buffer.from(jwk.x!, 'base64url')],
          [-3, Buffer.from(jwk.y!, 'base64url')],
        ]),
      ),
    );
    const p = platform.platformClaims();
    p.set(10, createHash('sha256').update(coseKey).digest());
    const r = platform.realmClaims(CHALLENGE);
    r.set(265, 'tag:arm.com,2023:realm#1.0.0');
    r.set(44237, coseKey);
    const token = encodeCcaToken(p, r, platform.cpak, platform.rak);
    await expect(
      verifier.evaluate({ token: [...token] }, { reportData: CHALLENGE, cca: { stores: platform.stores } }),
    ).resolves.toHaveLength(1);
    r.set(44237, Buffer.from(encodeCbor(new Map<number, unknown>([[1, 1]]))));
    const bad = encodeCcaToken(p, r, platform.cpak, platform.rak);
    const e = await verifier
      .evaluate({ token: [...bad] }, { reportData: CHALLENGE, cca: { stores: platform.stores } })
      .catch((x: unknown) => x);
    expect((e as VerificationError).code).toBe('AK_INVALID');
  });

  it('an oversized token is refused before decoding', () => {
    expect(refusal(() => parseCcaToken(Buffer.alloc(MAX_CCA_TOKEN_BYTES + 1)))).toMatch(
      /^EVIDENCE_TOO_LARGE/,
    );
  });

  it('a RAK that is not a curve point, and a CPAK on the wrong curve, are refused by name', async () => {
    const bad = withRealm((m) => m.set(44237, Buffer.concat([Buffer.from([4]), Buffer.alloc(96, 0xff)])));
    const e = await verifier
      .evaluate({ token: [...bad] }, { reportData: CHALLENGE, cca: { stores: platform.stores } })
      .catch((x: unknown) => x);
    expect((e as VerificationError).code).toBe('AK_INVALID');
    const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
    const stores = { ...platform.stores, trustAnchors: [{ ...platform.stores.trustAnchors[0]!, key: p256 }] };
    const e2 = await verifier
      .evaluate({ token: [...platform.token(CHALLENGE)] }, { reportData: CHALLENGE, cca: { stores } })
      .catch((x: unknown) => x);
    expect((e2 as VerificationError).code).toBe('UNSUPPORTED_ALGORITHM');
  });

  it('stores with a private key or bad hex are refused', () => {
    expect(
      refusal(() =>
        parseTaStore(
          '[{"pkey":{"kty":"EC","crv":"P-384","d":"AA","x":"AA","y":"AA"},"implementation-id":"","instance-id":""}]',
        ),
      ),
    ).toMatch(/^COLLATERAL_INVALID: .*not a public JWK/);
    expect(
      refusal(() => parseRvStore('{"platform":[{"implementation-id":"zz","sw-components":[]}]}')),
    ).toMatch(/implementation-id.* must be hex/);
    expect(refusal(() => parseRvStore('not json'))).toMatch(/not JSON/);
  });
});
