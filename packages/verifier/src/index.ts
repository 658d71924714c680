export {
  type HclReport,
  hclAkPub,
  hclUserData,
  MAX_HCL_REPORT_BYTES,
  parseHclReport,
} from './az-snp-vtpm/hcl.js';
export { type AzSnpVtpmClaims, AzSnpVtpmVerifier, HCL_VMPL } from './az-snp-vtpm/index.js';
export { type AzTdxVtpmEvidence, parseAzTdxVtpmEvidence } from './az-tdx-vtpm/evidence.js';
export { AzTdxVtpmVerifier } from './az-tdx-vtpm/index.js';
export { type CoseSign1, decodeCoseSign1, encodeCbor, signCoseSign1, verifyCoseSign1 } from './cca/cose.js';
export {
  CCA_CHALLENGE_SIZE,
  type CcaClaims,
  CcaVerifier,
  type CcaVerifierOptions,
  ccaClaims,
  realmKey,
  verifyCcaToken,
} from './cca/index.js';
export {
  CCA_CONFIG_ENV,
  type CcaStores,
  type CcaVerifierConfig,
  DEFAULT_CCA_CONFIG_PATH,
  loadCcaConfig,
  loadCcaStores,
  type PlatformRefValue,
  parseCcaConfig,
  parseRvStore,
  parseTaStore,
  type TrustAnchor,
} from './cca/stores.js';
export {
  type CcaToken,
  MAX_CCA_TOKEN_BYTES,
  type PlatformClaims,
  parseCcaToken,
  type RealmClaims,
} from './cca/token.js';
export { main as kbsVerifyMain } from './cli.js';
export {
  VerificationError,
  type VerificationErrorCode,
  VerifierError,
  type VerifierErrorCode,
  VerifierNotSupported,
} from './errors.js';
export {
  type CollateralSource,
  collateralSourceOf,
  createHttpGet,
  defaultHttpGet,
  type HttpAnswer,
  type HttpClientTls,
  type HttpGet,
  HttpGetError,
  type HttpGetOptions,
  observedHttpGet,
} from './http/get.js';
export { type CacheStats, RefreshingCache, type RefreshingCacheOptions } from './http/refreshing-cache.js';
export { certificateFwid, OID_TCG_DICE_TCB_INFO, parsePemChain, verifyNvidiaChain } from './nvidia/chain.js';
export { NVIDIA_DEVICE_ROOT_PEM, NVIDIA_DEVICE_ROOT_SHA1 } from './nvidia/device-root.js';
export {
  MAX_NVIDIA_DEVICES,
  type NvidiaGpuClaims,
  NvidiaVerifier,
  type NvidiaVerifierOptions,
  verifyNvidiaDevice,
} from './nvidia/index.js';
export { decodeOpaqueData, OPAQUE_DATA_TYPES } from './nvidia/opaque.js';
export {
  encodeUnsignedReport,
  HOPPER_SIGNATURE_SIZE,
  type MeasurementBlock,
  type NvidiaReport,
  parseNvidiaReport,
  type ReportSpec,
  SPDM_NONCE_SIZE,
} from './nvidia/spdm.js';
export { getVerifier, supportedTees } from './registry.js';
export {
  SAMPLE_MAX_REPORT_DATA_LENGTH,
  SAMPLE_MAX_SVN_LENGTH,
  type SampleClaims,
  SampleVerifier,
} from './sample/index.js';
export {
  type AmdRootSet,
  builtinAmdRoots,
  OID_BL_SPL,
  OID_FMC_SPL,
  OID_HWID,
  OID_SNP_SPL,
  OID_TEE_SPL,
  OID_UCODE_SPL,
  parseAmdRootBundle,
  parseVekCertificate,
  type VekCertificate,
  type VekChain,
  type VekKind,
  vekTcb,
} from './snp/certs.js';
export { type AzSnpReportClaims, azSnpReportClaims, type SnpClaims, snpClaims } from './snp/claims.js';
export { SnpVerifier } from './snp/index.js';
export { clearKdsChainCache, type KdsChain, kdsRoots } from './snp/kds.js';
export {
  encodeSnpReport,
  type FirmwareVersion,
  type GuestPolicy,
  generationFromCpuid,
  guestPolicy,
  type PlatformInfo,
  parseSnpReport,
  platformInfo,
  type SigningKey,
  SNP_REPORT_SIZE,
  SNP_SIGNED_LENGTH,
  type SnpGeneration,
  type SnpReport,
  type SnpReportFields,
  type SnpSignature,
  signingKeyOf,
  type TcbLayout,
  type TcbVersion,
} from './snp/report.js';
export {
  type CertTableEntry,
  type CertTableType,
  certTableFromSevJson,
  MAX_CERT_TABLE_ENTRIES,
  reportFieldsFromSevJson,
  sevJsonFromReport,
} from './snp/serde.js';
export { signatureFromP1363, signatureToP1363, verifySnpReportSignature } from './snp/signature.js';
export {
  clearKdsCache,
  DEFAULT_KDS_TIMEOUT_MS,
  DEFAULT_OFFLINE_STORE_PATH,
  type FetchedVcek,
  fetchVcek,
  hardwareIdHex,
  KDS_BASE_URL,
  kdsVcekUrl,
  offlineStoreFiles,
  readVcekFromOfflineStore,
  type SnpVerifierOptions,
  TRUSTEE_DEFAULT_VCEK_SOURCES,
  tcbFilePrefix,
  type VcekSource,
} from './snp/vcek-source.js';
export { checkVmpl, type SnpTrustOptions, trustedRoots, verifySnpReport } from './snp/verify.js';
export {
  type CcEventLog,
  checkRtmrReplay,
  type EventDetails,
  type EventLogEntry,
  type EventRecord,
  encodeCcEventLog,
  MAX_EVENT_LOG_BYTES,
  parseCcEventLog,
  replayRegister,
  rtmrsOf,
  TCG_EVENT_TYPES,
} from './tdx/ccel.js';
export { quoteClaims, type TdAttributeClaims, tdAttributes, tdxClaims } from './tdx/claims.js';
export {
  type IsvTcbLevel,
  MAX_COLLATERAL_BYTES,
  parseQeIdentity,
  parseTdxTcbInfo,
  type QeIdentity,
  type TcbStatus,
  type TdxCollateralConfig,
  type TdxTcbInfo,
  type TdxTcbLevel,
} from './tdx/collateral.js';
export {
  type CollateralRequest,
  crlDistributionPoint,
  DEFAULT_COLLATERAL_TIMEOUT_MS,
  DEFAULT_TCB_UPDATE_TYPE,
  INTEL_PCS_HOST,
  INTEL_PCS_URL,
  type IntelCollateralSource,
  type IntelCollateralSourceOptions,
  intelCollateralSource,
  type PcsClientOptions,
  PcsClientToolFile,
  PcsCollateralService,
  type TcbUpdateType,
} from './tdx/collateral-service.js';
export { type Crl, checkCrl, isRevoked, MAX_CRL_BYTES, parseCrl } from './tdx/crl.js';
export { parseTdxEvidence, type TdxEvidence, TdxVerifier } from './tdx/index.js';
export { INTEL_SGX_ROOT_CA_PEM, INTEL_SGX_ROOT_CA_SHA256 } from './tdx/intel-roots.gen.js';
export {
  OID_SGX_EXTENSIONS,
  type PckChain,
  type PckPlatform,
  parsePckChain,
  parseSgxExtension,
} from './tdx/pck.js';
export {
  encodeSignedPart,
  encodeTdReportBody,
  encodeTdxQuote,
  INTEL_QE_VENDOR_ID,
  MAX_QUOTE_BYTES,
  parseTdReportBody,
  parseTdxQuote,
  type QeReport,
  TD_REPORT_BODY_SIZE_V10,
  type TdReportBody,
  type TdReportBodyFields,
  type TdxQuote,
  type TdxQuoteParts,
  type TdxSignatureData,
} from './tdx/quote.js';
export type { TcbEvaluation } from './tdx/tcb.js';
export { encodeTdReport, parseTdReport, TD_REPORT_SIZE, type TdReport } from './tdx/td-report.js';
export {
  establishTcb,
  establishTcbOnline,
  type TdxVerifierOptions,
  type VerifiedTdxQuote,
  verifyQuoteSignatures,
  verifyTdxQuote,
} from './tdx/verify.js';
export { type TpmClaims, TpmVerifier } from './tpm/index.js';
export type { ExpectedData, TeeClass, Verifier, VerifierResult } from './verifier.js';
