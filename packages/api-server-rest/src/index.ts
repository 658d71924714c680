export { type AttestationBackend, BackendError, ExtendResult, type ResourceBackend } from './backends.js';
export { API_SERVER_REST_CLI_VERSION, main } from './cli.js';
export { ApiServerError, type ApiServerErrorCode } from './errors.js';
export {
  describeCallError,
  type LazyCallOptions,
  LazyConnection,
  type LazyConnectionOptions,
} from './lazy-connection.js';
export { isLoopbackAddress } from './loopback.js';
export {
  checkPluginNames,
  isPluginName,
  MAX_PLUGIN_URI_LENGTH,
  PluginListError,
  parsePluginList,
  RESOURCE_PLUGIN,
} from './plugins.js';
export {
  type AaelEvent,
  AaelEventError,
  BodyTooLargeError,
  FEATURES,
  type Feature,
  isFeature,
  parseAaelEvent,
  type Reply,
  type RouteRequest,
  Router,
  type RouterOptions,
} from './router.js';
export { decodeBase64UrlNoPad, decodeRuntimeData, RuntimeDataError } from './runtime-data.js';
export {
  type ApiServer,
  type ApiServerLimits,
  type ApiServerOptions,
  DEFAULT_BIND,
  InvalidBindAddress,
  parseBindAddress,
  startApiServer,
} from './server.js';
export { parseQuery, parseRequestTarget, type RequestTarget, splitNthSlash } from './target.js';
export {
  attestationAgentBackend,
  DEFAULT_AA_ADDR,
  DEFAULT_CDH_ADDR,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_TTRPC_TIMEOUT_MS,
  dataHubBackend,
  type TtrpcBackendOptions,
} from './ttrpc-backends.js';
export { API_SERVER_REST_VERSION } from './version.js';
