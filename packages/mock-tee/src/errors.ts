export type MockTeeErrorCode =
  | 'MANIFEST_INVALID'
  | 'STATE_INVALID'
  | 'SWTPM_FAILED'
  | 'PROVISIONING_FAILED'
  | 'REPORT_INVALID'
  | 'USAGE';

/** Every failure of the mock device; branch on `code`. */
export class MockTeeError extends Error {
  readonly code: MockTeeErrorCode;

  constructor(code: MockTeeErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'MockTeeError';
    this.code = code;
  }
}
