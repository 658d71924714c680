// Every attestation agent error shares AttestationAgentError and carries a `code`, so callers branch
// on it (or on the class), never on `name`.
import { describe, expect, it } from 'vitest';
import { socketPathOf } from './cli.js';
import { AaConfigError, AaKbcParamsError, parseAaKbcParams } from './config.js';
import {
  AttestationAgentError,
  CocoAsTokenFailed,
  InitDataBindingFailed,
  InvalidRegisterIndex,
  RuntimeDataTooLarge,
  TokenConfigMissing,
  UnsupportedTokenType,
} from './errors.js';
import { EventlogError, InvalidAaelEvent } from './eventlog.js';

describe('attestation agent errors', () => {
  it('share AttestationAgentError and name what failed in code', () => {
    const cases: [AttestationAgentError, string][] = [
      [new UnsupportedTokenType('x'), 'UNSUPPORTED_TOKEN_TYPE'],
      [new TokenConfigMissing('kbs'), 'TOKEN_CONFIG_MISSING'],
      [new RuntimeDataTooLarge('why'), 'RUNTIME_DATA_TOO_LARGE'],
      [new InvalidRegisterIndex('why'), 'INVALID_REGISTER_INDEX'],
      [new CocoAsTokenFailed('why'), 'COCO_AS_TOKEN_FAILED'],
      [new InitDataBindingFailed('why'), 'INITDATA_BINDING_FAILED'],
      [new EventlogError('why'), 'EVENTLOG_FAILED'],
      [new InvalidAaelEvent('why'), 'INVALID_AAEL_EVENT'],
      [new AaConfigError('why'), 'CONFIG_INVALID'],
      [new AaKbcParamsError('why'), 'KBC_PARAMS_INVALID'],
      [new AttestationAgentError('why'), 'AGENT_FAILED'],
    ];
    for (const [e, code] of cases) {
      expect(e).toBeInstanceOf(AttestationAgentError);
      expect(e.code).toBe(code);
    }
    expect(new InvalidAaelEvent('x')).toBeInstanceOf(EventlogError);
    expect(new AaKbcParamsError('x')).toBeInstanceOf(AaConfigError);
  });

  it('throws a coded error for a malformed aa_kbc_params', () => {
    expect(() => parseAaKbcParams('cc_kbc')).toThrow(
      expect.objectContaining({
        code: 'KBC_PARAMS_INVALID',
        message: 'illegal aa_kbc_params format: cc_kbc',
      }),
    );
  });

  it('throws a coded error for a socket address that is not unix://', () => {
    let caught: unknown;
    try {
      socketPathOf('tcp://127.0.0.1:50002');
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(AttestationAgentError);
    expect((caught as AttestationAgentError).code).toBe('SOCKET_ADDRESS_INVALID');
    expect((caught as AttestationAgentError).message).toBe(
      'socket address scheme is not expected: "tcp://127.0.0.1:50002"',
    );
  });
});
