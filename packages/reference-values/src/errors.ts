// Error classes callers can branch on; each message names what failed.

/** Base class of every error this package throws on bad input. */
export class ReferenceValuesError extends Error {
  override readonly name: string = 'ReferenceValuesError';
}

/** A measurement manifest that is not one of the two accepted forms, or is too large. */
export class ManifestError extends ReferenceValuesError {
  override readonly name: string = 'ManifestError';
}

/** The manifest describes another image than the one asked for. */
export class ImageTagMismatchError extends ReferenceValuesError {
  override readonly name: string = 'ImageTagMismatchError';
}

/** A PCR the attestation policy compares has no value in the manifest. */
export class MissingPcrError extends ReferenceValuesError {
  override readonly name: string = 'MissingPcrError';
  constructor(readonly pcrs: readonly number[]) {
    super(
      `the measurement manifest has no value for PCR ${pcrs.map(pcrLabel).join(', ')}; the attestation policy compares PCR 03, 08, 09, 11 and 12`,
    );
  }
}

/** The initdata file cannot give a PCR8 value. */
export class InitDataInputError extends ReferenceValuesError {
  override readonly name: string = 'InitDataInputError';
}

/** Pulling the measurement artifact, or checking its signature, failed. */
export class ArtifactError extends ReferenceValuesError {
  override readonly name: string = 'ArtifactError';
}

/** Bad command line. */
export class UsageError extends ReferenceValuesError {
  override readonly name: string = 'UsageError';
}

export function pcrLabel(pcr: number): string {
  return pcr.toString().padStart(2, '0');
}
