export { RVPS_VERSION, rvpsMain, rvpsToolMain } from './cli.js';
export {
  DEFAULT_RVPS_CLIENT_ADDRESS,
  grpcTarget,
  RvpsClient,
  RvpsClientError,
  type RvpsClientOptions,
} from './client.js';
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
  addHealthService,
  decodeHealthCheckRequest,
  encodeHealthCheckRequest,
  encodeHealthCheckResponse,
  HEALTH_SERVICE_NAME,
  type HealthHandle,
  HealthService,
  HealthStatus,
} from './health.js';
export {
  SECURITY_HELP,
  SECURITY_OPTIONS,
  type SecurityValues,
  type ServerSecurity,
  serverSecurity,
} from './security.js';
export {
  MAX_RVPS_REQUEST_BYTES,
  MAX_RVPS_RESPONSE_BYTES,
  type RunningRvpsServer,
  type RvpsServerOptions,
  routeGrpcLogs,
  rvpsHandlers,
  startRvpsServer,
  writeRefusal,
} from './server.js';
export { openRvpsStorage } from './storage.js';
export { grpcServerCredentials, readPemFile, type ServerTls } from './tls.js';
export {
  createWriteAuthorizer,
  grpcWriteCredentials,
  OPEN_WRITES,
  openWritesWarning,
  WRITE_ROLE,
  type WriteAuthConfig,
  WriteAuthError,
  type WriteAuthErrorCode,
  type WriteAuthorizer,
  type WriteCredentials,
} from './write-auth.js';
