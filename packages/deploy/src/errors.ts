// Error classes callers can branch on; each message names what failed and where.

/** Base class of every error this package throws on bad input. */
export class DeployError extends Error {
  override readonly name: string = 'DeployError';
}

/** A document that is not YAML, too large, or not the expected kind. */
export class InputError extends DeployError {
  override readonly name: string = 'InputError';
}

/** A BrokerConfig field is missing, unknown or has a wrong value; `path` is its dotted location. */
export class BrokerConfigError extends DeployError {
  override readonly name: string = 'BrokerConfigError';
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
}

/** aa.toml, cdh.toml, policy.rego or an instance size would make the pod fail to start or attest. */
export class InitDataInputError extends DeployError {
  override readonly name: string = 'InitDataInputError';
}

/** Bad command line. */
export class UsageError extends DeployError {
  override readonly name: string = 'UsageError';
}
