import type { Tee } from '@broker/protocol';
import type { CcaVerifierOptions } from './cca/options.js';
import type { NvidiaVerifierOptions } from './nvidia/options.js';
import type { AmdRootSet } from './snp/certs.js';
import type { SnpVerifierOptions } from './snp/vcek-source.js';
import type { TdxVerifierOptions } from './tdx/verify.js';

/** trustee's TEE classes: one policy per class (`<policy id>_<class>`) and one token submodule each. */
export type TeeClass = 'cpu' | 'gpu' | 'switch' | 'ppcie';

/** What the evidence must be bound to. */
export interface ExpectedData {
  /** H(JCS(runtime data)): compared with the report data in the evidence, in each TEE's way. */
  readonly reportData: Uint8Array;
  /**
   * trustee's `ReportData::NotProvided`: the caller sent no runtime data (the attestation agent's
   * `coco_as` token asks this way), so nothing is expected in the evidence's report data and it is not
   * compared. A verifier that does not read this flag compares with `reportData` (then empty) and fails
   * closed; see reportDataExpected.
   */
  readonly reportDataNotProvided?: boolean;
  /** Digest of the initdata TOML, when the guest sent initdata. */
  readonly initDataHash?: Uint8Array;
  /** Time at which certificates must be valid (hardware-rooted TEEs); the current time by default. */
  readonly now?: Date;
  /**
   * Hardware roots trusted besides the built-in vendor roots, e.g. the mock TEE's test ARK: PEM
   * bundles of an ARK with the ASK/ASVK it signed. Leave unset in production.
   */
  readonly trustedArks?: readonly (string | AmdRootSet)[];
  /** `snp` verifier settings (`[attestation_service.verifier_config.snp_verifier]`): VCEK sources. */
  readonly snp?: SnpVerifierOptions;
  /** `tdx` and `az-tdx-vtpm` settings: the offline Intel collateral, and test SGX roots to trust. */
  readonly tdx?: TdxVerifierOptions;
  /** `nvidia` settings: device roots trusted besides NVIDIA's (the mock TEE's simulated GPU). */
  readonly nvidia?: NvidiaVerifierOptions;
  /** `cca` settings: the TA and RV stores, or the CCA config file naming them. */
  readonly cca?: CcaVerifierOptions;
}

/** False only for trustee's `ReportData::NotProvided`: the report data check is skipped. */
export function reportDataExpected(expected: ExpectedData): boolean {
  return expected.reportDataNotProvided !== true;
}

/** trustee's regularize_data: zero-pad, or cut, to `len` bytes. */
export function regularize(data: Uint8Array, len: number): Buffer {
  const out = Buffer.alloc(len);
  out.set(data.subarray(0, len));
  return out;
}

/** Claims of one attested environment. A verifier may report several (e.g. a CPU and its devices). */
export interface VerifierResult {
  readonly claims: Record<string, unknown>;
  readonly class: TeeClass;
}

/**
 * One TEE's evidence check. Evidence is untrusted JSON as the guest sent it;
 * a verifier either returns claims or throws a VerificationError.
 */
export interface Verifier {
  readonly tee: Tee;
  evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]>;
}
