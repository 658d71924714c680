// The nvidia verifier's settings, apart from the verifier so that ExpectedData can name them.
import type { NrasOptions } from './nras.js';

/** Settings of the `nvidia` verifier. */
export interface NvidiaVerifierOptions {
  /** Device roots trusted besides NVIDIA's (PEM), e.g. the mock TEE's simulated GPU. Unset in production. */
  readonly trustedRoots?: readonly string[];
  /** trustee's `type = "Remote"`: each device is sent to NRAS (or `verifierUrl`) instead of verified here. */
  readonly remote?: NrasOptions;
}
