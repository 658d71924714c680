import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import {
  formatKbsErrorDetail,
  KBS_ERROR_KINDS,
  KbsError,
  kbsErrorBody,
  kbsErrorStatus,
  parseKbsErrorBody,
} from './kbs-error.js';

describe('KbsError', () => {
  it("has trustee's 19 variants", () => {
    expect(KBS_ERROR_KINDS).toHaveLength(19);
    expect(new Set(KBS_ERROR_KINDS)).toEqual(
      new Set([
        'AdminAuthInitialization',
        'AdminAuthAccess',
        'AttestationError',
        'JweError',
        'TokenNotFound',
        'TokenVerifierError',
        'PolicyDeny',
        'ParsePolicyError',
        'PolicyEngineError',
        'RvpsError',
        'InvalidRequestPath',
        'PluginManagerInitialization',
        'PluginNotFound',
        'PluginInternalError',
        'SerdeError',
        'HTTPFailed',
        'HTTPSFailed',
        'StorageBackendInitialization',
        'PrometheusError',
      ]),
    );
  });

  it('is 404 only for InvalidRequestPath and PluginNotFound, 401 otherwise', () => {
    for (const kind of KBS_ERROR_KINDS) {
      const expected = kind === 'InvalidRequestPath' || kind === 'PluginNotFound' ? 404 : 401;
      expect(kbsErrorStatus(kind)).toBe(expected);
      expect(new KbsError(kind).status).toBe(expected);
    }
  });

  it("uses trustee's Display wording", () => {
    expect(new KbsError('PolicyDeny').detail).toBe('Access denied by policy');
    expect(new KbsError('TokenNotFound').detail).toBe('Attestation Token not found');
    expect(new KbsError('JweError').detail).toBe('JWE failed');
    expect(formatKbsErrorDetail('InvalidRequestPath', '/kbs/v0/x')).toBe('Request path /kbs/v0/x is invalid');
    expect(formatKbsErrorDetail('PluginNotFound', 'foo')).toBe('Plugin foo not found');
    expect(formatKbsErrorDetail('AttestationError', 'RCAR handshake Attest failed')).toBe(
      'Attestation error: RCAR handshake Attest failed',
    );
    expect(formatKbsErrorDetail('PolicyDeny', 'ignored')).toBe('Access denied by policy');
    expect(formatKbsErrorDetail('PluginNotFound')).toBe('Plugin not found');
  });

  it('serializes the body with type before detail', () => {
    const err = new KbsError('PluginNotFound', formatKbsErrorDetail('PluginNotFound', 'nope'));
    expect(JSON.stringify(kbsErrorBody(err))).toBe(
      '{"type":"https://github.com/confidential-containers/kbs/errors/PluginNotFound","detail":"Plugin nope not found"}',
    );
    expect(err).toBeInstanceOf(Error);
    expect(err.kind).toBe('PluginNotFound');
  });
});

describe('parseKbsErrorBody', () => {
  it('recognises trustee types', () => {
    const body = kbsErrorBody(new KbsError('TokenVerifierError'));
    expect(parseKbsErrorBody(body)).toEqual({ ...body, kind: 'TokenVerifierError' });
  });
  it('keeps foreign or unknown types with kind null', () => {
    expect(parseKbsErrorBody({ type: 'about:blank', detail: 'x' }).kind).toBeNull();
    expect(
      parseKbsErrorBody({
        type: 'https://github.com/confidential-containers/kbs/errors/toString',
        detail: '',
      }).kind,
    ).toBeNull();
  });
  it('truncates a huge detail', () => {
    const parsed = parseKbsErrorBody({ type: 't', detail: 'd'.repeat(100_000) });
    expect(parsed.detail.length).toBeLessThan(70_000);
  });
  it.each([null, 'x', [], { type: 1, detail: '' }, { type: 't' }, { type: 't'.repeat(2000), detail: '' }])(
    'rejects %j',
    (v) => {
      expect(() => parseKbsErrorBody(v)).toThrow(ProtocolError);
    },
  );
});
