export {
  ADMIN_TOKEN_LIFETIME_SECONDS,
  type AdminTokenOptions,
  adminSigningAlgorithm,
  DEFAULT_ADMIN_ROLE,
  InvalidAdminKey,
  parseAdminPrivateKey,
  signAdminToken,
} from '@broker/auth';
export {
  ADMIN_USER_AGENT,
  type AdminLogger,
  type AttestationPolicyInput,
  DEFAULT_ATTESTATION_POLICY_ID,
  DEFAULT_ATTESTATION_POLICY_TYPE,
  KbsAdminClient,
  type KbsAdminClientOptions,
  RVPS_MESSAGE_VERSION,
  sampleReferenceValueMessage,
} from './admin.js';
export { type CliIo, DEFAULT_KBS_URL, KBS_CLIENT_VERSION, main } from './cli.js';
export {
  DEFAULT_HASH_ALGORITHM,
  GET_RESOURCE_MAX_ATTEMPTS,
  INIT_DATA_FORMAT,
  KBS_CLIENT_USER_AGENT,
  KBS_PATH_PREFIX,
  KbsClient,
  type KbsClientLogger,
  type KbsClientOptions,
  RCAR_MAX_ATTEMPTS,
  RCAR_RETRY_DELAY_MS,
  resourceRequestPath,
  SESSION_COOKIE_NAME,
  selectedHashAlgorithm,
  type TokenAndKey,
  type TokenProvider,
} from './client.js';
export { CookieJar } from './cookies.js';
export {
  EvidenceFailed,
  InvalidHashAlgorithm,
  InvalidResourcePath,
  InvalidTeeKey,
  InvalidToken,
  KbsBadResponse,
  KbsClientError,
  type KbsClientErrorCode,
  KbsRejected,
  type KbsRejection,
  KbsResourceMissing,
  KbsResourceNotFound,
  KbsUnauthorized,
  KbsUnreachable,
  KbsUntrustedCertificate,
  RcarHandshakeFailed,
  ResourceDecryptionFailed,
} from './errors.js';
export {
  AFFIRMING_RESOURCE_POLICY,
  ALLOW_ALL_RESOURCE_POLICY,
  DEFAULT_RESOURCE_POLICY,
  DENY_ALL_RESOURCE_POLICY,
} from './policies.js';
export {
  DEFAULT_TEE_KEY_ALGORITHM,
  parseTeeKeyAlgorithm,
  TEE_KEY_ALGORITHMS,
  type TeeKeyAlgorithm,
  TeeKeyPair,
} from './tee-key.js';
export { type AttestationToken, isTokenValid, parseAttestationToken } from './token.js';
