// Every deploy error shares DeployError and carries a `code`, so callers branch on it (or on the
// class), never on `name`.
import { describe, expect, it } from 'vitest';
import {
  BrokerConfigError,
  CertificateError,
  DeployError,
  InitDataInputError,
  InputError,
  UsageError,
} from './errors.js';

describe('deploy errors', () => {
  it('share DeployError and name what failed in code', () => {
    const cases: [DeployError, string][] = [
      [new InputError('why'), 'INPUT_INVALID'],
      [new BrokerConfigError('spec.kbs', 'why'), 'BROKER_CONFIG_INVALID'],
      [new CertificateError('why'), 'CERTIFICATE_INVALID'],
      [new InitDataInputError('why'), 'INITDATA_INVALID'],
      [new UsageError('why'), 'USAGE'],
      [new DeployError('why'), 'DEPLOY_FAILED'],
    ];
    for (const [e, code] of cases) {
      expect(e).toBeInstanceOf(DeployError);
      expect(e).toBeInstanceOf(Error);
      expect(e.code).toBe(code);
    }
    expect(new BrokerConfigError('spec.kbs', 'why').message).toBe('BrokerConfig spec.kbs: why');
  });
});
