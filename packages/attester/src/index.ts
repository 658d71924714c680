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
