// Every reference-values error shares ReferenceValuesError and carries a `code`, so callers branch on it
// (or on the class), never on `name`.
import { describe, expect, it } from 'vitest';
import {
  ArtifactError,
  ImageTagMismatchError,
  InitDataInputError,
  ManifestError,
  MissingPcrError,
  ReferenceValuesError,
  UsageError,
} from './errors.js';

describe('reference-values errors', () => {
  it('share ReferenceValuesError and name what failed in code', () => {
    const cases: [ReferenceValuesError, string][] = [
      [new ManifestError('why'), 'MANIFEST_INVALID'],
      [new ImageTagMismatchError('why'), 'IMAGE_TAG_MISMATCH'],
      [new MissingPcrError([3]), 'PCR_MISSING'],
      [new InitDataInputError('why'), 'INITDATA_INVALID'],
      [new ArtifactError('why'), 'ARTIFACT_FAILED'],
      [new UsageError('why'), 'USAGE'],
      [new ReferenceValuesError('why', { code: 'SIGNATURE_MISMATCH' }), 'SIGNATURE_MISMATCH'],
      [new ReferenceValuesError('why'), 'REFERENCE_VALUES_FAILED'],
    ];
    for (const [e, code] of cases) {
      expect(e).toBeInstanceOf(ReferenceValuesError);
      expect(e).toBeInstanceOf(Error);
      expect(e.code).toBe(code);
    }
  });
});
