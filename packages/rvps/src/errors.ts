/** The RVPS configuration file cannot be used. */
export class RvpsConfigError extends Error {
  override readonly name: string = 'RvpsConfigError';
}
