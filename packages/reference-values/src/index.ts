export {
  type PulledMeasurements,
  type PullMeasurementsOptions,
  pullMeasurementArtifact,
} from './artifact.js';
export {
  nodeReferenceValuesIo,
  REFERENCE_VALUES_USAGE,
  type ReferenceValuesIo,
  referenceValuesMain,
} from './cli.js';
export {
  ANNOTATION_PREFIX,
  type ConfigMapObject,
  type ConfigMapOptions,
  configMapName,
  configMapYaml,
  REFERENCE_VALUES_KEY,
  referenceValuesConfigMap,
  referenceValuesFile,
} from './configmap.js';
export {
  ArtifactError,
  ImageTagMismatchError,
  InitDataInputError,
  ManifestError,
  MissingPcrError,
  ReferenceValuesError,
  type ReferenceValuesErrorCode,
  UsageError,
} from './errors.js';
export {
  INITDATA_PCR,
  imageTagMatches,
  MAX_MANIFEST_BYTES,
  type ManifestForm,
  type PodVmMeasurements,
  parseMeasurementManifest,
  replaySha256,
} from './manifest.js';
export {
  MAX_BUNDLE_BYTES,
  parseRekorPublicKey,
  type RekorSetInput,
  rekorLogId,
  SIGSTORE_BUNDLE_ANNOTATION,
  verifyRekorSet,
} from './rekor.js';
export {
  MAX_PROVENANCE_MEMBERS,
  MAX_PROVENANCE_VALUE_LENGTH,
  messageProvenance,
  RVPS_MESSAGE_VERSION,
  type RvpsSampleMessage,
  rvpsSampleMessage,
  sampleProvenance,
} from './rvps.js';
export {
  checkPlatformTee,
  computeReferenceValues,
  type InitDataPcr8,
  initDataPcr8,
  isReferenceTee,
  PLATFORM_TEES,
  REQUIRED_IMAGE_PCRS,
  type ReferenceTee,
  type ReferenceValueInput,
  type ReferenceValues,
  referenceValueName,
  TEE_PREFIXES,
} from './values.js';
