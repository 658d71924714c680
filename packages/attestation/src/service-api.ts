// What an attestation service offers the KBS and the standalone service's front ends: the built-in one
// (service.ts) and trustee's over gRPC (grpc-remote.ts) both answer it.
import type { JsonWebKey } from 'node:crypto';
import type { ReportDataHashAlgorithm, Tee } from '@broker/protocol';

/** One piece of evidence beside the primary one (e.g. a GPU), as the KBS splits `additional_evidence`. */
export interface AdditionalEvidence {
  readonly tee: Tee;
  readonly evidence: unknown;
  readonly runtimeData: Record<string, unknown>;
  /** Defaults to the request's algorithm. */
  readonly runtimeDataHashAlgorithm?: ReportDataHashAlgorithm;
  /** As VerifyRequest's. */
  readonly runtimeDataNotProvided?: boolean;
  /** As VerifyRequest's (trustee's attestation service takes them on every verification request). */
  readonly rawReportData?: Uint8Array;
  readonly initData?: VerifyRequest['initData'];
  readonly initDataDigest?: Uint8Array;
}

export interface VerifyRequest {
  readonly tee: Tee;
  readonly evidence: unknown;
  /**
   * The object whose JCS form the guest hashed into its evidence, e.g.
   * `{"additional-evidence","nonce","tee-pubkey"}` with the key reduced to its
   * known members (protocol `runtimeDataClaims`). It also becomes `runtime_data_claims`.
   */
  readonly runtimeData: Record<string, unknown>;
  readonly runtimeDataHashAlgorithm: ReportDataHashAlgorithm;
  /**
   * The expected report data of the primary evidence as given, instead of the hash of `runtimeData`
   * (trustee's gRPC `raw_runtime_data`, compared as-is).
   */
  readonly rawReportData?: Uint8Array;
  /**
   * trustee's `runtime_data` absent (the attestation service's own API; the KBS always sends it): the
   * report data is not checked, `runtimeData` is ignored and `runtime_data_claims` is null.
   */
  readonly runtimeDataNotProvided?: boolean;
  readonly initData: { readonly format: string; readonly body: string } | null;
  /**
   * The expected initdata digest as given (trustee's `init_data_digest`), instead of `initData`: the
   * verifier compares it with what the evidence binds, and `init_data_claims` is null. Not both.
   */
  readonly initDataDigest?: Uint8Array;
  readonly additional: readonly AdditionalEvidence[];
  /** The first id is used (`default` → policy `default_cpu` for CPU claims). */
  readonly policyIds: readonly string[];
}

export interface AttestationService {
  /** Returns the EAR JWT, even when the appraisal is contraindicated; throws AttestationFailed. */
  verify(req: VerifyRequest): Promise<string>;
  /**
   * Checks, then stores `<id>.rego`; throws (nothing stored) ParsePolicyError when it does not compile,
   * PolicyCheckError when it lacks `trust_claims` or exceeds an evaluation limit, or InvalidPolicyId.
   */
  setPolicy(id: string, regoText: string): Promise<void>;
  /** Registers an RVPS message; throws RvpsError. */
  registerReferenceValue(message: unknown): Promise<void>;
  /** The stored value for the admin API; undefined when unknown. */
  getReferenceValue(name: string): Promise<unknown | undefined>;
  /**
   * The token signer's public key as in the token header (with x5c/x5u when configured); undefined
   * for a remote attestation service, whose key only `[attestation_token]` knows.
   */
  readonly signerPublicJwk: JsonWebKey | undefined;
  /** The configured certificate chain (PEM), when there is one. */
  readonly signerCertChainPem?: string;
  close(): Promise<void>;
}
