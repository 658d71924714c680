// CCA tokens signed by test keys, for tests and the mock TEE: a platform token signed by a CPAK
// and a realm token signed by a RAK the platform token binds, with TA and RV stores that accept
// them. Claims can be overridden to build hostile tokens.
import { createHash, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { Tag } from 'cbor2';
import { encodeCbor, signCoseSign1 } from './cose.js';
import type { CcaStores } from './stores.js';
import { CCA_PLATFORM_LABEL, CCA_REALM_LABEL, CCA_TOKEN_TAG } from './token.js';

export type ClaimsMap = Map<number, unknown>;

/** A collection of a platform and a realm token, each signed with its key. */
export function encodeCcaToken(
  platform: ClaimsMap,
  realm: ClaimsMap,
  cpak: KeyObject,
  rak: KeyObject,
): Buffer {
  return Buffer.from(
    encodeCbor(
      new Tag(
        CCA_TOKEN_TAG,
        new Map([
          [CCA_PLATFORM_LABEL, signCoseSign1(encodeCbor(platform), cpak)],
          [CCA_REALM_LABEL, signCoseSign1(encodeCbor(realm), rak)],
        ]),
      ),
    ),
  );
}

/** The raw uncompressed point ccatoken expects as the RAK claim (0x04 ‖ x ‖ y, 97 bytes for P-384). */
export function rawPublicPoint(key: KeyObject): Buffer {
  const jwk = key.export({ format: 'jwk' });
  return Buffer.concat([
    Buffer.from([4]),
    Buffer.from(jwk.x!, 'base64url'),
    Buffer.from(jwk.y!, 'base64url'),
  ]);
}

export interface TestCcaPlatform {
  readonly cpak: KeyObject;
  readonly rak: KeyObject;
  readonly stores: CcaStores;
  /** TA store JSON (tastore.json format) with the CPAK's public key. */
  readonly taStoreJson: string;
  /** RV store JSON (rvstore.json format) matching the platform claims. */
  readonly rvStoreJson: string;
  platformClaims(): ClaimsMap;
  realmClaims(challenge: Uint8Array, personalization?: Uint8Array): ClaimsMap;
  /** A token whose realm challenge is `challenge` (zero-padded to 64 bytes). */
  token(challenge: Uint8Array, personalization?: Uint8Array): Buffer;
}

export interface TestCcaKeys {
  /** The platform attestation key (P-384 private key). */
  readonly cpak: KeyObject;
  /** The realm attestation key (P-384 private key). */
  readonly rak: KeyObject;
}

/** A simulated CCA platform: fresh CPAK and RAK, or `keys` kept from an earlier run (the mock TEE's state). */
export function createTestCcaPlatform(keys?: TestCcaKeys): TestCcaPlatform {
  const p384 = () => generateKeyPairSync('ec', { namedCurve: 'P-384' });
  const pair = (privateKey: KeyObject) => ({ privateKey, publicKey: createPublicKey(privateKey) });
  const cpak = keys ? pair(keys.cpak) : p384();
  const rak = keys ? pair(keys.rak) : p384();
  const implId = createHash('sha256').update('simulated CCA implementation').digest();
  const instId = Buffer.concat([
    Buffer.from([1]),
    createHash('sha256').update(rawPublicPoint(cpak.publicKey)).digest(),
  ]);
  const config = Buffer.from('cfcfcfcf', 'hex');
  const components = ['RSE_BL1_2', 'RMM'].map((type) => ({
    type,
    value: createHash('sha256').update(type).digest(),
    signerId: createHash('sha256').update('simulated signer').digest(),
  }));
  const rakPoint = rawPublicPoint(rak.publicKey);
  const platformClaims = (): ClaimsMap =>
    new Map<number, unknown>([
      [265, 'http://arm.com/CCA-SSD/1.0.0'],
      [10, createHash('sha256').update(rakPoint).digest()],
      [2396, implId],
      [256, instId],
      [2401, config],
      [2395, 0x3003],
      [2402, 'sha-256'],
      [
        2399,
        components.map(
          (c) =>
            new Map<number, unknown>([
              [1, c.type],
              [2, c.value],
              [5, c.signerId],
              [6, 'sha-256'],
            ]),
        ),
      ],
    ]);
  const realmClaims = (challenge: Uint8Array, personalization?: Uint8Array): ClaimsMap => {
    const padded = Buffer.alloc(64);
    Buffer.from(challenge).copy(padded, 0, 0, 64);
    const perso = Buffer.alloc(64);
    if (personalization) Buffer.from(personalization).copy(perso, 0, 0, 64);
    return new Map<number, unknown>([
      [10, padded],
      [44235, perso],
      [44238, createHash('sha512').update('simulated realm image').digest()],
      [44239, [0, 1, 2, 3].map(() => Buffer.alloc(64))],
      [44236, 'sha-512'],
      [44237, rakPoint],
      [44240, 'sha-256'],
    ]);
  };
  const jwk = cpak.publicKey.export({ format: 'jwk' });
  const taStoreJson = JSON.stringify([
    { pkey: jwk, 'implementation-id': implId.toString('hex'), 'instance-id': instId.toString('hex') },
  ]);
  const rvStoreJson = JSON.stringify({
    platform: [
      {
        'implementation-id': implId.toString('hex'),
        'platform-configuration': config.toString('hex'),
        'sw-components': components.map((c) => ({
          'component-type': c.type,
          'measurement-value': c.value.toString('hex'),
          'signer-id': c.signerId.toString('hex'),
        })),
      },
    ],
    realm: [],
  });
  return {
    cpak: cpak.privateKey,
    rak: rak.privateKey,
    stores: {
      trustAnchors: [{ key: cpak.publicKey, implementationId: implId, instanceId: instId }],
      platformRefValues: [
        {
          implementationId: implId,
          config,
          swComponents: components.map((c) => ({ value: c.value, signerId: c.signerId, type: c.type })),
        },
      ],
    },
    taStoreJson,
    rvStoreJson,
    platformClaims,
    realmClaims,
    token: (challenge, personalization) =>
      encodeCcaToken(
        platformClaims(),
        realmClaims(challenge, personalization),
        cpak.privateKey,
        rak.privateKey,
      ),
  };
}
