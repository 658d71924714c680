// trustee-operator's TrusteeConfig (`confidentialcontainers.org/v1alpha1`, e.g. its
// `config/samples/trusteeconfig_sample.yaml`), read as the BrokerConfig it amounts to. The fields of
// trustee-operator's TrusteeConfigSpec are read; a field its CRD does not have is dropped with a warning,
// as the API server prunes it; `ibmSE` and a TLS profile other than the default are refused by name.
import { type BrokerConfig, PROFILE_TYPES, SERVICE_TYPES } from './broker-config.js';
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
    warnings.push(
      `TrusteeConfig ${f.path ? `${f.path}.` : ''}${k} is not a TrusteeConfig field: ignored, as the API server prunes it`,
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
  const tls = spec.optFields('tlsConfig');
  if (tls !== undefined) {
    const profile = tls.optString('profile');
    const custom = ['minVersion', 'maxVersion', 'ciphers', 'groups'].filter((k) => tls.has(k));
    for (const k of custom) tls.ignore(k);
    if ((profile !== undefined && profile !== '' && profile !== 'intermediate') || custom.length > 0) {
      throw new BrokerConfigError(
        'spec.tlsConfig',
        `${custom.length > 0 ? custom.join(', ') : `profile ${JSON.stringify(profile)}`}: brokerctl render writes the intermediate TLS profile only`,
      );
    }
    prune(tls, warnings);
  }
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
