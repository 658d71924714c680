import type { Attester, AttesterModule } from '../attester.js';
import { type SampleEvidence, sampleEvidence } from '../sample/index.js';

/** Environment variable that switches the sample device on, as upstream. */
export const ENABLE_SAMPLE_DEVICE = 'ENABLE_SAMPLE_DEVICE';

/**
 * guest-components' sample *device* (an additional attester, like a GPU):
 * the sample evidence shape with `svn` "2".
 */
export class SampleDeviceAttester implements Attester {
  readonly tee = 'sampledevice' as const;

  async getEvidence(reportData: Uint8Array): Promise<SampleEvidence> {
    return sampleEvidence('2', reportData);
  }
}

export const sampleDeviceModule: AttesterModule = {
  tee: 'sampledevice',
  async detect(ctx) {
    // Upstream checks only that the variable is set (any value, even empty).
    return ctx.env[ENABLE_SAMPLE_DEVICE] !== undefined
      ? { detected: true, reason: `${ENABLE_SAMPLE_DEVICE} is set` }
      : { detected: false, reason: `${ENABLE_SAMPLE_DEVICE} is not set` };
  },
  create: () => new SampleDeviceAttester(),
};
