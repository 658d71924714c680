// The cca verifier's settings, apart from the verifier so that ExpectedData can name them.
import type { VeraisonOptions } from './remote.js';
import type { CcaStores } from './stores.js';

/** Settings of the `cca` verifier. Without them the verifier reads trustee's CCA config file. */
export interface CcaVerifierOptions {
  /** TA and RV stores already loaded (tests, embedders). */
  readonly stores?: CcaStores;
  /** Veraison to ask instead of verifying here (trustee's remote type). */
  readonly remote?: VeraisonOptions;
  /** The CCA config file; default `$CCA_CONFIG_FILE`, then trustee's default path. */
  readonly configPath?: string;
}
