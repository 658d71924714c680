// Arm CCA realms (trustee's `cca` verifier, local mode, as its cca/local.rs with Veraison's
// ccatoken): the platform token is verified with the CPAK the TA store holds for its instance ID,
// the realm token with the RAK the platform token binds (platform challenge = H(RAK)), the
// platform must match a reference value of the RV store, and the realm challenge must be the
// KBS report data. Claims are named as trustee names them.
import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { VerificationError } from '../errors.js';
import { byteArrayMember, evidenceObject } from '../evidence.js';
import {
  type ExpectedData,
  regularize,
  reportDataExpected,
  type Verifier,
  type VerifierResult,
} from '../verifier.js';
import { decodeCbor, verifyCoseSign1 } from './cose.js';
import type { CcaVerifierOptions } from './options.js';
import { claimsFromEar, type VeraisonOptions, verifyWithVeraison } from './remote.js';
import {
  CCA_CONFIG_ENV,
  type CcaStores,
  DEFAULT_CCA_CONFIG_PATH,
  loadCcaConfig,
  loadCcaStores,
  type PlatformRefValue,
} from './stores.js';
import {
  type CcaToken,
  MAX_CCA_TOKEN_BYTES,
  type PlatformClaims,
  parseCcaToken,
  REALM_PROFILE,
} from './token.js';

export const CCA_CHALLENGE_SIZE = 64;

export type { CcaVerifierOptions } from './options.js';

/** trustee's CCA claims (class `cpu`): byte values std base64, `report_data`/`init_data` hex. */
export interface CcaClaims {
  readonly realm: {
    readonly 'cca-realm-challenge': string;
    readonly 'cca-realm-extensible-measurements': string[];
    readonly 'cca-realm-hash-algo-id': string;
    readonly 'cca-realm-initial-measurement': string;
    readonly 'cca-realm-personalization-value': string;
  };
  readonly platform: {
    readonly 'cca-platform-instance-id': string;
    readonly 'cca-platform-implementation-id': string;
  };
  readonly report_data: string;
  readonly init_data: string;
}

const HASHES: Record<string, string> = { 'sha-256': 'sha256', 'sha-512': 'sha512' };
const COSE_CURVES: Record<number, string> = { 1: 'P-256', 2: 'P-384', 3: 'P-521' };

type Source = { readonly stores: CcaStores } | { readonly remote: VeraisonOptions };

function sourceFor(opts: CcaVerifierOptions | undefined): Source {
  if (opts?.stores) return { stores: opts.stores };
  if (opts?.remote) return { remote: opts.remote };
  const path = opts?.configPath ?? process.env[CCA_CONFIG_ENV] ?? DEFAULT_CCA_CONFIG_PATH;
  const config = loadCcaConfig(path);
  if (config.type === 'remote') {
    return {
      remote: { address: config.address, ...(config.caCert !== undefined ? { caCert: config.caCert } : {}) },
    };
  }
  return { stores: loadCcaStores(config) };
}

function rakError(message: string, cause?: unknown): VerificationError {
  return new VerificationError('AK_INVALID', `CCA realm public key (RAK): ${message}`, { cause });
}

/** The RAK as a key: a raw uncompressed P-384 point, or a COSE_Key under the realm profile. */
export function realmKey(token: CcaToken): KeyObject {
  const { rak, profile } = token.realmClaims;
  const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64url');
  let jwk: { kty: 'EC'; crv: string; x: string; y: string };
  if (profile === REALM_PROFILE) {
    const m = decodeCbor(rak, 'CCA realm public key COSE_Key');
    if (!(m instanceof Map) || m.get(1) !== 2) throw rakError('the COSE_Key is not an EC2 key');
    const crv = COSE_CURVES[m.get(-1) as number];
    const x = m.get(-2);
    const y = m.get(-3);
    if (crv === undefined || !(x instanceof Uint8Array) || !(y instanceof Uint8Array)) {
      throw rakError('the COSE_Key lacks a known curve or its x and y coordinates');
    }
    jwk = { kty: 'EC', crv, x: b64(x), y: b64(y) };
  } else {
    if (rak[0] !== 0x04) throw rakError('not an uncompressed P-384 point');
    jwk = { kty: 'EC', crv: 'P-384', x: b64(rak.subarray(1, 49)), y: b64(rak.subarray(49, 97)) };
  }
  try {
    return createPublicKey({ key: jwk, format: 'jwk' });
  } catch (e) {
    throw rakError('not a point on its curve', e);
  }
}

function platformMatches(rv: PlatformRefValue, claims: PlatformClaims): boolean {
  if (!rv.config.equals(claims.config) || rv.swComponents.length !== claims.swComponents.length) return false;
  return rv.swComponents.every((r, i) => {
    const c = claims.swComponents[i]!;
    return (
      r.value.equals(c.value) &&
      r.signerId.equals(c.signerId) &&
      (r.type === undefined || r.type === c.type) &&
      (r.version === undefined || r.version === c.version)
    );
  });
}

/**
 * The checks that make ccatoken's realm instance identity affirming, in its order: a CPAK for the
 * instance ID, the platform signature, the realm signature, the RAK binding, then a platform
 * reference value (configuration and the whole sw-components list, in order).
 */
export function verifyCcaToken(token: CcaToken, stores: CcaStores): void {
  const p = token.platformClaims;
  const anchor = stores.trustAnchors.find((t) => t.instanceId.equals(p.instanceId));
  if (anchor === undefined) {
    throw new VerificationError(
      'CERT_CHAIN_INVALID',
      `CCA platform instance-id ${p.instanceId.toString('hex')} has no CPAK in the TA store`,
    );
  }
  verifyCoseSign1(token.platform, anchor.key, 'CCA platform token', 'CPAK');
  verifyCoseSign1(token.realm, realmKey(token), 'CCA realm token', 'realm public key (RAK)');
  const bound = createHash(HASHES[token.realmClaims.rakHashAlg]!).update(token.realmClaims.rak).digest();
  if (!bound.equals(p.challenge)) {
    throw new VerificationError(
      'CERT_CHAIN_INVALID',
      `CCA platform challenge is not the ${token.realmClaims.rakHashAlg} of the realm public key (RAK not bound)`,
    );
  }
  const candidates = stores.platformRefValues.filter((rv) => rv.implementationId.equals(p.implementationId));
  if (candidates.length === 0) {
    throw new VerificationError(
      'TCB_NOT_SUPPORTED',
      `CCA platform implementation-id ${p.implementationId.toString('hex')} has no reference value in the RV store`,
    );
  }
  if (!candidates.some((rv) => platformMatches(rv, p))) {
    throw new VerificationError(
      'TCB_NOT_SUPPORTED',
      'CCA platform configuration and sw-components match no reference value of the RV store',
    );
  }
}

export function ccaClaims(token: CcaToken): CcaClaims {
  const r = token.realmClaims;
  const b64 = (b: Buffer) => b.toString('base64');
  return {
    realm: {
      'cca-realm-challenge': b64(r.challenge),
      'cca-realm-extensible-measurements': r.extensibleMeasurements.map(b64),
      'cca-realm-hash-algo-id': r.hashAlg,
      'cca-realm-initial-measurement': b64(r.initialMeasurement),
      'cca-realm-personalization-value': b64(r.personalizationValue),
    },
    platform: {
      'cca-platform-instance-id': b64(token.platformClaims.instanceId),
      'cca-platform-implementation-id': b64(token.platformClaims.implementationId),
    },
    report_data: r.challenge.toString('hex'),
    init_data: r.personalizationValue.toString('hex'),
  };
}

export class CcaVerifier implements Verifier {
  readonly tee = 'cca' as const;

  async evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]> {
    const obj = evidenceObject(evidence, 'cca');
    const bytes = byteArrayMember(obj, 'token', { maxLength: MAX_CCA_TOKEN_BYTES });
    // trustee's cca verifier refuses ReportData::NotProvided: comparing with the empty report data
    // instead would accept any realm token whose challenge is all zeros. Refused before the config
    // file is read or Veraison asked.
    if (!reportDataExpected(expected)) {
      throw new VerificationError(
        'REPORT_DATA_MISMATCH',
        'CCA evidence needs runtime data: none was provided to check the realm challenge against',
      );
    }
    const nonce = regularize(expected.reportData, CCA_CHALLENGE_SIZE);
    const source = sourceFor(expected.cca);
    let claims: CcaClaims;
    if ('remote' in source) {
      // Veraison checks the token; its EAR vouches for the claims and carries our nonce.
      const { realm, platform } = claimsFromEar(await verifyWithVeraison(bytes, nonce, source.remote));
      const hex = (b64: unknown) => Buffer.from(String(b64), 'base64').toString('hex');
      claims = {
        realm: realm as CcaClaims['realm'],
        platform: platform as CcaClaims['platform'],
        report_data: hex(realm['cca-realm-challenge']),
        init_data: hex(realm['cca-realm-personalization-value']),
      };
    } else {
      const token = parseCcaToken(bytes);
      verifyCcaToken(token, source.stores);
      if (!nonce.equals(token.realmClaims.challenge)) {
        throw new VerificationError(
          'REPORT_DATA_MISMATCH',
          'CCA realm challenge is not the expected report data (zero-padded to 64 bytes)',
        );
      }
      claims = ccaClaims(token);
    }
    // trustee compares the initdata digest with the 64-byte personalization value as is, unpadded.
    if (
      expected.initDataHash !== undefined &&
      !Buffer.from(expected.initDataHash).equals(Buffer.from(claims.init_data, 'hex'))
    ) {
      throw new VerificationError(
        'INIT_DATA_MISMATCH',
        'CCA realm personalization value is not the initdata digest (compared unpadded, as trustee does)',
      );
    }
    return [{ claims: { ...claims }, class: 'cpu' }];
  }
}
