// Public face of @broker/agent-policy: the kata agent policy (policy.rego) enforced on every sandbox-agent
// ttrpc request by a gate in front of the agent.
export {
  AGENT_METHODS,
  AGENT_PROTO,
  AGENT_PROTO_PROFILES,
  AGENT_SERVICE,
  type AgentProtoProfile,
  agentProtoRoot,
  agentProtoSources,
  HEALTH_SERVICE,
  isAgentProtoProfile,
  OCI_PROTO,
  REQUEST_TYPES,
  TYPES_PROTO,
} from './agent-proto.js';
export {
  type CheckResult,
  checkRequest,
  DEFAULT_AGENT_ADDRESS,
  DEFAULT_LISTEN,
  type MainOptions,
  main,
  parseJsonExact,
  requestTypeOf,
  stringifyJson,
} from './cli.js';
export { DEFAULT_POLICY_REGO } from './default-policy.js';
export { AgentPolicyError, type AgentPolicyErrorCode } from './errors.js';
export {
  AgentPolicyGate,
  type AgentPolicyGateOptions,
  type GateLogger,
  type UnknownMethodMode,
} from './gate.js';
export {
  DEFAULT_INITDATA_TOML_PATH,
  DEFAULT_POLICY_FILE,
  INITDATA_POLICY_KEY,
  type InitialPolicy,
  InitialPolicyError,
  type InitialPolicyOptions,
  type PolicyOrigin,
  policyFromInitData,
  resolveInitialPolicy,
} from './initial.js';
export {
  applyPatch,
  InvalidPatchError,
  type Json,
  PatchApplyError,
  type PatchOperation,
  parsePatch,
} from './json-patch.js';
export {
  AgentPolicy,
  type AgentPolicyOptions,
  type LoadedPolicy,
  POLICY_MAX_COL,
  POLICY_MAX_FILE_BYTES,
  POLICY_MAX_LINES,
  type PolicyDecision,
  PolicyEvaluationError,
  PolicyLoadError,
  type RegoDialect,
  SET_POLICY_SOURCE_NAME,
  unimportedFutureKeywords,
} from './policy.js';
export {
  CopyFileInputError,
  copyFilePolicyInput,
  type FileType,
  fileTypeOf,
  type PolicyCopyFileRequest,
  policyInputFromBytes,
  policyInputOf,
} from './requests.js';
export { rustDebugString } from './rust-debug.js';
export {
  decodeRequest,
  encodeRequest,
  RequestDecodeError,
  RequestEncodeError,
  rustFieldName,
  rustVariantName,
  toPolicyJson,
  type WireValue,
} from './wire.js';
