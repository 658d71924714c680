// The device's swtpm runs as its child with its state in the device's state folder; only the
// interposer connects to it (swtpm serves one data connection at a time). Launching is
// @broker/tpm's; this maps its failure to the device's error codes.
import {
  type LaunchSwtpmOptions,
  launchSwtpm as launch,
  SwtpmLaunchError,
  type SwtpmProcess,
} from '@broker/tpm';
import { MockTeeError } from './errors.js';

export type { SwtpmEndpoint, SwtpmProcess } from '@broker/tpm';

/** Starts swtpm on `port` (and port + 1), or on a free pair when `port` is 0; fails with SWTPM_FAILED. */
export async function launchSwtpm(options: LaunchSwtpmOptions): Promise<SwtpmProcess> {
  try {
    return await launch(options);
  } catch (err) {
    if (err instanceof SwtpmLaunchError) throw new MockTeeError('SWTPM_FAILED', err.message, { cause: err });
    throw err;
  }
}
