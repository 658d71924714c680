// `kbs --config-file kbs-config.toml`: trustee's configuration keys (kbs/src/config.rs and the structs it
// embeds). As in trustee, a key a section does not know is ignored (with one warning naming it), except
// under `[admin]`, whose structs trustee marks `deny_unknown_fields`: there it is refused.

import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { extname, isAbsolute } from 'node:path';
import { type AttestationServiceConfig, parseAttestationServiceConfig } from '@broker/attestation';
import type { AclRuleConfig, AdminConfig, IdentityProviderConfig } from '@broker/auth';
import { ConfigError, isTable, Section } from '@broker/cli';
import {
  DEFAULT_LOCAL_FS_DIR,
  DEFAULT_LOCAL_JSON_DIR,
  DEFAULT_POSTGRES_CONFIG,
  DEFAULT_REDIS_URL,
  type PostgresConfig,
} from '@broker/kv-storage';
import { parse as parseToml } from 'smol-toml';
import {
  BUILTIN_PLUGIN_NAMES,
  type BuiltinPluginsConfig,
  parseBuiltinPlugin,
} from './plugins/builtin-config.js';
import { type ExternalPluginConfig, parseExternalPlugin } from './plugins/external-config.js';

export const DEFAULT_SOCKET = '127.0.0.1:8080';
/** MiB, trustee's default `payload_request_size`. */
export const DEFAULT_PAYLOAD_REQUEST_SIZE = 2;
/** trustee's pre-unified-storage resource repository (`[[plugins]] type = "LocalFs"`). */
export const DEFAULT_LEGACY_REPOSITORY_DIR = '/opt/confidential-containers/kbs/repository';
const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

export interface SocketAddress {
  /** IP literal, without brackets for IPv6. */
  readonly host: string;
  readonly port: number;
}

export type TlsProfile = 'old' | 'intermediate' | 'modern' | 'custom';
export type TlsVersion = '1.2' | '1.3';

export interface TlsConfig {
  readonly profile: TlsProfile;
  readonly minVersion?: TlsVersion;
  readonly maxVersion?: TlsVersion;
  /** OpenSSL cipher list (TLS 1.2 ciphers and TLS 1.3 suites, colon-separated). */
  readonly ciphers?: string;
  /** Key-exchange groups, colon-separated. */
  readonly groups?: string;
}

export interface HttpServerConfig {
  readonly sockets: readonly SocketAddress[];
  readonly insecureHttp: boolean;
  readonly privateKey?: string;
  readonly certificate?: string;
  /** Request body limit in MiB. */
  readonly payloadRequestSize: number;
  /**
   * Processes serving the sockets (node:cluster workers); more than one needs every store shared between
   * processes (Redis, PostgreSQL or LocalFs, not Memory). Absent: one.
   */
  readonly workerCount?: number;
  readonly tls: TlsConfig;
  /**
   * This KBS's own `metrics_socket`: a plain-HTTP listener serving only `/metrics` and `/healthz`; when
   * set, the public sockets no longer serve `/metrics`.
   */
  readonly metricsSocket?: SocketAddress;
  /** This KBS's own `metrics_resource_paths`: label the resource counters with each path (default off). */
  readonly metricsResourcePaths?: boolean;
}

export interface AttestationTokenConfig {
  readonly trustedCertsPaths: readonly string[];
  readonly trustedJwkSets: readonly string[];
  /** JSON pointers tried before the built-in ones when looking for the TEE key in the token claims. */
  readonly extraTeekeyPaths: readonly string[];
  readonly insecureHeaderJwk: boolean;
}

/** This KBS's own `[admin]` keys (trustee refuses them): the verdict log and the operator console. */
export interface ConsoleConfig {
  /** `verdict_log_size`: how many verdicts the log keeps (default 1000). */
  readonly verdictLogSize: number;
  /** `console`: serve the operator console under `/console/` (default false). */
  readonly enabled: boolean;
}

export type StorageType = 'Memory' | 'LocalFs' | 'LocalJson' | 'Postgres' | 'Redis';

export interface StorageBackendConfig {
  readonly storageType: StorageType;
  /** `[storage_backend.backends.local_fs] dir_path`, when that table is present. */
  readonly localFsDir?: string;
  /** `[storage_backend.backends.local_json] file_dir_path` (or `dir_path`), when that table is present. */
  readonly localJsonDir?: string;
  /** `[storage_backend.backends.redis] url`, when that table is present (`REDIS_URL` overrides it at start). */
  readonly redisUrl?: string;
  /** `[storage_backend.backends.postgres]`, when that table is present (`POSTGRES_URL` overrides it at start). */
  readonly postgres?: PostgresConfig;
}

/**
 * `[mounted_files]` (this KBS's own table): files, typically mounted ConfigMaps and Secrets, whose content
 * is written into the store at start and again whenever they change.
 */
export interface MountedFilesConfig {
  /** Files or directories; each `<id>.rego` is attestation policy `<id>`. */
  readonly attestationPolicies: readonly string[];
  /** A `.rego` file, or a directory holding `resource-policy.rego` or a single `.rego` file. */
  readonly resourcePolicy?: string;
  /** Files or directories; each `.json` file holds an RVPS message or an array of them. */
  readonly referenceValues: readonly string[];
  /** Directories laid out `<repo>/<type>/<tag>` (a Secret mounted per `<repo>/<type>`). */
  readonly resources: readonly string[];
}

export type ResourcePluginConfig =
  /** The resource plugin stores in the `repository` namespace of `[storage_backend]`. */
  | { readonly backend: 'kvstorage' }
  /** trustee's earlier form: a directory tree `<dir_path>/<repo>/<type>/<tag>` of its own. */
  | { readonly backend: 'LocalFs'; readonly dirPath: string };

export interface KbsConfig {
  readonly httpServer: HttpServerConfig;
  readonly attestationToken: AttestationTokenConfig;
  readonly attestationService: AttestationServiceConfig;
  readonly admin: AdminConfig;
  readonly console: ConsoleConfig;
  readonly storageBackend: StorageBackendConfig;
  /** Where sessions live when not in `storageBackend.storageType`. */
  readonly sessionStorageType?: StorageType;
  /** The `resource` plugin, when a `[[plugins]]` entry enables it. */
  readonly resourcePlugin?: ResourcePluginConfig;
  /** `[[plugins]] name = "external"`: gRPC plugin backends under `/kbs/v0/external/<name>/`. */
  readonly externalPlugin?: ExternalPluginConfig;
  /** `[[plugins]] name = "sample"` / `"nebula-ca"` / `"provisioner"`: trustee's other built-in plugins. */
  readonly builtinPlugins?: BuiltinPluginsConfig;
  /** Files loaded into the store and watched; absent when `[mounted_files]` is not configured. */
  readonly mountedFiles?: MountedFilesConfig;
  /** Accepted but unused settings, for the operator to see at startup. */
  readonly warnings: readonly string[];
}

function parseSocket(s: string, where: string, key = 'sockets'): SocketAddress {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(s) ?? /^([^:]+):(\d{1,5})$/.exec(s);
  const host = m?.[1];
  const port = Number(m?.[2]);
  if (host === undefined || isIP(host) === 0 || !(port >= 0 && port <= 65535)) {
    throw new ConfigError(`${where} ${key}: ${JSON.stringify(s)} is not an IP:port socket address`);
  }
  if (m === null || (isIP(host) === 6 && !s.startsWith('['))) {
    throw new ConfigError(`${where} ${key}: write IPv6 addresses as [addr]:port, got ${JSON.stringify(s)}`);
  }
  return { host, port };
}

function oneOf<T extends string>(
  value: string | undefined,
  allowed: Record<string, T>,
  where: string,
  key: string,
): T | undefined {
  if (value === undefined) return undefined;
  const v = Object.hasOwn(allowed, value) ? allowed[value] : undefined;
  if (v === undefined) {
    const names = [...new Set(Object.keys(allowed))].join(', ');
    throw new ConfigError(`${where} ${key}: ${JSON.stringify(value)} is not one of ${names}`);
  }
  return v;
}

function parseHttpServer(s: Section): HttpServerConfig {
  const sockets = s.has('sockets') ? s.stringArray('sockets') : [DEFAULT_SOCKET];
  if (sockets.length === 0) throw new ConfigError(`${s.where} sockets: at least one socket is required`);
  const insecureHttp = s.bool('insecure_http', false);
  const privateKey = s.optString('private_key');
  const certificate = s.optString('certificate');
  const payloadRequestSize = s.optInt('payload_request_size', 1, 4096) ?? DEFAULT_PAYLOAD_REQUEST_SIZE;
  const workerCount = s.optInt('worker_count', 1, 1024);
  const versions: Record<string, TlsVersion> = { '1.2': '1.2', '1.3': '1.3' };
  const profile =
    oneOf(
      s.optString('tls_profile'),
      { old: 'old', intermediate: 'intermediate', modern: 'modern', custom: 'custom' } as const,
      s.where,
      'tls_profile',
    ) ?? 'intermediate';
  const minVersion = oneOf(s.optString('tls_min_version'), versions, s.where, 'tls_min_version');
  const maxVersion = oneOf(s.optString('tls_max_version'), versions, s.where, 'tls_max_version');
  const ciphers = s.optString('tls_ciphers');
  const groups = s.optString('tls_groups');
  const metricsSocket = s.optString('metrics_socket');
  const metricsResourcePaths = s.bool('metrics_resource_paths', false);
  s.finish();
  if (minVersion === '1.3' && maxVersion === '1.2') {
    throw new ConfigError(`${s.where} tls_min_version (1.3) cannot be greater than tls_max_version (1.2)`);
  }
  if (!insecureHttp && (privateKey === undefined || certificate === undefined)) {
    const missing = [
      privateKey === undefined ? 'private_key' : '',
      certificate === undefined ? 'certificate' : '',
    ]
      .filter(Boolean)
      .join(' and ');
    throw new ConfigError(
      `${s.where} ${missing} missing: HTTPS needs private_key and certificate (PEM files); set insecure_http = true only for plain-HTTP testing`,
    );
  }
  const tls: TlsConfig = {
    profile,
    ...(minVersion && { minVersion }),
    ...(maxVersion && { maxVersion }),
    ...(ciphers !== undefined && { ciphers }),
    ...(groups !== undefined && { groups }),
  };
  return {
    sockets: sockets.map((x) => parseSocket(x, s.where)),
    insecureHttp,
    ...(privateKey !== undefined && { privateKey }),
    ...(certificate !== undefined && { certificate }),
    payloadRequestSize,
    ...(workerCount !== undefined && { workerCount }),
    tls,
    ...(metricsSocket !== undefined && {
      metricsSocket: parseSocket(metricsSocket, s.where, 'metrics_socket'),
    }),
    ...(metricsResourcePaths && { metricsResourcePaths }),
  };
}

function parseAttestationToken(s: Section | undefined, warnings: string[]): AttestationTokenConfig {
  if (s === undefined) {
    return { trustedCertsPaths: [], trustedJwkSets: [], extraTeekeyPaths: [], insecureHeaderJwk: false };
  }
  const trustedCertsPaths = s.stringArray('trusted_certs_paths');
  const trustedJwkSets = s.stringArray('trusted_jwk_sets');
  const extraTeekeyPaths = s.stringArray('extra_teekey_paths');
  const insecureHeaderJwk = s.bool('insecure_header_jwk', false);
  if (s.raw('insecure_key') !== undefined) {
    warnings.push(
      '[attestation_token] insecure_key is a legacy key and is ignored (see insecure_header_jwk)',
    );
  }
  s.finish({
    trusted_certs: 'did you mean trusted_certs_paths?',
    trusted_jwk_set: 'did you mean trusted_jwk_sets?',
  });
  for (const p of extraTeekeyPaths) {
    if (p !== '' && !p.startsWith('/')) {
      throw new ConfigError(
        `${s.where} extra_teekey_paths: ${JSON.stringify(p)} is not a JSON pointer (/a/b)`,
      );
    }
  }
  return { trustedCertsPaths, trustedJwkSets, extraTeekeyPaths, insecureHeaderJwk };
}

/** This KBS's own `[admin]` keys, read by parseKbsConfig; serde's "expected" list leaves them out. */
const OWN_ADMIN_KEYS = { verdict_log_size: '', console: '' };

function parseAdmin(s: Section): AdminConfig {
  const mode = s.optString('authorization_mode');
  if (mode === undefined) {
    throw new ConfigError(
      `${s.where} authorization_mode is required: InsecureAllowAll, DenyAll or AuthenticatedAuthorization`,
    );
  }
  const legacy = {
    auth_public_key: 'removed upstream: use authorization_mode = "AuthenticatedAuthorization"',
    insecure_api: 'removed upstream: use authorization_mode = "InsecureAllowAll"',
  };
  if (mode === 'InsecureAllowAll' || mode === 'DenyAll') {
    s.finishStrict({ ...legacy, ...OWN_ADMIN_KEYS }, 'authorization_mode');
    return { mode };
  }
  if (mode !== 'AuthenticatedAuthorization') {
    throw new ConfigError(
      `${s.where} authorization_mode: ${JSON.stringify(mode)} is not one of InsecureAllowAll, DenyAll, AuthenticatedAuthorization`,
    );
  }
  const authn = s.optSection('authentication');
  const authz = s.optSection('authorization');
  s.finishStrict({ ...legacy, ...OWN_ADMIN_KEYS }, 'authorization_mode');
  if (authn === undefined || authz === undefined) {
    throw new ConfigError(
      `${s.where} AuthenticatedAuthorization needs [admin.authentication.bearer_jwt] and [admin.authorization.regex_acl]`,
    );
  }
  const bearer = authn.optSection('bearer_jwt');
  authn.finishStrict();
  if (bearer === undefined) throw new ConfigError(`${authn.where} needs a bearer_jwt table`);
  const identityProviders = bearer.sectionArray('identity_providers').map((idp): IdentityProviderConfig => {
    const issuer = idp.optString('issuer');
    const audience = idp.optString('audience');
    const publicKeyUri = idp.optString('public_key_uri');
    const jwkSetUri = idp.optString('jwk_set_uri');
    idp.finishStrict();
    // An entry without a key source, or no entry at all, parses as in trustee; the KBS refuses it at
    // start (createAdminAuthorizer), with trustee's message.
    return {
      ...(issuer !== undefined && { issuer }),
      ...(audience !== undefined && { audience }),
      ...(publicKeyUri !== undefined && { publicKeyUri }),
      ...(jwkSetUri !== undefined && { jwkSetUri }),
    };
  });
  bearer.finishStrict();
  const regex = authz.optSection('regex_acl');
  authz.finishStrict();
  if (regex === undefined) throw new ConfigError(`${authz.where} needs a regex_acl table`);
  const acls = regex.sectionArray('acls').map((a): AclRuleConfig => {
    const role = a.string('role');
    const allowedEndpoints = a.string('allowed_endpoints', '');
    a.finishStrict();
    if (!allowedEndpoints.startsWith('^/kbs') || !allowedEndpoints.endsWith('$')) {
      throw new ConfigError(
        `${a.where} allowed_endpoints ${JSON.stringify(allowedEndpoints)}: Admin Role regex must be anchored (^/kbs…$)`,
      );
    }
    try {
      new RegExp(allowedEndpoints, 'u');
    } catch (e) {
      throw new ConfigError(`${a.where} allowed_endpoints: ${(e as Error).message}`);
    }
    return { role, allowedEndpoints };
  });
  regex.finishStrict();
  return { mode, identityProviders, acls };
}

const STORAGE_TYPES: Record<string, string> = {
  Memory: 'Memory',
  memory: 'Memory',
  LocalFs: 'LocalFs',
  local_fs: 'LocalFs',
  LocalJson: 'LocalJson',
  local_json: 'LocalJson',
  Postgres: 'Postgres',
  postgres: 'Postgres',
  Redis: 'Redis',
  redis: 'Redis',
};

function storageType(value: string | undefined, where: string, key: string): StorageType | undefined {
  const t = oneOf(value, STORAGE_TYPES, where, key);
  if (
    t === undefined ||
    t === 'Memory' ||
    t === 'LocalFs' ||
    t === 'LocalJson' ||
    t === 'Postgres' ||
    t === 'Redis'
  )
    return t;
  throw new ConfigError(
    `${where} ${key}: storage type ${t} is not supported by this KBS (supported: Memory, LocalFs, LocalJson, Postgres, Redis)`,
  );
}

function parseStorageBackend(s: Section | undefined, warnings: string[]): StorageBackendConfig {
  if (s === undefined) return { storageType: 'Memory' };
  const type = storageType(s.optString('storage_type'), s.where, 'storage_type') ?? 'Memory';
  const backends = s.optSection('backends');
  s.finish({
    session_storage_type: 'session_storage_type is a top-level key: put it before the first [table]',
  });
  let localFsDir: string | undefined;
  let localJsonDir: string | undefined;
  let redisUrl: string | undefined;
  let postgres: PostgresConfig | undefined;
  if (backends !== undefined) {
    const lfs = backends.optSection('local_fs');
    if (lfs !== undefined) {
      localFsDir = lfs.string('dir_path', DEFAULT_LOCAL_FS_DIR);
      lfs.finish({
        session_storage_type: 'session_storage_type is a top-level key: put it before the first [table]',
      });
    }
    const redis = backends.optSection('redis');
    if (redis !== undefined) {
      redisUrl = redis.string('url', DEFAULT_REDIS_URL);
      checkRedisUrl(redisUrl, redis.where);
      redis.finish({
        session_storage_type: 'session_storage_type is a top-level key: put it before the first [table]',
      });
    }
    const lj = backends.optSection('local_json');
    if (lj !== undefined) localJsonDir = parseLocalJson(lj);
    const pg = backends.optSection('postgres');
    if (pg !== undefined) postgres = parsePostgres(pg, warnings);
    backends.finish();
  }
  if (type === 'LocalFs' && localFsDir === undefined) {
    throw new ConfigError(
      `${s.where} storage_type = "LocalFs" needs [storage_backend.backends.local_fs] with dir_path (Local FS configuration is required)`,
    );
  }
  if (type === 'Redis' && redisUrl === undefined) {
    throw new ConfigError(
      `${s.where} storage_type = "Redis" needs [storage_backend.backends.redis] with url (Redis configuration is required)`,
    );
  }
  if (type === 'LocalJson' && localJsonDir === undefined) {
    throw new ConfigError(
      `${s.where} storage_type = "LocalJson" needs [storage_backend.backends.local_json] with file_dir_path (Local JSON configuration is required)`,
    );
  }
  if (type === 'Postgres' && postgres === undefined) {
    throw new ConfigError(
      `${s.where} storage_type = "Postgres" needs [storage_backend.backends.postgres] (PostgreSQL configuration is required)`,
    );
  }
  return {
    storageType: type,
    ...(localFsDir !== undefined && { localFsDir }),
    ...(localJsonDir !== undefined && { localJsonDir }),
    ...(redisUrl !== undefined && { redisUrl }),
    ...(postgres !== undefined && { postgres }),
  };
}

/**
 * trustee's keys and defaults: `db` (postgres), `username` (postgres), `password` (none), `port` (5432),
 * `host` (localhost). The table of each namespace is named after it; trustee's README also lists a
 * `table` key, which its code does not read: accepted here with a warning, and not used either.
 */
function parsePostgres(s: Section, warnings: string[]): PostgresConfig {
  const d = DEFAULT_POSTGRES_CONFIG;
  const db = s.string('db', d.db);
  const username = s.string('username', d.username);
  const password = s.optString('password');
  const port = s.optInt('port', 1, 65535) ?? d.port;
  const host = s.string('host', d.host);
  if (s.optString('table') !== undefined) {
    warnings.push(
      `${s.where} table is ignored: each namespace has its own table, named after it (repository, kbs, kbs_protocol_session, attestation_service_policy, reference_value), as in trustee`,
    );
  }
  s.finish({
    session_storage_type: 'session_storage_type is a top-level key: put it before the first [table]',
    url: 'set the POSTGRES_URL environment variable for a connection URI',
  });
  for (const [k, v] of [
    ['db', db],
    ['username', username],
    ['host', host],
  ] as const) {
    if (v === '') throw new ConfigError(`${s.where} ${k} must not be empty`);
  }
  return { db, username, ...(password !== undefined && { password }), port, host };
}

/**
 * trustee's key is `file_dir_path` (default `/opt/confidential-containers/storage/local_json`);
 * trustee-operator's templates write `dir_path`, which trustee ignores (its default is the same
 * directory): read as `file_dir_path` here, so that the directory written is the one used.
 */
function parseLocalJson(s: Section): string {
  const fileDirPath = s.optString('file_dir_path');
  const dirPath = s.optString('dir_path');
  s.finish({
    session_storage_type: 'session_storage_type is a top-level key: put it before the first [table]',
  });
  if (fileDirPath !== undefined && dirPath !== undefined && fileDirPath !== dirPath) {
    throw new ConfigError(
      `${s.where} file_dir_path and dir_path name different directories: set only file_dir_path`,
    );
  }
  const dir = fileDirPath ?? dirPath ?? DEFAULT_LOCAL_JSON_DIR;
  if (dir === '') throw new ConfigError(`${s.where} file_dir_path must not be empty`);
  return dir;
}

/** The URL must name a Redis server; the message never repeats the URL, which may hold a password. */
function checkRedisUrl(url: string, where: string): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError(`${where} url is not a URL (expected redis://host:port or rediss://host:port)`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw new ConfigError(`${where} url must start with redis:// or rediss://, found ${u.protocol}//`);
  }
  if (u.hostname === '') throw new ConfigError(`${where} url has no host`);
}

function parseMountedFiles(s: Section | undefined): MountedFilesConfig | undefined {
  if (s === undefined) return undefined;
  const attestationPolicies = s.stringArray('attestation_policies');
  const resourcePolicy = s.optString('resource_policy');
  const referenceValues = s.stringArray('reference_values');
  const resources = s.stringArray('resources');
  s.finish();
  for (const [key, paths] of [
    ['attestation_policies', attestationPolicies],
    ['resource_policy', resourcePolicy === undefined ? [] : [resourcePolicy]],
    ['reference_values', referenceValues],
    ['resources', resources],
  ] as const) {
    for (const p of paths) {
      if (!isAbsolute(p))
        throw new ConfigError(`${s.where} ${key}: ${JSON.stringify(p)} is not an absolute path`);
    }
  }
  return {
    attestationPolicies,
    ...(resourcePolicy !== undefined && { resourcePolicy }),
    referenceValues,
    resources,
  };
}

const BACKEND_TABLES: Partial<Record<string, { table: string; key: string; name: string }>> = {
  LocalFs: { table: 'local_fs', key: 'dir_path', name: 'Local FS' },
  LocalJson: { table: 'local_json', key: 'file_dir_path', name: 'Local JSON' },
  Redis: { table: 'redis', key: 'url', name: 'Redis' },
  Postgres: { table: 'postgres', key: 'host', name: 'PostgreSQL' },
};

/** A store that selects a backend needs that backend's table, as in trustee. */
function requireBackendTable(what: string, type: string | undefined, sb: StorageBackendConfig): void {
  const t = type === undefined ? undefined : BACKEND_TABLES[type];
  if (t === undefined) return;
  const have =
    type === 'LocalFs'
      ? sb.localFsDir
      : type === 'LocalJson'
        ? sb.localJsonDir
        : type === 'Postgres'
          ? sb.postgres
          : sb.redisUrl;
  if (have !== undefined) return;
  throw new ConfigError(
    `${what} = "${type}" needs [storage_backend.backends.${t.table}] with ${t.key} (${t.name} configuration is required)`,
  );
}

/**
 * trustee's `worker_count` is the number of actix worker threads of one process. Here a value above 1
 * forks that many processes sharing the sockets, which needs every store shared between processes:
 * Memory stores are refused (the fix is named); a LocalJson store (one file rewritten whole by its
 * process) makes the KBS run as one process. Either way one warning says what the value does here.
 * Returns the number of processes to run (undefined: one).
 */
function checkWorkers(
  workerCount: number | undefined,
  stores: readonly { what: string; type: StorageType }[],
  warnings: string[],
): number | undefined {
  if (workerCount === undefined || workerCount <= 1) return workerCount;
  const memory = stores.filter((st) => st.type === 'Memory').map((st) => st.what);
  const localJson = stores.filter((st) => st.type === 'LocalJson').map((st) => st.what);
  if (memory.length === 0 && localJson.length > 0) {
    warnings.push(
      `[http_server] worker_count = ${workerCount} (trustee: actix worker threads) is not applied: here it would fork ${workerCount} processes, but ${localJson.join(', ')} use LocalJson (a file rewritten whole by one process), so this KBS runs as one process (Node serves concurrent requests on one event loop)`,
    );
    return undefined;
  }
  if (memory.length === 0) {
    warnings.push(
      `[http_server] worker_count = ${workerCount} (trustee: actix worker threads): here ${workerCount} worker processes share the sockets and keep their state in the shared stores (${[...new Set(stores.map((st) => st.type))].join(', ')})`,
    );
    return workerCount;
  }
  throw new ConfigError(
    `[http_server] worker_count = ${workerCount} needs state shared between worker processes, but ${memory.join(', ')} ${memory.length === 1 ? 'is' : 'are'} Memory (private to each process): use storage_type = "Redis" (or "Postgres", "LocalFs") for ${memory.length === 1 ? 'it' : 'them'}, or set worker_count = 1`,
  );
}

/**
 * Where the RCAR sessions are kept. `session_storage_type` when set; otherwise trustee keeps them in the
 * main store, and so does this KBS for Memory and Redis and for several worker processes (which must share
 * them). A single process on LocalFs or LocalJson keeps them in memory instead: a full or read-only volume
 * then still lets guests attest and fetch, and a handshake writes nothing to disk.
 */
export function sessionStorageOf(
  config: Pick<KbsConfig, 'sessionStorageType' | 'storageBackend' | 'httpServer'>,
): StorageType {
  if (config.sessionStorageType !== undefined) return config.sessionStorageType;
  const main = config.storageBackend.storageType;
  const oneProcess = (config.httpServer.workerCount ?? 1) <= 1;
  return oneProcess && (main === 'LocalFs' || main === 'LocalJson') ? 'Memory' : main;
}

interface PluginsConfig {
  readonly resource?: ResourcePluginConfig;
  readonly external?: ExternalPluginConfig;
  readonly builtin?: BuiltinPluginsConfig;
}

function parseResourcePlugin(p: Section): ResourcePluginConfig {
  const backendType = p.optString('storage_backend_type');
  const legacyType = p.optString('type');
  if (backendType !== undefined && legacyType !== undefined) {
    throw new ConfigError(`${p.where} set storage_backend_type or the legacy type, not both`);
  }
  let resource: ResourcePluginConfig;
  if (legacyType !== undefined) {
    if (legacyType !== 'LocalFs' && legacyType !== 'local_fs') {
      throw new ConfigError(
        `${p.where} type: ${JSON.stringify(legacyType)} is not supported (supported: LocalFs)`,
      );
    }
    resource = { backend: 'LocalFs', dirPath: p.string('dir_path', DEFAULT_LEGACY_REPOSITORY_DIR) };
  } else {
    const t = backendType ?? 'kvstorage';
    if (t !== 'kvstorage' && t !== 'KvStorage') {
      throw new ConfigError(
        `${p.where} storage_backend_type: ${JSON.stringify(t)} is not supported by this KBS (supported: kvstorage)`,
      );
    }
    resource = { backend: 'kvstorage' };
  }
  p.finish({
    dir_path: 'dir_path belongs to type = "LocalFs"; with kvstorage set [storage_backend.backends.local_fs]',
  });
  return resource;
}

/** `[[plugins]]`: `resource`, the `external` gRPC gateway, `sample`, `nebula-ca` and `provisioner`, each at most once. */
function parsePlugins(list: Section[]): PluginsConfig {
  let resource: ResourcePluginConfig | undefined;
  let external: ExternalPluginConfig | undefined;
  let builtin: BuiltinPluginsConfig | undefined;
  for (const p of list) {
    const name = p.string('name');
    if (name === 'resource' || name === 'ResourceStorage') {
      if (resource !== undefined) throw new ConfigError(`${p.where} the resource plugin is configured twice`);
      resource = parseResourcePlugin(p);
    } else if (name === 'external' || name === 'ExternalPlugin') {
      if (external !== undefined) throw new ConfigError(`${p.where} the external plugin is configured twice`);
      external = parseExternalPlugin(p);
    } else {
      builtin = parseBuiltinPlugin(name, p, builtin ?? {});
      if (builtin === undefined) {
        const supported = ['resource', 'external', ...BUILTIN_PLUGIN_NAMES].join(', ');
        throw new ConfigError(
          `${p.where} plugin ${JSON.stringify(name)} is not supported by this KBS (supported: ${supported})`,
        );
      }
    }
  }
  return {
    ...(resource !== undefined && { resource }),
    ...(external !== undefined && { external }),
    ...(builtin !== undefined && { builtin }),
  };
}

/**
 * What trustee checks when it creates the admin API (Admin::new), not when it parses: an
 * AuthenticatedAuthorization needs identity providers, each with a key source. Messages are trustee's.
 */
export function validateAdminConfig(admin: AdminConfig): void {
  if (admin.mode !== 'AuthenticatedAuthorization') return;
  if (admin.identityProviders.length === 0) {
    throw new ConfigError(
      'AuthenticatedAuthorization requires at least one `identity_providers` entry in [admin.authentication.bearer_jwt]',
    );
  }
  admin.identityProviders.forEach((idp, i) => {
    if (idp.publicKeyUri === undefined && idp.jwkSetUri === undefined) {
      throw new ConfigError(`identity_providers[${i}] must set \`public_key_uri\` and/or \`jwk_set_uri\``);
    }
  });
}

/** Build the configuration from a parsed document (the TOML tables as plain objects). */
export function parseKbsConfig(doc: unknown): KbsConfig {
  const warnings: string[] = [];
  const root = Section.of(doc, 'the configuration', warnings);
  const http = root.optSection('http_server', '[http_server]');
  const admin = root.optSection('admin', '[admin]');
  if (http === undefined)
    throw new ConfigError('[http_server] is required (it may be empty to take the defaults)');
  if (admin === undefined) throw new ConfigError('[admin] is required, with authorization_mode');
  // The attestation service first: a remote service (another issue) is the clearest thing to report.
  const asTable = root.raw('attestation_service');
  if (asTable !== undefined && !isTable(asTable))
    throw new ConfigError('[attestation_service] must be a table');
  let attestationService: AttestationServiceConfig;
  try {
    attestationService = parseAttestationServiceConfig(asTable ?? {}, warnings);
  } catch (e) {
    const msg = (e as Error).message;
    throw new ConfigError(msg.includes('attestation_service') ? msg : `[attestation_service] ${msg}`, {
      cause: e,
    });
  }
  const httpServer = parseHttpServer(http);
  const attestationToken = parseAttestationToken(
    root.optSection('attestation_token', '[attestation_token]'),
    warnings,
  );
  // Read before parseAdmin's strict check, which then accepts them.
  const consoleConfig: ConsoleConfig = {
    verdictLogSize: admin.optInt('verdict_log_size', 1, 1_000_000) ?? 1000,
    enabled: admin.bool('console', false),
  };
  const adminConfig = parseAdmin(admin);
  const storageBackend = parseStorageBackend(
    root.optSection('storage_backend', '[storage_backend]'),
    warnings,
  );
  const sessionStorageType = storageType(
    root.optString('session_storage_type'),
    'the top level',
    'session_storage_type',
  );
  const {
    resource: resourcePlugin,
    external: externalPlugin,
    builtin: builtinPlugins,
  } = parsePlugins(root.sectionArray('plugins', '[[plugins]]'));
  // This KBS's own table stays strict: trustee would ignore all of it, so a misspelt key here is ours.
  const mounted = root.raw('mounted_files');
  const mountedFiles = parseMountedFiles(
    mounted === undefined ? undefined : Section.of(mounted, '[mounted_files]'),
  );
  const as = attestationService;
  for (const [what, t] of [
    ['session_storage_type', sessionStorageType],
    ['[attestation_service] storage_type', as.storageType],
    ['[attestation_service.rvps_config] storage_type', as.rvps.storageType],
  ] as const) {
    requireBackendTable(what, t, storageBackend);
  }
  const main = storageBackend.storageType;
  const asType = (as.storageType ?? main) as StorageType;
  if (sessionStorageType === 'LocalJson') {
    // Every /auth (unauthenticated) would rewrite the whole file of sessions.
    warnings.push(
      'the RCAR sessions are kept in LocalJson, one file rewritten whole on every /auth and /attest: set session_storage_type = "Memory" (or LocalFs, Redis) unless the load is small',
    );
  }
  const workerCount = checkWorkers(
    httpServer.workerCount,
    [
      { what: 'the sessions', type: sessionStorageType ?? main },
      { what: '[storage_backend] storage_type', type: main },
      { what: 'the attestation policies', type: asType },
      { what: 'the reference values', type: (as.rvps.storageType ?? asType) as StorageType },
    ],
    warnings,
  );
  root.finish({
    repository: 'use [[plugins]] name = "resource"',
    policy_engine: 'the resource policy is set through the admin API',
  });
  const { workerCount: _configured, ...httpRest } = httpServer;
  return {
    httpServer: workerCount === undefined ? httpRest : { ...httpRest, workerCount },
    attestationToken,
    attestationService,
    admin: adminConfig,
    console: consoleConfig,
    storageBackend,
    ...(sessionStorageType !== undefined && { sessionStorageType }),
    ...(resourcePlugin !== undefined && { resourcePlugin }),
    ...(externalPlugin !== undefined && { externalPlugin }),
    ...(builtinPlugins !== undefined && { builtinPlugins }),
    ...(mountedFiles !== undefined && { mountedFiles }),
    warnings,
  };
}

/** Parse configuration text; `.json` files are JSON, everything else TOML (trustee's usual format). */
export function parseKbsConfigText(text: string, fileName = 'kbs-config.toml'): KbsConfig {
  let doc: unknown;
  try {
    doc = extname(fileName).toLowerCase() === '.json' ? JSON.parse(text) : parseToml(text);
  } catch (e) {
    throw new ConfigError(`${fileName}: ${(e as Error).message}`, { cause: e });
  }
  try {
    return parseKbsConfig(doc);
  } catch (e) {
    if (e instanceof ConfigError) throw new ConfigError(`${fileName}: ${e.message}`, { cause: e.cause });
    throw e;
  }
}

export async function loadKbsConfig(path: string): Promise<KbsConfig> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (e) {
    throw new ConfigError(`failed to read configuration file ${path}: ${(e as Error).message}`, { cause: e });
  }
  if (bytes.length > MAX_CONFIG_FILE_BYTES) {
    throw new ConfigError(`configuration file ${path} is larger than ${MAX_CONFIG_FILE_BYTES} bytes`);
  }
  return parseKbsConfigText(bytes.toString('utf8'), path);
}
