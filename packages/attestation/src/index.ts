export {
  BROKER_DEFAULT_POLICY_CPU,
  POLICY_PCRS,
  REFERENCE_VALUES_EXTENSION,
  REFERENCE_VALUES_EXTENSION_KEY,
  VTPM_REFERENCE_PREFIXES,
} from './broker-policy.js';
export {
  type AttestationServiceConfig,
  DEFAULT_BUILD_NAME,
  DEFAULT_DEVELOPER_NAME,
  DEFAULT_ISSUER_NAME,
  DEFAULT_PROFILE_NAME,
  DEFAULT_SESSION_TIMEOUT_MIN,
  DEFAULT_TOKEN_DURATION_MIN,
  parseAttestationServiceConfig,
  type RvpsConfig,
  type SnpVerifierConfig,
  type StorageType,
  type TdxVerifierConfig,
  type TokenBrokerConfig,
  type TokenSignerConfig,
  type VcekSource,
  type VerifierConfig,
} from './config.js';
export { EAR_DEFAULT_POLICY_CPU as TRUSTEE_DEFAULT_POLICY_CPU } from './default-policies.gen.js';
export {
  statusOf,
  TRUST_CLAIM_NAMES,
  type TrustClaimName,
  type TrustTier,
  type TrustVector,
  tierOf,
  trustVectorFromPolicy,
} from './ear.js';
export type { PolicyCheckCode } from './errors.js';
export {
  AttestationError,
  type AttestationErrorCode,
  AttestationFailed,
  type AttestationFailureReason,
  InvalidPolicyId,
  ParsePolicyError,
  RemoteWriteRefused,
  type RemoteWriteRefusedCode,
} from './errors.js';
export {
  describeReferenceValue,
  explainAppraisal,
  explainAppraisals,
  MAX_EXPLANATION_LENGTH,
  type RegisteredReferenceValue,
  type TrustVectorRow,
  trustClaimMeaning,
  trustVectorRows,
} from './explain.js';
export {
  AS_CALL_DEADLINE_MS,
  createGrpcAttestationService,
  DEFAULT_AS_ADDR,
  DEFAULT_AS_POOL_SIZE,
  type GrpcAttestationServiceOptions,
  openGrpcAttestationService,
} from './grpc-remote.js';
export {
  limitErrorOf,
  limitFailures,
  limitRefusal,
  POLICY_EVAL_LIMITS,
  PolicyCheckError,
  policyChecks,
} from './limits.js';
export {
  BROKER_POLICY_ID,
  checkAttestationPolicy,
  checkPolicyId,
  DEFAULT_POLICIES,
  MAX_POLICY_LENGTH,
} from './policy.js';
export { type CompiledPolicy, compilePolicy } from './rego-engine.js';
export {
  type AttestationServiceOptions,
  COLLATERAL_FETCH_FAILURES_METRIC,
  createAttestationService,
  MAX_ADDITIONAL_EVIDENCE,
} from './service.js';
export type { AdditionalEvidence, AttestationService, VerifyRequest } from './service-api.js';
export {
  describeVerifierSettings,
  loadVerifierSettings,
  MAX_TRUST_FILE_BYTES,
  type VerifierSettings,
} from './verifier-settings.js';
