export {
  AdminAccessDenied,
  type AdminAuthorizer,
  AdminError,
  bearerToken,
  createAdminAuthorizer,
} from './admin.js';
export {
  AS_CALL_DEADLINE_MS,
  createGrpcAttestationService,
  DEFAULT_AS_ADDR,
  DEFAULT_AS_POOL_SIZE,
  type GrpcAttestationServiceOptions,
} from './attestation/grpc-remote.js';
export {
  AttestationFailed,
  type AttestationService,
  type AttestationServiceConfig,
  BROKER_DEFAULT_POLICY_CPU,
  createAttestationService,
  DEFAULT_POLICIES,
  explainAppraisals,
  InvalidPolicyId,
  ParsePolicyError,
  POLICY_PCRS,
  parseAttestationServiceConfig,
  REFERENCE_VALUES_EXTENSION,
  TRUSTEE_DEFAULT_POLICY_CPU,
  VTPM_REFERENCE_PREFIXES,
} from './attestation/index.js';
export { main } from './cli.js';
export {
  type AclRuleConfig,
  type AdminConfig,
  type AttestationTokenConfig,
  ConfigError,
  DEFAULT_PAYLOAD_REQUEST_SIZE,
  DEFAULT_SOCKET,
  type HttpServerConfig,
  type IdentityProviderConfig,
  type KbsConfig,
  loadKbsConfig,
  type MountedFilesConfig,
  parseKbsConfig,
  parseKbsConfigText,
  type ResourcePluginConfig,
  type SocketAddress,
  type StorageBackendConfig,
  type StorageType,
  type TlsConfig,
} from './config.js';
export { JwtExpired, JwtVerificationError } from './jwt/jws.js';
export { TrustMaterialError } from './jwt/sources.js';
export { JwtVerifier, type JwtVerifierOptions } from './jwt/verifier.js';
export { type KbsOptions, KbsStartupError, type RunningKbs, startKbs } from './kbs.js';
export { KBS_VERSION, KbsMetrics } from './metrics.js';
export * from './plugins/index.js';
export {
  POLICY_EVAL_LIMITS,
  type PolicyCheckCode,
  PolicyCheckError,
} from './policy/limits.js';
export {
  BUILTIN_RESOURCE_POLICIES,
  RESOURCE_POLICY_ID,
  RESOURCE_POLICY_RULE,
} from './policy/resource-policy.js';
export { MountedFileError } from './reload/mounted.js';
export type { DirectoryWatcherOptions } from './reload/watcher.js';
// Reference values as trustee-operator's ConfigMaps hold them, as RVPS messages.
// The RVPS itself, for the stand-alone `rvps` service (packages/rvps).
export {
  createRvps,
  MAX_RVPS_MESSAGE_LENGTH,
  type Rvps,
  RvpsError,
  type RvpsErrorCode,
  type RvpsOptions,
  referenceValueMessages,
} from './rvps/index.js';
export {
  DEFAULT_MAX_SESSION_BYTES,
  DEFAULT_MAX_SESSIONS,
  SESSION_COOKIE,
  type SessionLimits,
} from './session.js';
export { StorageUnavailable } from './storage/errors.js';
export { InvalidStorageKey } from './storage/keys.js';
export { DEFAULT_LOCAL_FS_DIR, type LocalFsOptions, LocalFsStorage } from './storage/local-fs.js';
export { DEFAULT_LOCAL_JSON_DIR, LocalJsonStorage } from './storage/local-json.js';
export { MemoryStorage } from './storage/memory.js';
export {
  DEFAULT_POSTGRES_CONFIG,
  DEFAULT_POSTGRES_POOL_SIZE,
  describePostgresTarget,
  POSTGRES_URL_ENV,
  type PostgresConfig,
  type PostgresEvent,
  PostgresStorage,
  PostgresStorageError,
  type PostgresStorageErrorCode,
  type PostgresStorageOptions,
  type PostgresTarget,
  postgresTarget,
  redactPostgresUrl,
} from './storage/postgres.js';
export {
  DEFAULT_REDIS_URL,
  REDIS_URL_ENV,
  type RedisEvent,
  RedisStorage,
  type RedisStorageOptions,
  redactRedisUrl,
} from './storage/redis.js';
export { RoutedStorage } from './storage/routed.js';
export type { KvStorage, Namespace, SetOptions } from './storage/types.js';
export { COPIED_NAMESPACES, copyStores, kbsStorageMain, type NamespaceReport } from './storage-copy.js';
export { AttestationTokenVerifier, BUILTIN_TEE_KEY_POINTERS, jsonPointer } from './token.js';
