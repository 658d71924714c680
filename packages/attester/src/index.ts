export {
  type Attester,
  AttesterError,
  type AttesterLogger,
  type AttesterModule,
  AttesterNotSupported,
  type Detection,
  EvidenceCollectionFailed,
  type PlatformContext,
  type PlatformOptions,
} from './attester.js';
export { BROKER_AZURE_IMDS_URL, DEFAULT_IMDS_URL, IMDS_CERT_PATH } from './az-snp-vtpm/imds.js';
export {
  AZURE_AK_HANDLE,
  AZURE_TPM_DEVICE,
  AzSnpVtpmAttester,
  type AzSnpVtpmAttesterOptions,
  type AzSnpVtpmEvidence,
  azSnpVtpmModule,
  DEFAULT_REPORT_SETTLE_MS,
  HCL_REPORT_NV_INDEX,
  REPORT_DATA_NV_INDEX,
} from './az-snp-vtpm/index.js';
export {
  BROKER_TSM_REPORT_ROOT,
  DEFAULT_TSM_ATTRIBUTE_WAIT_MS,
  DEFAULT_TSM_OUTBLOB_MAX,
  DEFAULT_TSM_REPORT_ROOT,
  probeTsmProvider,
  requestTsmReport,
  TSM_INBLOB_MAX,
  TSM_PROVIDERS,
  type TsmProvider,
  type TsmReport,
  TsmReportDir,
  TsmReportError,
  type TsmReportErrorCode,
  type TsmReportOptions,
  type TsmReportRequest,
} from './configfs-tsm.js';
export { platformContext } from './platform.js';
export {
  BUILTIN_ATTESTERS,
  DEVICE_DETECTION_ORDER,
  type DetectOptions,
  detectAdditionalDevices,
  detectTee,
  explainTeeDetection,
  getAttester,
  PRIMARY_DETECTION_ORDER,
  type ProbeOutcome,
  type ProbeResult,
  type TeeDetection,
} from './registry.js';
export { SampleAttester, type SampleEvidence, sampleEvidence, sampleModule } from './sample/index.js';
export { ENABLE_SAMPLE_DEVICE, SampleDeviceAttester, sampleDeviceModule } from './sample-device/index.js';
export {
  CERT_TYPE_GUIDS,
  MAX_CERT_TABLE_BYTES,
  MAX_CERT_TABLE_ENTRIES,
  parseCertTable,
  type SevCertTableEntryJson,
  type SevCertType,
} from './snp/cert-table.js';
export {
  BROKER_SEV_GUEST_SYSFS,
  padOrTruncate,
  SEV_GUEST_SYSFS,
  SNP_HOST_DATA_SIZE,
  SNP_REPORT_DATA_SIZE,
  SNP_REQUEST_VMPL,
  SNP_TSM_PROVIDER,
  SnpAttester,
  type SnpAttesterOptions,
  type SnpEvidence,
  snpModule,
} from './snp/index.js';
export {
  rawHostData,
  rawReportData,
  type SevAttestationReportJson,
  type SevTcbJson,
  type SevVersionJson,
  sevReportJson,
} from './snp/report-json.js';
export { BROKER_TPM, INIT_DATA_PCR } from './tpm/common.js';
export {
  AA_TPM_AK_HANDLE,
  AA_TPM_DEVICE,
  DEFAULT_TPM_AK_HANDLE,
  parseAkHandle,
  resizeReportData,
  TPM_REPORT_DATA_SIZE,
  TpmAttester,
  type TpmAttesterOptions,
  type TpmEvidence,
  tpmModule,
} from './tpm/index.js';
