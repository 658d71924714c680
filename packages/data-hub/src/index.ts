// The KBC and agent-token modules stay out of this index: they load on first use (fast start).
export { CDH_VERSION, type CliRuntime, main } from './cli.js';
export {
  type CdhConfig,
  CdhConfigError,
  type ConfigEnvironment,
  type ConfigFormat,
  type Credential,
  credentialsFromKernelCmdline,
  DEFAULT_AA_SOCKET_ADDR,
  DEFAULT_CDH_SOCKET_ADDR,
  DEFAULT_IMAGE_WORK_DIR,
  DEFAULT_LOG_LEVEL,
  DEFAULT_MAX_CONCURRENT_LAYER_DOWNLOADS,
  defaultCdhConfig,
  type ImageConfig,
  imageConfigFromKernelCmdline,
  KBC_NAMES,
  type KbcConfig,
  type KbcName,
  kbcFromAaKbcParams,
  type LogLevel,
  loadCdhConfig,
  MAX_CONFIG_BYTES,
  type ProxyConfig,
  parseCdhConfig,
  parseKbcName,
  parseLogLevel,
  parseRegistryConfiguration,
  REGISTRY_CREDENTIALS_ENV,
  type RegistryConfig,
  type RegistryEntry,
  type RegistryMirror,
} from './config.js';
export {
  type CredentialFetcher,
  isCredentialPathValid,
  KBS_RESOURCE_STORAGE_DIR,
  provisionCredentials,
  writeFileAtomic,
} from './credentials.js';
export {
  AaTokenProviderError,
  DataHubError,
  type DataHubErrorCode,
  GetResourceFailed,
  HubInitializationFailed,
  IllegalResourceUri,
  KbcUnavailable,
  OfflineResourceNotFound,
} from './errors.js';
export { DataHub, type DataHubOptions } from './hub.js';
export { ImageClientFailed, ImagePullFailed } from './image/errors.js';
export type { ImagePullServiceOptions, PullImageEvent } from './image/service.js';
export { UnsealSecretFailed } from './sealed/errors.js';
export { type RunningDataHub, type StartDataHubOptions, startDataHub } from './server.js';
export {
  BLOCK_DEVICE_VOLUME_TYPE,
  SecureMountFailed,
  type SecureMountStep,
} from './storage/block-device.js';
export { EncryptedDiskFailed, type EncryptedDiskStep } from './storage/encrypted-disk.js';
export { ENCRYPTED_DISK_VERSION, encryptedDiskMain } from './storage/encrypted-disk-cli.js';
