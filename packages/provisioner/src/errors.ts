// Error classes callers can branch on; each message names what failed.

export type ProvisionErrorCode =
  | 'ISO_INVALID' // the cidata image is not ISO 9660 or is damaged
  | 'USER_DATA_MISSING' // the source exists but has no user-data
  | 'USER_DATA_INVALID' // not a cloud-config this step accepts
  | 'USER_DATA_FETCH' // the metadata endpoint did not answer in time
  | 'USER_DATA_STATUS' // the metadata endpoint answered a status other than 200 (retried until the deadline)
  | 'INITDATA_INVALID' // the initdata cannot be decoded or parsed
  | 'PCR8_CONFLICT' // PCR8 already holds a value that is not this initdata's
  | 'TPM' // the TPM could not be reached or refused a command
  | 'USAGE'; // bad command line

export class ProvisionError extends Error {
  override readonly name = 'ProvisionError';
  constructor(
    readonly code: ProvisionErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
