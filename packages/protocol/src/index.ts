export { decodeBase64StdStrict, decodeBase64UrlStrict, encodeBase64Url } from './base64.js';
export {
  InitDataError,
  InvalidResourceUri,
  JweDecryptionFailed,
  JweError,
  JweInvalid,
  JweNotSupported,
  ProtocolError,
} from './errors.js';
export { canonicalJson, JCS_MAX_DEPTH } from './jcs.js';
export {
  type EcCurve,
  type EcPublicJwk,
  parseTeePubKey,
  RSA_MAX_MODULUS_BITS,
  RSA_MIN_MODULUS_BITS,
  type RsaPublicJwk,
  type TeePubKey,
  teePubKeyMembers,
  teePubKeyToKeyObject,
} from './jwk.js';
export {
  formatKbsErrorDetail,
  isKbsErrorKind,
  KBS_ERROR_KINDS,
  KBS_ERROR_TYPE_PREFIX,
  KbsError,
  type KbsErrorBody,
  type KbsErrorKind,
  kbsErrorBody,
  kbsErrorStatus,
  type ParsedKbsErrorBody,
  parseKbsErrorBody,
} from './kbs-error.js';
export {
  type Attestation,
  type Challenge,
  type CompositeEvidence,
  type InitDataWire,
  type KbsRequest,
  MAX_ADDITIONAL_EVIDENCE_LENGTH,
  MAX_INIT_DATA_BODY_LENGTH,
  MAX_JSON_BODY_BYTES,
  MAX_NONCE_LENGTH,
  parseAttestation,
  parseChallenge,
  parseJson,
  parseKbsRequest,
  type RuntimeData,
} from './messages.js';
export {
  DEFAULT_REPORT_DATA_HASH,
  HASH_ALGORITHMS,
  HASH_LENGTHS,
  type HashAlgorithm,
  isHashAlgorithm,
  padReportData,
  parseReportDataHashAlgorithm,
  type ReportDataHashAlgorithm,
  type RuntimeDataInput,
  runtimeDataClaims,
  runtimeDataDigest,
  SUPPORTED_HASH_ALGORITHMS,
} from './report-data.js';
export {
  formatResourcePath,
  formatResourceUri,
  MAX_RESOURCE_URI_LENGTH,
  MAX_SEGMENT_LENGTH,
  parseResourcePath,
  parseResourceUri,
  type ResourcePath,
  type ResourceUri,
} from './resource-uri.js';
export { isTee, PROTOCOL_VERSION, TEES, type Tee } from './tee.js';
