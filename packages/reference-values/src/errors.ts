// Error classes callers can branch on; each message names what failed.

/** What failed; callers branch on it (or on the class), never on `name`. */
export type ReferenceValuesErrorCode =
  /** A measurement manifest that is not one of the accepted forms, or too large (`ManifestError`). */
  | 'MANIFEST_INVALID'
  /** The manifest describes another image (`ImageTagMismatchError`). */
  | 'IMAGE_TAG_MISMATCH'
  /** A PCR the policy compares has no value (`MissingPcrError`). */
  | 'PCR_MISSING'
  /** The initdata file cannot give a PCR8 value (`InitDataInputError`). */
  | 'INITDATA_INVALID'
  /** Pulling the measurement artifact, or checking its signature, failed (`ArtifactError`). */
  | 'ARTIFACT_FAILED'
  /** A signature vouches for another manifest digest or reference than the one pulled. */
  | 'SIGNATURE_MISMATCH'
  /** Bad command line (`UsageError`). */
  | 'USAGE'
  /** Any other failure. */
  | 'REFERENCE_VALUES_FAILED';

/** Base class of every error this package throws on bad input: `code` says what failed. */
export class ReferenceValuesError extends Error {
  override readonly name: string = 'ReferenceValuesError';
  readonly code: ReferenceValuesErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: ReferenceValuesErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'REFERENCE_VALUES_FAILED';
  }
}

/** A measurement manifest that is not one of the two accepted forms, or is too large. */
export class ManifestError extends ReferenceValuesError {
  override readonly name: string = 'ManifestError';
  override readonly code: ReferenceValuesErrorCode = 'MANIFEST_INVALID';
}

/** The manifest describes another image than the one asked for. */
export class ImageTagMismatchError extends ReferenceValuesError {
  override readonly name: string = 'ImageTagMismatchError';
  override readonly code: ReferenceValuesErrorCode = 'IMAGE_TAG_MISMATCH';
}

/** A PCR the attestation policy compares has no value in the manifest. */
export class MissingPcrError extends ReferenceValuesError {
  override readonly name: string = 'MissingPcrError';
  override readonly code: ReferenceValuesErrorCode = 'PCR_MISSING';
  constructor(readonly pcrs: readonly number[]) {
    super(
      `the measurement manifest has no value for PCR ${pcrs.map(pcrLabel).join(', ')}; the attestation policy compares PCR 03, 08, 09, 11 and 12`,
    );
  }
}

/** The initdata file cannot give a PCR8 value. */
export class InitDataInputError extends ReferenceValuesError {
  override readonly name: string = 'InitDataInputError';
  override readonly code: ReferenceValuesErrorCode = 'INITDATA_INVALID';
}

/** Pulling the measurement artifact, or checking its signature, failed. */
export class ArtifactError extends ReferenceValuesError {
  override readonly name: string = 'ArtifactError';
  override readonly code: ReferenceValuesErrorCode = 'ARTIFACT_FAILED';
}

/** Bad command line. */
export class UsageError extends ReferenceValuesError {
  override readonly name: string = 'UsageError';
  override readonly code: ReferenceValuesErrorCode = 'USAGE';
}

export function pcrLabel(pcr: number): string {
  return pcr.toString().padStart(2, '0');
}
