export { GUEST_ENV, type MockTeeMainOptions, mockTeeMain } from './cli.js';
export { HANDLE_COUNTS } from './command-handles.js';
export {
  ConfigfsTsmResponder,
  type ConfigfsTsmResponderOptions,
  type TsmProviderCallback,
  type TsmRequest,
  type TsmResponderErrorHandler,
  type TsmResponse,
} from './configfs-tsm/index.js';
export { type MockTee, STATE_FILES, type StartMockTeeOptions, startMockTee } from './device.js';
export { MockTeeError, type MockTeeErrorCode } from './errors.js';
export {
  AK_PERSISTENT_HANDLE,
  buildHclReport,
  createHclReport,
  HCL_HASH_TYPE_SHA256,
  HCL_REPORT_NV_INDEX,
  HCL_REPORT_NV_SIZE,
  HCL_REPORT_TYPE_SNP,
  HCL_USER_DATA_NV_INDEX,
  type HclReportInput,
  MAX_RUNTIME_CLAIMS_SIZE,
  type RuntimeClaimsInput,
  reportDataForClaims,
  runtimeClaims,
  USER_DATA_SIZE,
  userDataHex,
  type VmConfiguration,
} from './hcl.js';
export {
  certificationResponse,
  IMDS_CERTIFICATION_PATH,
  type ImdsCertificationResponse,
  ImdsServer,
  type ImdsServerOptions,
} from './imds.js';
export {
  DEFAULT_SNP_MEASUREMENT,
  expectedPcrValues,
  formatMeasurementManifest,
  loadMeasurementManifest,
  MANIFEST_PCRS,
  MAX_DIGESTS_PER_PCR,
  MAX_MANIFEST_BYTES,
  type MeasurementManifest,
  parseMeasurementManifest,
} from './manifest.js';
export { NV_BUFFER_MAX, Paravisor, type ParavisorIdentity, type ParavisorOptions } from './paravisor.js';
export {
  AK_TEMPLATE,
  EK_PERSISTENT_HANDLE,
  EK_TEMPLATE,
  HCL_REPORT_NV_ATTRIBUTES,
  type ProvisionedKeys,
  provisionVtpm,
  simulateBoot,
  USER_DATA_NV_ATTRIBUTES,
} from './provision.js';
export {
  type CreateRootsOptions,
  createHardwareRoots,
  DEFAULT_TCB,
  type HardwareRoots,
  loadHardwareRoots,
  loadOrCreateHardwareRoots,
  ROOT_FILES,
  rootBundlePem,
  saveHardwareRoots,
  type TcbVersion,
  VCEK_OID,
} from './roots.js';
export { SAMPLE_MANIFEST_DOCUMENT, sampleManifest } from './sample-manifest.js';
export {
  BARE_SNP_GUEST_POLICY,
  CERT_TABLE_GUIDS,
  type CertTableInput,
  DEFAULT_SNP_LAUNCH_MEASUREMENT,
  encodeCertTable,
  hostDataForInitData,
  type MockSnpDevice,
  SEV_GUEST_PROVIDER,
  SNP_INBLOB_SIZE,
  SNP_STATE_FILES,
  type SnpCertTableContent,
  type SnpReportConfig,
  type StartMockSnpDeviceOptions,
  snpTsmProvider,
  startMockSnpDevice,
} from './snp/index.js';
export {
  AZURE_GUEST_POLICY,
  buildSnpReport,
  SNP_REPORT_SIZE,
  type SnpReportInput,
  tcbToU64,
} from './snp-report.js';
export { errorResponse, TpmStreamServer, type TpmStreamServerOptions } from './stream-server.js';
export { launchSwtpm, type SwtpmEndpoint, type SwtpmProcess } from './swtpm.js';
export {
  createTdxHardware,
  DEFAULT_MRTD,
  loadOrCreateTdxHardware,
  MOCK_TDX_PLATFORM,
  MOCK_TEE_TCB_SVN,
  type MockTdState,
  type MockTdxDevice,
  type StartMockTdxDeviceOptions,
  sampleBootEvents,
  signMockCollateral,
  startMockTdxDevice,
  TD_QUOTE_PATH,
  TDX_GUEST_PROVIDER,
  TDX_HARDWARE_FILES,
  TDX_INBLOB_SIZE,
  TDX_STATE_FILES,
  TdQuoteServer,
  type TdQuoteServerOptions,
  type TdxCollateralFiles,
  type TdxHardware,
  tdxTsmProvider,
} from './tdx/index.js';
