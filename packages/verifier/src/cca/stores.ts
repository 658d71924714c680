// The CCA verifier's trust anchors and reference values, in Veraison ccatoken's JSON stores, and
// trustee's CCA config file (`CCA_CONFIG_FILE`) that names them:
//   tastore.json  [{"pkey": JWK, "implementation-id": hex32, "instance-id": hex33}]
//   rvstore.json  {"platform": [{"implementation-id", "platform-configuration",
//                   "sw-components": [{"measurement-value", "signer-id", "version"?, "component-type"?}]}],
//                  "realm": [...]}
import { createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { quote, VerificationError } from '../errors.js';

/** trustee's default `CCA_CONFIG_FILE`. */
export const DEFAULT_CCA_CONFIG_PATH = '/opt/confidential-containers/attestation-service/cca/config.json';
export const CCA_CONFIG_ENV = 'CCA_CONFIG_FILE';
const MAX_STORE_BYTES = 4 * 1024 * 1024;

export interface TrustAnchor {
  readonly key: KeyObject;
  readonly implementationId: Buffer;
  readonly instanceId: Buffer;
}

export interface SwComponentRefValue {
  readonly value: Buffer;
  readonly signerId: Buffer;
  readonly version?: string;
  readonly type?: string;
}

export interface PlatformRefValue {
  readonly implementationId: Buffer;
  readonly config: Buffer;
  readonly swComponents: readonly SwComponentRefValue[];
}

export interface CcaStores {
  readonly trustAnchors: readonly TrustAnchor[];
  readonly platformRefValues: readonly PlatformRefValue[];
}

function invalid(what: string, message: string): VerificationError {
  return new VerificationError('COLLATERAL_INVALID', `CCA ${what}: ${message}`);
}

function obj(v: unknown, what: string, where: string): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw invalid(what, `${where} must be an object`);
  return v as Record<string, unknown>;
}

function hexField(o: Record<string, unknown>, key: string, what: string, length?: number): Buffer {
  const v = o[key];
  if (typeof v !== 'string' || !/^(?:[0-9a-fA-F]{2})*$/.test(v))
    throw invalid(what, `${quote(key)} must be hex`);
  const b = Buffer.from(v, 'hex');
  if (length !== undefined && b.length !== length)
    throw invalid(what, `${quote(key)} must be ${length} bytes`);
  return b;
}

function optText(o: Record<string, unknown>, key: string, what: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(what, `${quote(key)} must be a string`);
  return v;
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new VerificationError('COLLATERAL_INVALID', `CCA ${what} is not JSON`, { cause: e });
  }
}

/** A TA store: one CPAK (JWK public key) per platform instance. */
export function parseTaStore(text: string): TrustAnchor[] {
  const what = 'TA store';
  const list = parseJson(text, what);
  if (!Array.isArray(list)) throw invalid(what, 'must be a JSON array');
  return list.map((entry, i) => {
    const o = obj(entry, what, `entry ${i}`);
    let key: KeyObject;
    try {
      const jwk = obj(o.pkey, what, `entry ${i} pkey`);
      if ('d' in jwk) throw new VerificationError('COLLATERAL_INVALID', 'a private key');
      key = createPublicKey({ key: jwk as import('node:crypto').JsonWebKey, format: 'jwk' });
    } catch (e) {
      throw new VerificationError('COLLATERAL_INVALID', `CCA TA store entry ${i}: pkey is not a public JWK`, {
        cause: e,
      });
    }
    return {
      key,
      implementationId: hexField(o, 'implementation-id', what, 32),
      instanceId: hexField(o, 'instance-id', what, 33),
    };
  });
}

/** The platform part of an RV store (the realm part does not decide acceptance). */
export function parseRvStore(text: string): PlatformRefValue[] {
  const what = 'RV store';
  const store = obj(parseJson(text, what), what, 'the store');
  if (store.platform === undefined || store.platform === null) return [];
  if (!Array.isArray(store.platform)) throw invalid(what, '"platform" must be an array');
  return store.platform.map((entry, i) => {
    const o = obj(entry, what, `platform entry ${i}`);
    const comps = o['sw-components'];
    if (!Array.isArray(comps)) throw invalid(what, `platform entry ${i} "sw-components" must be an array`);
    return {
      implementationId: hexField(o, 'implementation-id', what, 32),
      config: hexField(o, 'platform-configuration', what),
      swComponents: comps.map((c, j) => {
        const co = obj(c, what, `platform entry ${i} sw-component ${j}`);
        const version = optText(co, 'version', what);
        const type = optText(co, 'component-type', what);
        return {
          value: hexField(co, 'measurement-value', what),
          signerId: hexField(co, 'signer-id', what),
          ...(version !== undefined ? { version } : {}),
          ...(type !== undefined ? { type } : {}),
        };
      }),
    };
  });
}

function readBounded(path: string, what: string): string {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new VerificationError('COLLATERAL_UNAVAILABLE', `CCA ${what} ${quote(path, 200)} cannot be read`, {
      cause: e,
    });
  }
  if (bytes.length > MAX_STORE_BYTES)
    throw invalid(what, `${quote(path, 200)} is over ${MAX_STORE_BYTES} bytes`);
  return bytes.toString('utf8');
}

export type CcaVerifierConfig =
  | { readonly type: 'local'; readonly taStore: string; readonly rvStore: string }
  | { readonly type: 'remote'; readonly address: string; readonly caCert?: string };

/** trustee's CCA config file: `{"cca-verifier": {"type": "local", "ta-store", "rv-store"}}` or remote. */
export function parseCcaConfig(text: string): CcaVerifierConfig {
  const what = 'config';
  const v = obj(obj(parseJson(text, what), what, 'the config')['cca-verifier'], what, '"cca-verifier"');
  const str = (key: string): string => {
    const s = v[key];
    if (typeof s !== 'string') throw invalid(what, `"cca-verifier".${quote(key)} must be a string`);
    return s;
  };
  if (v.type === 'local') return { type: 'local', taStore: str('ta-store'), rvStore: str('rv-store') };
  if (v.type === 'remote') {
    const caCert = optText(v, 'ca-cert', what);
    return { type: 'remote', address: str('address'), ...(caCert !== undefined ? { caCert } : {}) };
  }
  throw invalid(what, `unknown "cca-verifier" type ${quote(String(v.type))}, expected local or remote`);
}

export function loadCcaConfig(path: string): CcaVerifierConfig {
  return parseCcaConfig(readBounded(path, 'config'));
}

/** Reads both stores named by a local config; called per request, as trustee re-reads them. */
export function loadCcaStores(config: { readonly taStore: string; readonly rvStore: string }): CcaStores {
  return {
    trustAnchors: parseTaStore(readBounded(config.taStore, 'TA store')),
    platformRefValues: parseRvStore(readBounded(config.rvStore, 'RV store')),
  };
}
