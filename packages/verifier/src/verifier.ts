import type { Tee } from '@broker/protocol';

/** trustee's TEE classes: one policy per class (`<policy id>_<class>`) and one token submodule each. */
export type TeeClass = 'cpu' | 'gpu';

/** What the evidence must be bound to. */
export interface ExpectedData {
  /** H(JCS(runtime data)): compared with the report data in the evidence, in each TEE's way. */
  readonly reportData: Uint8Array;
  /** Digest of the initdata TOML, when the guest sent initdata. */
  readonly initDataHash?: Uint8Array;
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
