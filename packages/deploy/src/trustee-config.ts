// trustee-operator's TrusteeConfig (`confidentialcontainers.org/v1alpha1`, e.g. its
// `config/samples/trusteeconfig_sample.yaml`), read as the BrokerConfig it amounts to. The fields of
// trustee-operator's TrusteeConfigSpec are read; a field its CRD does not have is dropped with a warning,
// as the API server prunes it; `ibmSE` is refused by name; `tlsConfig` becomes the KBS's TLS settings,
// as trustee-operator writes them.
import { type BrokerConfig, PROFILE_TYPES, SERVICE_TYPES, type TlsSettings } from './broker-config.js';
import { BrokerConfigError, InputError } from './errors.js';
import { Fields } from './fields.js';
import {
  DEFAULT_CRD_GROUP,
  generatedNames,
  isCrdGroup,
  isDns1123Label,
  isDns1123Subdomain,
} from './names.js';

export const TRUSTEE_CONFIG_API_VERSION = 'confidentialcontainers.org/v1alpha1';
export const TRUSTEE_CONFIG_KIND = 'TrusteeConfig';
/** Where trustee-operator's samples are applied (its kustomization's namespace). */
export const TRUSTEE_OPERATOR_NAMESPACE = 'trustee-operator-system';

export interface TrusteeConfigOptions {
  /** Group of the objects rendered from it; default DEFAULT_CRD_GROUP. */
  readonly crdGroup?: string;
  /** Used when the document has no metadata.namespace (the operator's samples have none). */
  readonly namespace?: string;
}

export interface ReadTrusteeConfig {
  readonly config: BrokerConfig;
  readonly warnings: readonly string[];
}

function prune(f: Fields, warnings: string[]): void {
  for (const k of f.unread()) {
    const likely = f.suggest(k);
    warnings.push(
      `TrusteeConfig ${f.path ? `${f.path}.` : ''}${k} is not a TrusteeConfig field${likely !== undefined ? ` (did you mean ${likely}?)` : ''}: ignored, as the API server prunes it`,
    );
  }
}

function tlsSecret(f: Fields | undefined, warnings: string[]): string | undefined {
  if (f === undefined) return undefined;
  const v = f.optString('tlsSecretName');
  prune(f, warnings);
  if (v === undefined || v === '') return undefined;
  if (!isDns1123Subdomain(v))
    throw new BrokerConfigError(`${f.path}.tlsSecretName`, `${JSON.stringify(v)} is not a valid Secret name`);
  return v;
}

function read(doc: unknown, options: TrusteeConfigOptions, warnings: string[]): BrokerConfig {
  const root = Fields.of(doc, '');
  const apiVersion = root.string('apiVersion');
  const kind = root.string('kind');
  if (kind !== TRUSTEE_CONFIG_KIND) {
    throw new BrokerConfigError('kind', `must be ${TRUSTEE_CONFIG_KIND}, found ${JSON.stringify(kind)}`);
  }
  if (apiVersion !== TRUSTEE_CONFIG_API_VERSION) {
    throw new BrokerConfigError(
      'apiVersion',
      `must be ${TRUSTEE_CONFIG_API_VERSION}, found ${JSON.stringify(apiVersion)}`,
    );
  }
  const crdGroup = options.crdGroup ?? DEFAULT_CRD_GROUP;
  if (!isCrdGroup(crdGroup)) {
    throw new BrokerConfigError(
      'apiVersion',
      `--crd-group ${JSON.stringify(crdGroup)} is not a DNS name with a dot`,
    );
  }
  const meta = root.fields('metadata');
  const name = meta.string('name');
  if (!isDns1123Label(name) || generatedNames(name).attestationCertSecret.length > 253) {
    throw new BrokerConfigError(
      'metadata.name',
      `${JSON.stringify(name)} is not a DNS-1123 label short enough for the generated names`,
    );
  }
  let namespace = meta.optString('namespace') ?? options.namespace;
  if (namespace === undefined) {
    namespace = TRUSTEE_OPERATOR_NAMESPACE;
    warnings.push(
      `TrusteeConfig has no metadata.namespace: rendering into ${namespace}, where trustee-operator applies its samples (--namespace chooses another)`,
    );
  }
  if (!isDns1123Label(namespace)) {
    throw new BrokerConfigError(
      'metadata.namespace',
      `${JSON.stringify(namespace)} is not a valid namespace name`,
    );
  }
  const labels = meta.optStringMap('labels') ?? {};
  meta.optStringMap('annotations');
  for (const k of ['uid', 'resourceVersion', 'generation', 'creationTimestamp', 'managedFields'])
    meta.ignore(k);
  prune(meta, warnings);

  const spec = root.optFields('spec') ?? Fields.of({}, 'spec');
  const profileType = spec.optEnum('profileType', PROFILE_TYPES) ?? 'Restricted';
  const kbsServiceType = spec.optEnum('kbsServiceType', SERVICE_TYPES) ?? 'ClusterIP';
  const httpsTlsSecretName = tlsSecret(spec.optFields('httpsSpec'), warnings);
  const tokenTlsSecretName = tlsSecret(spec.optFields('attestationTokenVerificationSpec'), warnings);
  if (spec.has('ibmSE')) {
    throw new BrokerConfigError('spec.ibmSE', 'IBM Secure Execution is not supported by this KBS');
  }
  spec.ignore('ibmSE');
  const tlsFields = spec.optFields('tlsConfig');
  const tls = tlsFields === undefined ? undefined : tlsConfig(tlsFields, warnings);
  prune(spec, warnings);
  root.ignore('status');
  prune(root, warnings);
  if (
    profileType === 'Restricted' &&
    (httpsTlsSecretName === undefined || tokenTlsSecretName === undefined)
  ) {
    throw new BrokerConfigError(
      httpsTlsSecretName === undefined
        ? 'spec.httpsSpec.tlsSecretName'
        : 'spec.attestationTokenVerificationSpec.tlsSecretName',
      'is required with profileType Restricted',
    );
  }
  return {
    crdGroup,
    name,
    namespace,
    labels,
    profileType,
    kbsServiceType,
    ...(httpsTlsSecretName !== undefined && { httpsTlsSecretName }),
    ...(tokenTlsSecretName !== undefined && { tokenTlsSecretName }),
    kbsSecretResources: [],
    replicas: 1,
    ...(tls !== undefined && { tls }),
  };
}

export const TLS_PROFILES = ['old', 'intermediate', 'modern', 'custom'] as const;
/** What this KBS's TLS speaks (Node.js): trustee-operator's CRD also allows 1.0 and 1.1. */
const KBS_TLS_VERSIONS = ['1.2', '1.3'];

/** trustee-operator's IANA → OpenSSL cipher names (`convertSingleCipher`, internal/controller/tlsconfig.go). */
const CIPHER_NAMES: Readonly<Record<string, string>> = {
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-RSA-CHACHA20-POLY1305',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-ECDSA-CHACHA20-POLY1305',
  TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256: 'DHE-RSA-CHACHA20-POLY1305',
  TLS_RSA_WITH_AES_128_CBC_SHA: 'AES128-SHA',
  TLS_RSA_WITH_AES_256_CBC_SHA: 'AES256-SHA',
  TLS_RSA_WITH_AES_128_CBC_SHA256: 'AES128-SHA256',
  TLS_RSA_WITH_AES_256_CBC_SHA256: 'AES256-SHA256',
  TLS_RSA_WITH_AES_128_GCM_SHA256: 'AES128-GCM-SHA256',
  TLS_RSA_WITH_AES_256_GCM_SHA384: 'AES256-GCM-SHA384',
  TLS_RSA_WITH_3DES_EDE_CBC_SHA: 'DES-CBC3-SHA',
  TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA: 'ECDHE-RSA-DES-CBC3-SHA',
};

/**
 * One cipher as trustee-operator passes it to the KBS: TLS 1.3 suites as they are, a few IANA names
 * by table, the rest by rule (drop `TLS_`, `_WITH_` → `-`, `_` → `-`, a part that starts with a digit
 * joined to the one before: `AES_128` → `AES128`). OpenSSL names pass through the rule unchanged.
 */
export function opensslCipherName(cipher: string): string {
  if (cipher.startsWith('TLS_AES_') || cipher.startsWith('TLS_CHACHA20_')) return cipher;
  const mapped = Object.hasOwn(CIPHER_NAMES, cipher) ? CIPHER_NAMES[cipher] : undefined;
  if (mapped !== undefined) return mapped;
  const parts = cipher.replace(/^TLS_/, '').replace('_WITH_', '-').split('_');
  const out: string[] = [];
  for (const [i, part] of parts.entries()) {
    if (i > 0 && /^[0-9]/.test(part) && out.length > 0) out[out.length - 1] += part;
    else out.push(part);
  }
  return out.join('-');
}

const TOKEN = /^[A-Za-z0-9_.-]{1,64}$/;

/** `spec.tlsConfig` (trustee-operator's TlsConfig) as the `[http_server]` keys the operator writes. */
function tlsConfig(f: Fields, warnings: string[]): TlsSettings {
  const rawProfile = f.optString('profile');
  // trustee-operator: an empty or absent profile is intermediate.
  const profile =
    rawProfile === undefined || rawProfile === ''
      ? 'intermediate'
      : (f.optEnum('profile', TLS_PROFILES) as TlsSettings['profile']);
  const minVersion = f.optString('minVersion');
  const maxVersion = f.optString('maxVersion');
  const ciphers = f.optStringArray('ciphers', 64);
  const groups = f.optStringArray('groups', 32);
  prune(f, warnings);
  const custom = { minVersion, maxVersion, ciphers, groups };
  const given = Object.entries(custom).filter(([, v]) => v !== undefined && v.length > 0);
  if (profile !== 'custom') {
    for (const [k] of given) {
      warnings.push(
        `TrusteeConfig spec.tlsConfig.${k} applies to profile custom only: ignored with profile ${profile}, as trustee-operator does`,
      );
    }
    return { profile };
  }
  for (const [k, v] of [
    ['minVersion', minVersion],
    ['maxVersion', maxVersion],
  ] as const) {
    if (v === undefined || v === '') continue;
    if (!/^1\.[0-3]$/.test(v)) {
      throw new BrokerConfigError(
        `spec.tlsConfig.${k}`,
        `${JSON.stringify(v.slice(0, 16))} is not 1.0, 1.1, 1.2 or 1.3`,
      );
    }
    if (!KBS_TLS_VERSIONS.includes(v)) {
      throw new BrokerConfigError(`spec.tlsConfig.${k}`, `TLS ${v}: this KBS speaks TLS 1.2 and 1.3 only`);
    }
  }
  if (minVersion && maxVersion && minVersion > maxVersion) {
    throw new BrokerConfigError('spec.tlsConfig', 'minVersion must not be greater than maxVersion');
  }
  for (const [k, list] of [
    ['ciphers', ciphers],
    ['groups', groups],
  ] as const) {
    for (const [i, v] of (list ?? []).entries()) {
      if (!TOKEN.test(v)) {
        throw new BrokerConfigError(
          `spec.tlsConfig.${k}[${i}]`,
          `${JSON.stringify(v.slice(0, 40))} is not a ${k === 'ciphers' ? 'cipher suite' : 'group'} name`,
        );
      }
    }
  }
  return {
    profile,
    ...(minVersion ? { minVersion } : {}),
    ...(maxVersion ? { maxVersion } : {}),
    ...(ciphers !== undefined && ciphers.length > 0 && { ciphers: ciphers.map(opensslCipherName).join(':') }),
    ...(groups !== undefined && groups.length > 0 && { groups: groups.join(':') }),
  };
}

/** Reads a TrusteeConfig document; errors name the field (`TrusteeConfig spec.ibmSE: …`). */
export function parseTrusteeConfig(doc: unknown, options: TrusteeConfigOptions = {}): ReadTrusteeConfig {
  const warnings: string[] = [];
  try {
    return { config: read(doc, options, warnings), warnings };
  } catch (e) {
    if (e instanceof BrokerConfigError) {
      throw new InputError(e.message.replace(/^BrokerConfig /, 'TrusteeConfig '), { cause: e });
    }
    throw e;
  }
}
