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
  type StorageType,
  type TokenBrokerConfig,
  type TokenSignerConfig,
  type VcekSource,
  type VerifierConfig,
} from './config.js';
export { TRUST_CLAIM_NAMES, type TrustClaimName, type TrustTier, type TrustVector, tierOf } from './ear.js';
export {
  AttestationFailed,
  type AttestationFailureReason,
  InvalidPolicyId,
  ParsePolicyError,
} from './errors.js';
export { DEFAULT_POLICIES, MAX_POLICY_LENGTH } from './policy.js';
export {
  type AdditionalEvidence,
  type AttestationService,
  type AttestationServiceOptions,
  createAttestationService,
  MAX_ADDITIONAL_EVIDENCE,
  type VerifyRequest,
} from './service.js';
