// The BrokerConfig resource (`{crd_group}/v1alpha1`, kind BrokerConfig), read strictly: unknown fields are
// refused by name, values are checked against the Kubernetes rules they end up in.
import { BrokerConfigError } from './errors.js';
import { Fields } from './fields.js';
import {
  CRD_VERSION,
  DEFAULT_CRD_GROUP,
  generatedNames,
  isCrdGroup,
  isDns1123Label,
  isDns1123Subdomain,
} from './names.js';

export const PROFILE_TYPES = ['Restricted', 'Permissive'] as const;
export type ProfileType = (typeof PROFILE_TYPES)[number];
export const SERVICE_TYPES = ['ClusterIP', 'NodePort', 'LoadBalancer'] as const;
export type ServiceType = (typeof SERVICE_TYPES)[number];

/** Replicas beyond this are refused: a typo like 100 would start a hundred KBS pods. */
export const MAX_REPLICAS = 32;
export const MAX_SECRET_RESOURCES = 256;
export const DEFAULT_REDIS_URL_KEY = 'url';
export const DEFAULT_POSTGRES_URL_KEY = 'url';

export interface RedisSpec {
  /** Secret in the service namespace holding the Redis URL (it may embed a password). */
  readonly urlSecretName: string;
  readonly urlSecretKey: string;
}

export interface PostgresSpec {
  /** Secret in the service namespace holding the PostgreSQL URI (`postgresql://user:password@host:port/db`). */
  readonly urlSecretName: string;
  readonly urlSecretKey: string;
}

export interface BrokerConfig {
  readonly crdGroup: string;
  readonly name: string;
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly profileType: ProfileType;
  readonly kbsServiceType: ServiceType;
  /** kubernetes.io/tls Secret of the HTTPS key and certificate. */
  readonly httpsTlsSecretName?: string;
  /** kubernetes.io/tls Secret of the attestation-token signing key (EC P-256) and certificate. */
  readonly tokenTlsSecretName?: string;
  readonly kbsSecretResources: readonly string[];
  readonly replicas: number;
  /** Sessions and state in Redis; with `postgres` too, only the sessions. */
  readonly redis?: RedisSpec;
  /** Policies, reference values and resources (and, without `redis`, the sessions) in PostgreSQL. */
  readonly postgres?: PostgresSpec;
  readonly kbsImage?: string;
  /** `spec.collateralSpec`: where the KBS fetches Intel collateral and AMD VCEKs (trustee's defaults when unset). */
  readonly collateral?: CollateralSpec;
  /** TrusteeConfig `spec.tlsConfig`, as trustee-operator writes it into `[http_server]`. */
  readonly tls?: TlsSettings;
  /** trustee-operator's `kbsLocalCertCacheSpec`: Secrets of offline AMD VCEKs, each mounted at its path. */
  readonly localCertCache?: readonly LocalCertCacheEntry[];
  /** trustee-operator's `kbsGpuAttestationPolicyConfigMapName`: a ConfigMap with `default_gpu.rego`. */
  readonly gpuAttestationPolicyConfigMap?: string;
}

/** trustee's `[http_server]` TLS keys, as trustee-operator's `GetTLSConfigFromTlsConfig` derives them. */
export interface TlsSettings {
  readonly profile: 'old' | 'intermediate' | 'modern' | 'custom';
  readonly minVersion?: string;
  readonly maxVersion?: string;
  /** OpenSSL names joined by `:`. */
  readonly ciphers?: string;
  /** Joined by `:`. */
  readonly groups?: string;
}

export interface LocalCertCacheEntry {
  readonly secretName: string;
  readonly mountPath: string;
}

/** trustee's default OfflineStore root; trustee-operator mounts a cache Secret at `<root>/vcek` by default. */
export const KDS_STORE_DIR = '/opt/confidential-containers/attestation-service/kds-store';
export const DEFAULT_CERT_CACHE_MOUNT_PATH = `${KDS_STORE_DIR}/vcek`;
export const MAX_CERT_CACHE_SECRETS = 64;

/** `kbsLocalCertCacheSpec: {secrets: [{secretName, mountPath?}]}`, trustee-operator's shape. */
function localCertCacheSpec(f: Fields): LocalCertCacheEntry[] {
  const list = f.optList('secrets', MAX_CERT_CACHE_SECRETS) ?? [];
  f.finish();
  const seen = new Set<string>();
  return list.map((item) => {
    const secretName = secretName_(item, 'secretName');
    const mountPath = item.optString('mountPath') || DEFAULT_CERT_CACHE_MOUNT_PATH;
    if (!/^\/[^\s:]{0,1023}$/.test(mountPath) || mountPath.split('/').includes('..')) {
      throw new BrokerConfigError(
        `${item.path}.mountPath`,
        `${JSON.stringify(mountPath.slice(0, 80))} is not an absolute path`,
      );
    }
    if (seen.has(mountPath)) {
      throw new BrokerConfigError(
        `${item.path}.mountPath`,
        `${mountPath} is already the mount path of another Secret`,
      );
    }
    seen.add(mountPath);
    item.finish();
    return { secretName, mountPath };
  });
}

function secretName_(f: Fields, key: string): string {
  return secretName(f, key, true) as string;
}

/** trustee-operator's KbsConfig fields for its three-container layout, which render does not write. */
const MICROSERVICES_REASON =
  "brokerctl render runs the attestation service and the RVPS inside the kbs container; for trustee's three-container MicroservicesDeployment, give trustee-operator a KbsConfig and point it at the attestation-service and rvps images (AS_IMAGE_NAME, RVPS_IMAGE_NAME, KBS_IMAGE_NAME_MICROSERVICES)";

/** Overrides of the collateral services: a PCCS or mirror instead of Intel's PCS and AMD's KDS. */
export interface CollateralSpec {
  /** `dcap_verifier.collateral_service`: https://, http:// or file:// (the PCS Client Tool's JSON). */
  readonly intelCollateralService?: string;
  readonly tcbUpdateType?: 'early' | 'standard';
  /** `snp_verifier.vcek_sources = [{ type = "KDS", base_url }]`. */
  readonly amdKdsUrl?: string;
}

const URL_RE = /^(?:https?:\/\/[^\s/]+(?:\/[^\s]*)?|file:\/\/\/[^\s]*)$/;

function collateralSpec(f: Fields): CollateralSpec {
  const url = (key: string, schemes: string) => {
    const v = f.optString(key);
    if (
      v !== undefined &&
      (v.length > 2048 || !URL_RE.test(v) || (!schemes.includes('file') && v.startsWith('file:')))
    ) {
      throw new BrokerConfigError(
        `${f.path}.${key}`,
        `${JSON.stringify(v.slice(0, 80))} is not an ${schemes} URL`,
      );
    }
    return v;
  };
  const intelCollateralService = url('intelCollateralService', 'https, http or file');
  const tcbUpdateType = f.optEnum('tcbUpdateType', ['early', 'standard'] as const);
  const amdKdsUrl = url('amdKdsUrl', 'https or http');
  f.finish();
  return {
    ...(intelCollateralService !== undefined && { intelCollateralService }),
    ...(tcbUpdateType !== undefined && { tcbUpdateType }),
    ...(amdKdsUrl !== undefined && { amdKdsUrl }),
  };
}

const KNOWN_KIND = 'BrokerConfig';

function secretName(f: Fields, key: string, required: boolean): string | undefined {
  const v = required ? f.string(key) : f.optString(key);
  if (v === undefined || v === '') return undefined;
  if (!isDns1123Subdomain(v)) {
    throw new BrokerConfigError(`${f.path}.${key}`, `${JSON.stringify(v)} is not a valid Secret name`);
  }
  return v;
}

/** `redisSpec` / `postgresSpec`: the Secret and key whose value the KBS gets as REDIS_URL / POSTGRES_URL. */
function urlSecretSpec(
  f: Fields,
  defaultKey: string,
  hints: Record<string, string> = {},
): { urlSecretName: string; urlSecretKey: string } {
  const urlSecretName = secretName(f, 'urlSecretName', true) as string;
  const urlSecretKey = f.optString('urlSecretKey') ?? defaultKey;
  if (!/^[-._a-zA-Z0-9]{1,253}$/.test(urlSecretKey)) {
    throw new BrokerConfigError(
      `${f.path}.urlSecretKey`,
      `${JSON.stringify(urlSecretKey)} is not a valid Secret key`,
    );
  }
  f.finish(hints);
  return { urlSecretName, urlSecretKey };
}

/** trustee's `[storage_backend.backends.postgres]` keys, which here travel inside the URI in the Secret. */
const POSTGRES_CONNECTION_HINT =
  'put the connection, password included, in the postgresql:// URI of the Secret urlSecretName names: the KBS reads it as POSTGRES_URL, and nothing of it is written into a ConfigMap';
const POSTGRES_SPEC_HINTS: Record<string, string> = Object.fromEntries(
  ['url', 'uri', 'host', 'port', 'db', 'database', 'username', 'user', 'password'].map((k) => [
    k,
    POSTGRES_CONNECTION_HINT,
  ]),
);

/**
 * Reads a BrokerConfig document. `crdGroup`, when given, must match the document's apiVersion; otherwise the
 * group is taken from the document.
 */
export function parseBrokerConfig(doc: unknown, options: { crdGroup?: string } = {}): BrokerConfig {
  const root = Fields.of(doc, '');
  const apiVersion = root.string('apiVersion');
  const kind = root.string('kind');
  if (kind !== KNOWN_KIND)
    throw new BrokerConfigError('kind', `must be ${KNOWN_KIND}, found ${JSON.stringify(kind)}`);
  const slash = apiVersion.lastIndexOf('/');
  const group = apiVersion.slice(0, Math.max(slash, 0));
  const version = apiVersion.slice(slash + 1);
  const wanted = options.crdGroup;
  if (wanted !== undefined && !isCrdGroup(wanted)) {
    throw new BrokerConfigError(
      'apiVersion',
      `--crd-group ${JSON.stringify(wanted)} is not a DNS name with a dot`,
    );
  }
  if (
    slash < 0 ||
    version !== CRD_VERSION ||
    !isCrdGroup(group) ||
    (wanted !== undefined && group !== wanted)
  ) {
    throw new BrokerConfigError(
      'apiVersion',
      `must be ${wanted ?? `<crd_group>`}/${CRD_VERSION} (default group ${DEFAULT_CRD_GROUP}), found ${JSON.stringify(apiVersion)}`,
    );
  }

  const meta = root.fields('metadata');
  const name = meta.string('name');
  if (!isDns1123Label(name)) {
    throw new BrokerConfigError(
      'metadata.name',
      `${JSON.stringify(name)} is not a DNS-1123 label (a-z, 0-9, -; at most 63)`,
    );
  }
  // The longest generated name must still be a valid object name.
  if (generatedNames(name).attestationCertSecret.length > 253) {
    throw new BrokerConfigError('metadata.name', 'is too long for the generated object names');
  }
  const namespace = meta.string('namespace');
  if (!isDns1123Label(namespace)) {
    throw new BrokerConfigError(
      'metadata.namespace',
      `${JSON.stringify(namespace)} is not a valid namespace name`,
    );
  }
  const labels = meta.optStringMap('labels') ?? {};
  // Fields the API server adds; harmless when an exported object is rendered again.
  meta.optStringMap('annotations');
  for (const k of ['uid', 'resourceVersion', 'generation', 'creationTimestamp', 'managedFields'])
    meta.ignore(k);
  meta.finish();

  const spec = root.fields('spec');
  const profileType = spec.optEnum('profileType', PROFILE_TYPES) ?? 'Restricted';
  const kbsServiceType = spec.optEnum('kbsServiceType', SERVICE_TYPES) ?? 'ClusterIP';

  const https = spec.optFields('httpsSpec');
  const httpsTlsSecretName = https === undefined ? undefined : secretName(https, 'tlsSecretName', false);
  https?.finish();
  const token = spec.optFields('attestationTokenVerificationSpec');
  const tokenTlsSecretName = token === undefined ? undefined : secretName(token, 'tlsSecretName', false);
  token?.finish();
  const resources = spec.optStringArray('kbsSecretResources', MAX_SECRET_RESOURCES) ?? [];
  const seen = new Set<string>();
  for (const [i, r] of resources.entries()) {
    if (!isDns1123Subdomain(r)) {
      throw new BrokerConfigError(
        `spec.kbsSecretResources[${i}]`,
        `${JSON.stringify(r)} is not a valid Secret name`,
      );
    }
    if (seen.has(r))
      throw new BrokerConfigError(`spec.kbsSecretResources[${i}]`, `${JSON.stringify(r)} is listed twice`);
    seen.add(r);
  }

  const replicas = spec.optInt('replicas', 1, MAX_REPLICAS) ?? 1;
  const redisFields = spec.optFields('redisSpec');
  const redis: RedisSpec | undefined =
    redisFields === undefined ? undefined : urlSecretSpec(redisFields, DEFAULT_REDIS_URL_KEY);
  const postgresFields = spec.optFields('postgresSpec');
  const postgres: PostgresSpec | undefined =
    postgresFields === undefined
      ? undefined
      : urlSecretSpec(postgresFields, DEFAULT_POSTGRES_URL_KEY, POSTGRES_SPEC_HINTS);
  const kbsImage = spec.optString('kbsImage');
  if (kbsImage !== undefined && !/^[^\s]{1,512}$/.test(kbsImage)) {
    throw new BrokerConfigError('spec.kbsImage', 'must be an image reference without spaces');
  }
  const collateralFields = spec.optFields('collateralSpec');
  const collateral = collateralFields === undefined ? undefined : collateralSpec(collateralFields);
  const cacheFields = spec.optFields('kbsLocalCertCacheSpec');
  const localCertCache = cacheFields === undefined ? [] : localCertCacheSpec(cacheFields);
  const gpuPolicy = spec.optString('kbsGpuAttestationPolicyConfigMapName');
  if (gpuPolicy !== undefined && gpuPolicy !== '' && !isDns1123Subdomain(gpuPolicy)) {
    throw new BrokerConfigError(
      'spec.kbsGpuAttestationPolicyConfigMapName',
      `${JSON.stringify(gpuPolicy)} is not a valid ConfigMap name`,
    );
  }
  const deploymentType = spec.optEnum('kbsDeploymentType', [
    'AllInOneDeployment',
    'MicroservicesDeployment',
  ] as const);
  if (deploymentType === 'MicroservicesDeployment') {
    throw new BrokerConfigError('spec.kbsDeploymentType', `MicroservicesDeployment: ${MICROSERVICES_REASON}`);
  }
  for (const k of ['kbsAsConfigMapName', 'kbsRvpsConfigMapName']) {
    if (spec.has(k))
      throw new BrokerConfigError(`spec.${k}`, `is a MicroservicesDeployment field: ${MICROSERVICES_REASON}`);
  }
  spec.finish({
    profile: 'did you mean profileType?',
    tlsSecretName: 'it belongs under httpsSpec or attestationTokenVerificationSpec',
    redis: 'did you mean redisSpec?',
    postgres: 'did you mean postgresSpec?',
    postgresql: 'did you mean postgresSpec?',
    postgresqlSpec: 'did you mean postgresSpec?',
    postgreSQLSpec: 'did you mean postgresSpec?',
    image: 'did you mean kbsImage?',
  });
  root.ignore('status');
  root.finish();

  // Checks across fields come after the unknown-field check, so a misspelt field is named as such
  // rather than reported as the field it should have set being absent.
  if (profileType === 'Restricted') {
    if (httpsTlsSecretName === undefined) {
      throw new BrokerConfigError(
        'spec.httpsSpec.tlsSecretName',
        'is required with profileType Restricted (HTTPS is on)',
      );
    }
    if (tokenTlsSecretName === undefined) {
      throw new BrokerConfigError(
        'spec.attestationTokenVerificationSpec.tlsSecretName',
        'is required with profileType Restricted (signed-token verification is on)',
      );
    }
  }

  if (
    redis !== undefined &&
    postgres !== undefined &&
    redis.urlSecretName === postgres.urlSecretName &&
    redis.urlSecretKey === postgres.urlSecretKey
  ) {
    throw new BrokerConfigError(
      'spec.postgresSpec.urlSecretKey',
      `names the same Secret key as spec.redisSpec (${postgres.urlSecretName}/${postgres.urlSecretKey}): the Redis URL and the PostgreSQL URI need a key each`,
    );
  }
  if (replicas > 1 && redis === undefined && postgres === undefined) {
    throw new BrokerConfigError(
      'spec.replicas',
      `${replicas} replicas need spec.redisSpec or spec.postgresSpec: handshake sessions must be shared so that any replica can finish one another began`,
    );
  }

  return {
    crdGroup: group,
    name,
    namespace,
    labels,
    profileType,
    kbsServiceType,
    ...(httpsTlsSecretName !== undefined && { httpsTlsSecretName }),
    ...(tokenTlsSecretName !== undefined && { tokenTlsSecretName }),
    kbsSecretResources: resources,
    replicas,
    ...(redis !== undefined && { redis }),
    ...(postgres !== undefined && { postgres }),
    ...(kbsImage !== undefined && { kbsImage }),
    ...(collateral !== undefined && { collateral }),
    ...(localCertCache.length > 0 && { localCertCache }),
    ...(gpuPolicy !== undefined && gpuPolicy !== '' && { gpuAttestationPolicyConfigMap: gpuPolicy }),
  };
}
