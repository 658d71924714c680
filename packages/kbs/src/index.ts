export { main } from './cli.js';
export {
  type AttestationTokenConfig,
  DEFAULT_PAYLOAD_REQUEST_SIZE,
  DEFAULT_SOCKET,
  type HttpServerConfig,
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
export { KbsConfigError, KbsServiceError, type KbsServiceErrorCode } from './errors.js';
export { type KbsOptions, KbsStartupError, type RunningKbs, startKbs } from './kbs.js';
export { KBS_VERSION, KbsMetrics } from './metrics.js';
export * from './plugins/index.js';
export {
  BUILTIN_RESOURCE_POLICIES,
  RESOURCE_POLICY_ID,
  RESOURCE_POLICY_RULE,
} from './policy/resource-policy.js';
export { MountedFileError } from './reload/mounted.js';
export type { DirectoryWatcherOptions } from './reload/watcher.js';
export {
  DEFAULT_MAX_SESSION_BYTES,
  DEFAULT_MAX_SESSIONS,
  SESSION_COOKIE,
  type SessionLimits,
} from './session.js';
export { COPIED_NAMESPACES, copyStores, kbsStorageMain, type NamespaceReport } from './storage-copy.js';
export { AttestationTokenVerifier, BUILTIN_TEE_KEY_POINTERS, jsonPointer } from './token.js';
