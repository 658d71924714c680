export {
  type AclRuleConfig,
  AdminAccessDenied,
  type AdminAuthorizer,
  type AdminConfig,
  AdminError,
  bearerToken,
  createAdminAuthorizer,
  type IdentityProviderConfig,
} from './admin.js';
export {
  ADMIN_TOKEN_LIFETIME_SECONDS,
  type AdminTokenOptions,
  adminSigningAlgorithm,
  DEFAULT_ADMIN_ROLE,
  InvalidAdminKey,
  parseAdminPrivateKey,
  signAdminToken,
} from './admin-token.js';
export { AuthError, type AuthErrorCode } from './errors.js';
export { JwtExpired, JwtVerificationError } from './jws.js';
export { TrustMaterialError } from './sources.js';
export { JwtVerifier, type JwtVerifierOptions } from './verifier.js';
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
