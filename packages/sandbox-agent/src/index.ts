// Public face of @broker/sandbox-agent: kata's grpc.AgentService over ttrpc, running the pod's
// containers with runc.
export {
  type AgentLogger,
  DEFAULT_ROOT,
  DEFAULT_STATE_DIR,
  SandboxAgent,
  type SandboxAgentOptions,
} from './agent.js';
export { type MainOptions, main } from './cli.js';
export {
  InvalidRequest,
  NotFound,
  RuntimeFailed,
  type SandboxAgentCode,
  SandboxAgentError,
  UnimplementedRpc,
  UnsupportedStorage,
  WrongState,
} from './errors.js';
export { OutputBuffer } from './output.js';
export { checkId, type ResolveOptions, resolveUnder } from './paths.js';
export { RESPONSES_PROTO } from './proto.js';
export {
  DEFAULT_LISTEN,
  dataHubPuller,
  KATA_VSOCK_ADDRESS,
  parseListenAddress,
  type RunningAgent,
  type StartOptions,
  startSandboxAgent,
  UnsupportedAddress,
} from './server.js';
export { AGENT_VERSION, IMPLEMENTED_RPCS, registerAgentService, UNIMPLEMENTED_RPCS } from './service.js';
export { specToOci } from './spec.js';
export type { ImagePuller } from './storage.js';
