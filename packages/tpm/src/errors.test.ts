import { describe, expect, it } from 'vitest';
import { TPM_CC, TPM_RC, TpmError, TpmLibraryError, TpmParseError, TpmTransportError } from './index.js';

describe('TpmLibraryError', () => {
  it('is the base of the package’s errors and carries a code', () => {
    const parse = new TpmParseError('TPM2B_DIGEST', 2, 'truncated');
    expect(parse).toBeInstanceOf(TpmLibraryError);
    expect(parse).toBeInstanceOf(Error);
    expect(parse.code).toBe('PARSE_FAILED');
    expect(new TpmTransportError('closed').code).toBe('TRANSPORT_FAILED');
    // A TPM's answer keeps its numeric base response code.
    const rc = new TpmError(TPM_RC.INITIALIZE, TPM_CC.Startup);
    expect(rc).toBeInstanceOf(TpmLibraryError);
    expect(rc.code).toBe(TPM_RC.INITIALIZE);
  });
});
