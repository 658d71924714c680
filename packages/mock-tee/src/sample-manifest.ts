// The sample pod-VM measurement manifest (manifests/podvm-sample.json), built in so the CLI needs no
// file when --manifest is not given. A test keeps the two equal.
import { type MeasurementManifest, parseMeasurementManifest } from './manifest.js';

export const SAMPLE_MANIFEST_DOCUMENT = {
  image_tag: 'mock-podvm:0.1.0',
  description:
    "Sample measurement manifest of a mock pod-VM image: the SHA-256 digests its boot chain extends into each PCR, in order. Each digest is the SHA-256 of a label such as 'mock-podvm 0.1.0 uki .linux' and stands for a measured component.",
  pcrs: {
    '3': ['df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b81119'],
    '9': [
      'ce823396e15268ac6f6ab264743fd9a336e90fb92fad8a9e58bd0acdfd3c063d',
      'a87291549fad08ae827c06b1eafea23e4a77fc5735765e0edb4b9ddfd1488da2',
    ],
    '11': [
      'f7e2564a97b9b52257d31c1bfceb1ad1b4ffe11fce51cff0e2ae712554c2eb4c',
      '93343cbe99c66bd3e27b5b293a2c5fb29729373392bbb7b1176ac38e4f27741f',
      'eb740c4c40ba50db2f20574dbc739b8cac25fd8706a099fb19bcf74038f7a032',
      'ec7d7d4748c897f6dc8ceb2e07681b1969e94e519f32776b259c8452648c12f6',
    ],
    '12': ['0551ee08789855e2bc29293404c8daa631e594ed24f31be013a6d77a13b876ff'],
  },
} as const;

export function sampleManifest(): MeasurementManifest {
  return parseMeasurementManifest(SAMPLE_MANIFEST_DOCUMENT);
}
