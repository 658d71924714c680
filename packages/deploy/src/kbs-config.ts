// The KBS configuration file (trustee's kbs-config.toml keys) of a rendered deployment, and the paths
// inside the KBS container where the generated Secrets and ConfigMaps are mounted.
import { type BrokerConfig, KDS_STORE_DIR } from './broker-config.js';
import { KBS_PORT, METRICS_PORT } from './names.js';
import { INTEL_PCS_URL } from './policies.js';
import { tomlString, tomlStringArray } from './toml-text.js';

/** Where things live in the KBS container. Secret and ConfigMap keys are the last path segments. */
export const KBS_PATHS = {
  configDir: '/etc/kbs-config',
  configKey: 'kbs-config.toml',
  httpsKeyDir: '/etc/https-key',
  httpsKeyKey: 'privateKey',
  httpsCertDir: '/etc/https-cert',
  httpsCertKey: 'certificate',
  attestationKeyDir: '/etc/attestation-key',
  attestationKeyKey: 'token.key',
  attestationCertDir: '/etc/attestation-cert',
  attestationCertKey: 'token.crt',
  authDir: '/etc/auth-secret',
  authKey: 'publicKey',
  /** `[mounted_files] attestation_policies`: each `<id>.rego` is attestation policy `<id>`. */
  attestationPolicyDir: '/etc/kbs/attestation-policy',
  attestationPolicyKey: 'default_cpu.rego',
  /** `[mounted_files] resource_policy`. */
  resourcePolicyDir: '/etc/kbs/resource-policy',
  resourcePolicyKey: 'resource-policy.rego',
  /** `[mounted_files] reference_values`: `.json` files of RVPS messages. */
  referenceValueDir: '/etc/kbs/reference-values',
  referenceValueKey: 'reference-values.json',
  /** `[mounted_files] resources`: `<repo>/<type>/<tag>`, one mounted Secret per `default/<secret>/`. */
  resourcesDir: '/etc/kbs/resources',
  tdxQcnlFile: '/etc/sgx_default_qcnl.conf',
  tdxQcnlKey: 'sgx_default_qcnl.conf',
  tmpDir: '/tmp',
} as const;

export const KBS_CONFIG_FILE = `${KBS_PATHS.configDir}/${KBS_PATHS.configKey}`;

/** Admin role of the bearer tokens the admin API accepts, and the endpoints it may call. */
export const ADMIN_ROLE = 'admin';
export const ADMIN_ENDPOINTS = '^/kbs/v0/.+$';

/** Environment variable that carries the Redis URL from its Secret (trustee reads it before `url`). */
export const REDIS_URL_ENV = 'REDIS_URL';
/** Environment variable that carries the PostgreSQL URI from its Secret (it replaces the table's keys). */
export const POSTGRES_URL_ENV = 'POSTGRES_URL';

/** Text of `kbs-config.toml` for a BrokerConfig. */
export function renderKbsConfigToml(cfg: BrokerConfig): string {
  const p = KBS_PATHS;
  const https = cfg.httpsTlsSecretName !== undefined;
  const signedTokens = cfg.tokenTlsSecretName !== undefined;
  const lines: string[] = [
    `# KBS configuration rendered by brokerctl from BrokerConfig ${cfg.namespace}/${cfg.name} (profile ${cfg.profileType}).`,
    '# Keys are trustee kbs-config.toml keys.',
    '',
  ];
  const add = (...l: string[]) => lines.push(...l);
  if (cfg.postgres !== undefined) {
    // A top-level key: it must come before the first table.
    add(
      cfg.redis === undefined
        ? '# Handshake sessions in PostgreSQL with the rest of the state, shared by every replica.'
        : '# Handshake sessions in Redis (fast, expired by Redis); everything else in PostgreSQL.',
      `session_storage_type = ${tomlString(cfg.redis === undefined ? 'Postgres' : 'Redis')}`,
      '',
    );
  }

  add(
    '[http_server]',
    `sockets = ${tomlStringArray([`0.0.0.0:${KBS_PORT}`])}`,
    "# /metrics on a plain-HTTP listener of its own (this KBS's key): the pod network, through Service",
    '# kbs-metrics only; the public port answers /metrics with 404.',
    `metrics_socket = ${tomlString(`0.0.0.0:${METRICS_PORT}`)}`,
  );
  if (cfg.tls !== undefined) {
    // trustee-operator's lines for TrusteeConfig spec.tlsConfig.
    const t = cfg.tls;
    add(`# TLS configuration - Mozilla ${t.profile} profile`, `tls_profile = ${tomlString(t.profile)}`);
    if (t.minVersion !== undefined) add(`tls_min_version = ${tomlString(t.minVersion)}`);
    if (t.maxVersion !== undefined) add(`tls_max_version = ${tomlString(t.maxVersion)}`);
    if (t.ciphers !== undefined) add(`tls_ciphers = ${tomlString(t.ciphers)}`);
    if (t.groups !== undefined) add(`tls_groups = ${tomlString(t.groups)}`);
  }
  if (https) {
    add(
      'insecure_http = false',
      `private_key = ${tomlString(`${p.httpsKeyDir}/${p.httpsKeyKey}`)}`,
      `certificate = ${tomlString(`${p.httpsCertDir}/${p.httpsCertKey}`)}`,
    );
  } else {
    add(
      '# No httpsSpec (Permissive): plain HTTP, for clusters that terminate TLS elsewhere.',
      'insecure_http = true',
    );
  }
  add('');

  add('[admin]');
  if (signedTokens) {
    add(
      '# Admin requests carry a bearer JWT with role "admin", signed by the token key (auth Secret).',
      'authorization_mode = "AuthenticatedAuthorization"',
      '',
      '[admin.authentication.bearer_jwt]',
      `identity_providers = [{ public_key_uri = ${tomlString(`${p.authDir}/${p.authKey}`)} }]`,
      '',
      '[admin.authorization.regex_acl]',
      `acls = [{ role = ${tomlString(ADMIN_ROLE)}, allowed_endpoints = ${tomlString(ADMIN_ENDPOINTS)} }]`,
    );
  } else {
    add(
      '# No attestationTokenVerificationSpec (Permissive): no admin credential exists, so no admin access.',
      'authorization_mode = "DenyAll"',
    );
  }
  add('');

  add('[attestation_token]');
  if (signedTokens) {
    add(
      '# Tokens must carry an x5c chain to the attestation certificate.',
      `trusted_certs_paths = ${tomlStringArray([`${p.attestationCertDir}/${p.attestationCertKey}`])}`,
      'insecure_header_jwk = false',
    );
  } else {
    add(
      '# No token certificate (Permissive): the token header key is used unchecked.',
      'insecure_header_jwk = true',
    );
  }
  add('');

  add('[attestation_service]', 'type = "coco_as_builtin"', 'timeout = 5', '');
  add('[attestation_service.attestation_token_broker]', 'duration_min = 5', '');
  if (signedTokens) {
    add(
      '[attestation_service.attestation_token_broker.signer]',
      `key_path = ${tomlString(`${p.attestationKeyDir}/${p.attestationKeyKey}`)}`,
      `cert_path = ${tomlString(`${p.attestationCertDir}/${p.attestationCertKey}`)}`,
      '',
    );
  }
  add('[attestation_service.rvps_config]', 'type = "BuiltIn"', '');
  const collateral = cfg.collateral ?? {};
  add(
    "# TDX collateral: Intel's PCS unless spec.collateralSpec names a PCCS or a PCS Client Tool file.",
    '[attestation_service.verifier_config.dcap_verifier]',
    `collateral_service = ${tomlString(collateral.intelCollateralService ?? INTEL_PCS_URL)}`,
    ...(collateral.tcbUpdateType !== undefined
      ? [`tcb_update_type = ${tomlString(collateral.tcbUpdateType)}`]
      : []),
    '',
    "# VCEKs of SNP evidence without a certificate table: AMD's KDS, or the mirror spec.collateralSpec names.",
    ...(cfg.localCertCache !== undefined
      ? [
          `# First the offline VCEKs of spec.kbsLocalCertCacheSpec, mounted below ${KDS_STORE_DIR}/vcek (<hwid>/vcek.der).`,
        ]
      : []),
    '[attestation_service.verifier_config.snp_verifier]',
    `vcek_sources = [${[
      ...(cfg.localCertCache !== undefined
        ? [`{ type = "OfflineStore", path = ${tomlString(KDS_STORE_DIR)} }`]
        : []),
      collateral.amdKdsUrl !== undefined
        ? `{ type = "KDS", base_url = ${tomlString(collateral.amdKdsUrl)} }`
        : '{ type = "KDS" }',
    ].join(', ')}]`,
    '',
  );

  if (cfg.postgres !== undefined) {
    add(
      '# Policies, reference values and resources live in PostgreSQL, shared by the replicas. The',
      `# connection comes from Secret ${cfg.postgres.urlSecretName} through ${POSTGRES_URL_ENV} (a postgresql:// URI,`,
      '# password included), which replaces every key of the table below; the table stays empty.',
      '[storage_backend]',
      'storage_type = "Postgres"',
      '',
      '[storage_backend.backends.postgres]',
      '',
    );
    if (cfg.redis !== undefined) {
      add(
        `# The sessions' Redis: the URL comes from Secret ${cfg.redis.urlSecretName} through ${REDIS_URL_ENV}.`,
        '[storage_backend.backends.redis]',
        '',
      );
    }
  } else if (cfg.redis === undefined) {
    add(
      '# One replica: sessions and the loaded files live in memory.',
      '[storage_backend]',
      'storage_type = "Memory"',
      '',
    );
  } else {
    add(
      '# Replicas share sessions, policies, reference values and resources through Redis, so that any',
      '# replica finishes a handshake another began. The URL (it may hold a password) comes from Secret',
      `# ${cfg.redis.urlSecretName} through ${REDIS_URL_ENV}, which takes precedence over url.`,
      '[storage_backend]',
      'storage_type = "Redis"',
      '',
      '[storage_backend.backends.redis]',
      '',
    );
  }
  add('[[plugins]]', 'name = "resource"', 'storage_backend_type = "kvstorage"', '');
  add(
    '# Files of the mounted ConfigMaps and Secrets, loaded into the store at start and again whenever',
    "# Kubernetes updates them (no restart needed). This table is this KBS's own; trustee ignores it.",
    '[mounted_files]',
    `attestation_policies = ${tomlStringArray([p.attestationPolicyDir])}`,
    `resource_policy = ${tomlString(p.resourcePolicyDir)}`,
    `reference_values = ${tomlStringArray([p.referenceValueDir])}`,
    `resources = ${tomlStringArray([p.resourcesDir])}`,
  );
  return `${lines.join('\n')}\n`;
}
