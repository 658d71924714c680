export { RVPS_VERSION, rvpsMain, rvpsToolMain } from './cli.js';
export { DEFAULT_RVPS_CLIENT_ADDRESS, grpcTarget, RvpsClient, RvpsClientError } from './client.js';
export {
  DEFAULT_RVPS_ADDRESS,
  DEFAULT_RVPS_CONFIG,
  DEFAULT_RVPS_CONFIG_PATH,
  loadRvpsConfig,
  parseRvpsConfig,
  parseRvpsConfigText,
  parseStorageBackend,
  type RvpsConfig,
  type RvpsStorageType,
  type StorageBackendSettings,
} from './config.js';
export { RvpsConfigError } from './errors.js';
export {
  MAX_RVPS_REQUEST_BYTES,
  MAX_RVPS_RESPONSE_BYTES,
  type RunningRvpsServer,
  type RvpsServerOptions,
  rvpsHandlers,
  startRvpsServer,
} from './server.js';
export { openRvpsStorage } from './storage.js';
