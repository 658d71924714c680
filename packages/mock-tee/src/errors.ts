export type MockTeeErrorCode =
  | 'MANIFEST_INVALID'
  | 'STATE_INVALID'
  | 'SWTPM_FAILED'
  | 'PROVISIONING_FAILED'
  | 'REPORT_INVALID'
  /** A request to the mock IMDS that is not the JSON it serves. */
  | 'REQUEST_INVALID'
  /** The device, GPU or realm did not start. */
  | 'START_FAILED'
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
