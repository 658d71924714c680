// External (gRPC) KBS plugins: the gateway the KBS runs and the example plugin command.
export { DEFAULT_EXAMPLE_PLUGIN_ADDRESS, kbsPluginExampleMain } from './example-cli.js';
export {
  type ExamplePluginOptions,
  examplePluginHandlers,
  type RunningExamplePlugin,
  startExamplePlugin,
} from './example-plugin.js';
export { EXTERNAL_PLUGIN_NAME, ExternalPlugin, type ExternalPluginDeps } from './external.js';
export {
  type ExternalBackendConfig,
  type ExternalPluginConfig,
  parseExternalPlugin,
} from './external-config.js';
export {
  DEFAULT_CONNECT_WINDOW_MS,
  DEFAULT_PLUGIN_TIMEOUT_MS,
  MAX_PLUGIN_RESPONSE_BYTES,
  PluginBackend,
} from './grpc-backend.js';
