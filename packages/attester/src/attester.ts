import type { Tee } from '@broker/protocol';

/**
 * Collects evidence from one TEE. `reportData` is bound into the evidence as
 * given: callers (the KBS client) hash, pad or truncate before calling, the
 * way guest-components' attesters expect.
 */
export interface Attester {
  readonly tee: Tee;
  /** Returns the evidence JSON value sent as `tee-evidence.primary_evidence` (or in the additional map). */
  getEvidence(reportData: Uint8Array): Promise<unknown>;
  /**
   * Bind the init-data digest to the TEE at start-up (TDX: compare with
   * MRCONFIGID, SNP: with HOSTDATA, vTPM: extend PCR8). Attesters without it
   * are "unsupported", which the attestation agent logs and skips, as upstream.
   */
  bindInitData?(digest: Uint8Array): Promise<void>;
  /**
   * Extend a runtime measurement register (the AAEL event log). Attesters
   * without it make the agent answer NOT_SUPPORTED, as upstream.
   */
  extendRuntimeMeasurement?(eventDigest: Uint8Array, registerIndex: number): Promise<void>;
}

/** Minimal logger; a pino logger fits. */
export interface AttesterLogger {
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
}

/**
 * Where platform probes look. Kernel paths are resolved under `root` so tests
 * and the mock TEE can point them at a temporary tree.
 */
export interface PlatformOptions {
  /** Prefix for absolute device and sysfs paths; default `/`. */
  readonly root?: string;
  /** Environment consulted by probes (e.g. `ENABLE_SAMPLE_DEVICE`); default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly logger?: AttesterLogger;
}

/** What a probe found, and why, so detection can be explained in a log line. */
export interface Detection {
  readonly detected: boolean;
  readonly reason: string;
}

/** The view of the platform a probe gets. */
export interface PlatformContext {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** True when the absolute path (resolved under the root) exists. */
  exists(absolutePath: string): Promise<boolean>;
}

/**
 * One TEE's plug-in: a probe and a factory. Adding a TEE means adding a
 * folder that exports one of these and listing it in the registry.
 */
export interface AttesterModule {
  readonly tee: Tee;
  detect(ctx: PlatformContext): Promise<Detection>;
  create(options: PlatformOptions): Attester;
}

/** Base class of attester failures. */
/** The configfs-tsm step that failed (`TsmReportError`). */
export type TsmReportErrorCode =
  | 'no-tsm-reports'
  | 'create-failed'
  | 'attribute-access'
  | 'generation-parse'
  | 'wrong-provider'
  | 'unknown-provider'
  | 'inblob-conflict'
  | 'inblob-length'
  | 'outblob-too-large';

/** What an attester failed at; callers branch on it (or on the class), never on `name`. A configfs-tsm failure carries the step (`TsmReportErrorCode`). */
export type AttesterErrorCode =
  /** No attester for this TEE is built into this program (`AttesterNotSupported`). */
  | 'NOT_SUPPORTED'
  /** The device refused or returned something unusable (`EvidenceCollectionFailed`). */
  | 'EVIDENCE_COLLECTION_FAILED'
  /** An HCL report that cannot be parsed (`HclReportMalformed`). */
  | 'HCL_REPORT_MALFORMED'
  /** The ioctl shim failed (`IoctlShimError`). */
  | 'IOCTL_SHIM_FAILED'
  /** An NVIDIA tool the GPU attester needs is missing (`NvidiaToolMissing`). */
  | 'NVIDIA_TOOL_MISSING'
  /** Probing the platform for a TEE failed in a way worth reporting (a GPU in CC mode whose tools do not run). */
  | 'DETECTION_FAILED'
  /** Any other failure. */
  | 'ATTESTER_FAILED'
  /** A configfs-tsm step (`TsmReportError`). */
  | TsmReportErrorCode;

/** The base of every error of this package: `code` says what failed; branch on it or on the class, never on `name`. */
export class AttesterError extends Error {
  override readonly name: string = 'AttesterError';
  readonly code: AttesterErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: AttesterErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'ATTESTER_FAILED';
  }
}

/** No attester for this TEE is built into this program. */
export class AttesterNotSupported extends AttesterError {
  override readonly code: AttesterErrorCode = 'NOT_SUPPORTED';
  override readonly name: string = 'AttesterNotSupported';
  readonly tee: string;
  constructor(tee: string) {
    super(`no attester for TEE ${JSON.stringify(tee)} in this build`);
    this.tee = tee;
  }
}

/** The device refused or returned something unusable. */
export class EvidenceCollectionFailed extends AttesterError {
  override readonly code: AttesterErrorCode = 'EVIDENCE_COLLECTION_FAILED';
  override readonly name: string = 'EvidenceCollectionFailed';
}
