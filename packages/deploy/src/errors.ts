// Error classes callers can branch on; each message names what failed and where.

/** What failed; callers branch on it (or on the class), never on `name`. */
export type DeployErrorCode =
  /** A document that is not YAML, too large, or not the expected kind (`InputError`). */
  | 'INPUT_INVALID'
  /** A BrokerConfig field is missing, unknown or has a wrong value (`BrokerConfigError`). */
  | 'BROKER_CONFIG_INVALID'
  /** A certificate or key is not usable for what it is meant for (`CertificateError`). */
  | 'CERTIFICATE_INVALID'
  /** An initdata input would make the pod fail to start or attest (`InitDataInputError`). */
  | 'INITDATA_INVALID'
  /** Bad command line (`UsageError`). */
  | 'USAGE'
  /** Any other failure. */
  | 'DEPLOY_FAILED';

/** Base class of every error this package throws on bad input: `code` says what failed. */
export class DeployError extends Error {
  override readonly name: string = 'DeployError';
  readonly code: DeployErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: DeployErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'DEPLOY_FAILED';
  }
}

/** A document that is not YAML, too large, or not the expected kind. */
export class InputError extends DeployError {
  override readonly name: string = 'InputError';
  override readonly code: DeployErrorCode = 'INPUT_INVALID';
}

/** A BrokerConfig field is missing, unknown or has a wrong value; `path` is its dotted location. */
export class BrokerConfigError extends DeployError {
  override readonly name: string = 'BrokerConfigError';
  override readonly code: DeployErrorCode = 'BROKER_CONFIG_INVALID';
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`BrokerConfig ${path}: ${message}`);
  }
}

/** A certificate or key is not usable for what it is meant for. */
export class CertificateError extends DeployError {
  override readonly name: string = 'CertificateError';
  override readonly code: DeployErrorCode = 'CERTIFICATE_INVALID';
}

/** aa.toml, cdh.toml, policy.rego or an instance size would make the pod fail to start or attest. */
export class InitDataInputError extends DeployError {
  override readonly name: string = 'InitDataInputError';
  override readonly code: DeployErrorCode = 'INITDATA_INVALID';
}

/** Bad command line. */
export class UsageError extends DeployError {
  override readonly name: string = 'UsageError';
  override readonly code: DeployErrorCode = 'USAGE';
}
