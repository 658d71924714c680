// The Arm CCA attestation token: tag 399 around {44234: platform COSE_Sign1, 44241: realm
// COSE_Sign1} (Arm RME system architecture, "CCA attestation token"). Claims are read as
// Veraison's ccatoken reads them: the same mandatory claims, sizes, profiles and hash names.
import { Tag } from 'cbor2';
import { VerificationError } from '../errors.js';
import { type CoseSign1, decodeCbor, decodeCoseSign1 } from './cose.js';

export const CCA_TOKEN_TAG = 399;
export const CCA_PLATFORM_LABEL = 44234;
export const CCA_REALM_LABEL = 44241;
export const MAX_CCA_TOKEN_BYTES = 64 * 1024;

export const PLATFORM_PROFILES = [
  'http://arm.com/CCA-SSD/1.0.0',
  'tag:arm.com,2023:cca_platform#1.0.0',
] as const;
/** The realm profile whose RAK claim is a COSE_Key; without a profile the RAK is a raw P-384 point. */
export const REALM_PROFILE = 'tag:arm.com,2023:realm#1.0.0';
const HASH_NAMES = new Set(['sha-256', 'sha-512']);

export interface SwComponent {
  readonly type?: string;
  readonly value: Buffer;
  readonly version?: string;
  readonly signerId: Buffer;
  readonly hashAlg?: string;
}

export interface PlatformClaims {
  readonly profile: string;
  readonly challenge: Buffer;
  readonly implementationId: Buffer;
  readonly instanceId: Buffer;
  readonly config: Buffer;
  readonly lifecycle: number;
  readonly swComponents: readonly SwComponent[];
  readonly verificationService?: string;
  readonly hashAlg: string;
}

export interface RealmClaims {
  readonly profile?: string;
  readonly challenge: Buffer;
  readonly personalizationValue: Buffer;
  readonly initialMeasurement: Buffer;
  readonly extensibleMeasurements: readonly Buffer[];
  readonly hashAlg: string;
  /** The RAK claim as sent: a raw point (97 bytes) or a COSE_Key, per the profile. */
  readonly rak: Buffer;
  readonly rakHashAlg: string;
}

export interface CcaToken {
  readonly platform: CoseSign1;
  readonly realm: CoseSign1;
  readonly platformClaims: PlatformClaims;
  readonly realmClaims: RealmClaims;
}

function malformed(message: string): VerificationError {
  return new VerificationError('REPORT_MALFORMED', `CCA token: ${message}`);
}

/** Reads integer-keyed claims once each; `need` lists the mandatory ones. */
class ClaimReader {
  private readonly seen = new Set<number>();
  constructor(
    private readonly map: Map<unknown, unknown>,
    private readonly what: string,
  ) {}

  private get(label: number): unknown {
    return this.map.get(label);
  }

  has(label: number): boolean {
    return this.map.has(label);
  }

  private required(label: number, name: string): unknown {
    if (!this.map.has(label)) throw malformed(`${this.what} lacks ${name} (${label})`);
    this.seen.add(label);
    return this.get(label);
  }

  bytes(label: number, name: string, sizes?: readonly number[]): Buffer {
    const v = this.required(label, name);
    if (!(v instanceof Uint8Array)) throw malformed(`${this.what} ${name} must be a byte string`);
    if (sizes !== undefined && !sizes.includes(v.length)) {
      throw malformed(`${this.what} ${name} is ${v.length} bytes, not ${sizes.join(' or ')}`);
    }
    return Buffer.from(v);
  }

  text(label: number, name: string): string {
    const v = this.required(label, name);
    if (typeof v !== 'string') throw malformed(`${this.what} ${name} must be a text string`);
    return v;
  }

  hashName(label: number, name: string): string {
    const v = this.text(label, name);
    if (!HASH_NAMES.has(v))
      throw malformed(`${this.what} ${name} ${JSON.stringify(v.slice(0, 32))} is not sha-256 or sha-512`);
    return v;
  }

  integer(label: number, name: string): number {
    const v = this.required(label, name);
    if (typeof v !== 'number' || !Number.isInteger(v))
      throw malformed(`${this.what} ${name} must be an integer`);
    return v;
  }

  array(label: number, name: string): unknown[] {
    const v = this.required(label, name);
    if (!Array.isArray(v)) throw malformed(`${this.what} ${name} must be an array`);
    return v;
  }
}

const MEASUREMENT_SIZES = [32, 48, 64] as const;

function claimsMap(payload: Uint8Array, what: string): Map<unknown, unknown> {
  const m = decodeCbor(payload, `CCA ${what} claims`);
  if (!(m instanceof Map)) throw malformed(`${what} claims are not a map`);
  return m;
}

/** Lifecycle states ccatoken accepts: 0x0000–0x00ff, 0x1000–0x10ff, … 0x6000–0x60ff. */
function validLifecycle(v: number): boolean {
  return v >= 0 && v <= 0x60ff && (v & 0x0f00) === 0;
}

function swComponent(v: unknown, i: number): SwComponent {
  if (!(v instanceof Map)) throw malformed(`platform sw-component ${i} must be a map`);
  for (const k of v.keys()) {
    if (typeof k !== 'number' || ![1, 2, 4, 5, 6].includes(k)) {
      throw malformed(`platform sw-component ${i} has an unknown key ${String(k).slice(0, 16)}`);
    }
  }
  const r = new ClaimReader(v, `platform sw-component ${i}`);
  return {
    ...(r.has(1) ? { type: r.text(1, 'measurement-type') } : {}),
    value: r.bytes(2, 'measurement-value', MEASUREMENT_SIZES),
    ...(r.has(4) ? { version: r.text(4, 'version') } : {}),
    signerId: r.bytes(5, 'signer-id'),
    ...(r.has(6) ? { hashAlg: r.hashName(6, 'hash-algo-id') } : {}),
  };
}

export function parsePlatformClaims(payload: Uint8Array): PlatformClaims {
  const r = new ClaimReader(claimsMap(payload, 'platform'), 'platform token');
  const profile = r.text(265, 'profile');
  if (!(PLATFORM_PROFILES as readonly string[]).includes(profile)) {
    throw new VerificationError(
      'UNSUPPORTED_VERSION',
      `CCA platform profile ${JSON.stringify(profile.slice(0, 64))} is not known`,
    );
  }
  const lifecycle = r.integer(2395, 'lifecycle');
  if (!validLifecycle(lifecycle))
    throw malformed(`platform lifecycle 0x${lifecycle.toString(16)} is not a known state`);
  const components = r.array(2399, 'sw-components');
  if (components.length === 0) throw malformed('platform sw-components is empty');
  return {
    profile,
    challenge: r.bytes(10, 'challenge', MEASUREMENT_SIZES),
    implementationId: r.bytes(2396, 'implementation-id', [32]),
    instanceId: r.bytes(256, 'instance-id', [33]),
    config: r.bytes(2401, 'config'),
    lifecycle,
    swComponents: components.map(swComponent),
    ...(r.has(2400) ? { verificationService: r.text(2400, 'verification-service') } : {}),
    hashAlg: r.hashName(2402, 'hash-algo-id'),
  };
}

export function parseRealmClaims(payload: Uint8Array): RealmClaims {
  const r = new ClaimReader(claimsMap(payload, 'realm'), 'realm token');
  let profile: string | undefined;
  if (r.has(265)) {
    profile = r.text(265, 'profile');
    if (profile !== REALM_PROFILE) {
      throw new VerificationError(
        'UNSUPPORTED_VERSION',
        `CCA realm profile ${JSON.stringify(profile.slice(0, 64))} is not known`,
      );
    }
  }
  const rems = r.array(44239, 'extensible-measurements');
  if (rems.length !== 4) throw malformed(`realm extensible-measurements has ${rems.length} slots, not 4`);
  const rak = r.bytes(44237, 'public-key');
  if (profile === undefined && rak.length !== 97)
    throw malformed(`realm public-key is ${rak.length} bytes, not 97`);
  return {
    ...(profile !== undefined ? { profile } : {}),
    challenge: r.bytes(10, 'challenge', [64]),
    personalizationValue: r.bytes(44235, 'personalization-value', [64]),
    initialMeasurement: r.bytes(44238, 'initial-measurement', MEASUREMENT_SIZES),
    extensibleMeasurements: rems.map((v, i) => {
      if (!(v instanceof Uint8Array) || !MEASUREMENT_SIZES.includes(v.length as 32)) {
        throw malformed(`realm extensible-measurement ${i} must be a 32, 48 or 64-byte string`);
      }
      return Buffer.from(v);
    }),
    hashAlg: r.hashName(44236, 'hash-algo-id'),
    rak,
    rakHashAlg: r.hashName(44240, 'public-key-hash-algo-id'),
  };
}

/** Decodes the collection and both tokens' claims; signatures are checked by the verifier. */
export function parseCcaToken(bytes: Uint8Array): CcaToken {
  if (bytes.length > MAX_CCA_TOKEN_BYTES) {
    throw new VerificationError(
      'EVIDENCE_TOO_LARGE',
      `CCA token is ${bytes.length} bytes, over ${MAX_CCA_TOKEN_BYTES}`,
    );
  }
  const item = decodeCbor(bytes, 'CCA token');
  if (!(item instanceof Tag) || Number(item.tag) !== CCA_TOKEN_TAG)
    throw malformed('not a tag-399 collection');
  const map = item.contents;
  if (!(map instanceof Map)) throw malformed('the collection is not a map');
  for (const k of map.keys()) {
    if (k !== CCA_PLATFORM_LABEL && k !== CCA_REALM_LABEL) {
      throw malformed(`unknown key ${String(k).slice(0, 16)} in the collection`);
    }
  }
  const platformBytes = map.get(CCA_PLATFORM_LABEL);
  const realmBytes = map.get(CCA_REALM_LABEL);
  if (!(platformBytes instanceof Uint8Array) || platformBytes.length === 0)
    throw malformed('missing platform token');
  if (!(realmBytes instanceof Uint8Array) || realmBytes.length === 0) throw malformed('missing realm token');
  const platform = decodeCoseSign1(platformBytes, 'CCA platform token');
  const realm = decodeCoseSign1(realmBytes, 'CCA realm token');
  return {
    platform,
    realm,
    platformClaims: parsePlatformClaims(platform.payload),
    realmClaims: parseRealmClaims(realm.payload),
  };
}
