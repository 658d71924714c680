export { VerificationError, type VerificationErrorCode, VerifierNotSupported } from './errors.js';
export { getVerifier, supportedTees } from './registry.js';
export {
  SAMPLE_MAX_REPORT_DATA_LENGTH,
  SAMPLE_MAX_SVN_LENGTH,
  type SampleClaims,
  SampleVerifier,
} from './sample/index.js';
export type { ExpectedData, TeeClass, Verifier, VerifierResult } from './verifier.js';
