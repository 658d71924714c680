export {
  expireReferenceValue,
  type ListedReferenceValue,
  listReferenceValues,
  readReferenceValue,
} from './admin.js';
export {
  DEFAULT_RVPS_CLIENT_ADDRESS,
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
export { referenceValueMessages } from './document.js';
export { RvpsConfigError, RvpsError, type RvpsErrorCode } from './errors.js';
export {
  type GrpcTlsOptions,
  grpcTarget,
  type RunningGrpcServer,
  routeGrpcLogs,
  type ServeGrpcOptions,
  SHUTDOWN_GRACE_MS,
  serveGrpc,
} from './grpc.js';
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
  checkReferenceValueName,
  extractReferenceValues,
  MAX_REFERENCE_VALUE_DEPTH,
  MAX_REFERENCE_VALUE_NAME_LENGTH,
  MAX_REFERENCE_VALUES_PER_MESSAGE,
  MAX_RVPS_MESSAGE_LENGTH,
  type ProvenanceType,
  parseRvpsMessage,
  RVPS_MESSAGE_VERSION,
  type RvpsMessage,
  type RvpsMessageInput,
} from './message.js';
export {
  addMonthsUtc,
  isExpired,
  MONTHS_BEFORE_EXPIRATION,
  REFERENCE_VALUE_VERSION,
  type ReferenceValue,
} from './reference-value.js';
export { createRvps, type Rvps, type RvpsOptions } from './rvps.js';
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
  rvpsHandlers,
  startRvpsServer,
  writeRefusal,
} from './server.js';
export {
  chooseAlpn,
  HTTP2_PREFACE,
  type Http1Options,
  type JsonRoute,
  MAX_HTTP1_HEAD_BYTES,
  SHARED_PORT_TIMEOUT_MS,
  sniffProtocol,
} from './shared-port.js';
export { openRvpsStorage } from './storage.js';
export { grpcServerCredentials, readPemFile, type ServerTls } from './tls.js';
