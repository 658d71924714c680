import { describe, expect, it } from 'vitest';
import {
  InitDataError,
  JweDecryptionFailed,
  KbsError,
  ProtocolError,
  ProtocolLibraryError,
} from './index.js';

describe('protocol errors', () => {
  it('share one base class and carry a code', () => {
    const cases: [Error, string][] = [
      [new ProtocolError('a.b', 'must be a string'), 'MESSAGE_MALFORMED'],
      [new JweDecryptionFailed(), 'JWE_DECRYPTION_FAILED'],
      [new InitDataError('initdata is empty'), 'INIT_DATA_INVALID'],
      [new KbsError('TokenNotFound'), 'KBS_ERROR'],
    ];
    for (const [e, code] of cases) {
      expect(e).toBeInstanceOf(ProtocolLibraryError);
      expect(e).toBeInstanceOf(Error);
      expect((e as ProtocolLibraryError).code).toBe(code);
    }
    expect(new ProtocolError('a.b', 'must be a string').message).toBe('a.b: must be a string');
  });
});
