export { AS_VERSION, attestationServiceMain, grpcAsMain, restfulAsMain } from './cli.js';
export {
  AsConfigError,
  type AsRvpsSettings,
  type AsSettings,
  DEFAULT_AS_SOCKET,
  DEFAULT_GRPC_RVPS_ADDRESS,
  DEFAULT_RESTFUL_AS_SOCKET,
  loadAsConfig,
  parseAsConfig,
} from './config.js';
export { AttestationServiceError, type AttestationServiceErrorCode } from './errors.js';
export {
  type AsGrpcServerOptions,
  attestationHandlers,
  GRPC_AS_TEES,
  MAX_AS_REQUEST_BYTES,
  MAX_VERIFICATION_REQUESTS,
  type RunningAsGrpcServer,
  startAsGrpcServer,
} from './grpc.js';
export {
  grpcRequestOfRest,
  MAX_REST_BODY_BYTES,
  REST_AS_TEES,
  type RestOptions,
  type RunningRestServer,
  restHandler,
  startAsRestServer,
} from './rest.js';
export { type OpenedAttestationService, openAttestationService } from './service.js';
