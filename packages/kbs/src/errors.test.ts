// Every error of the KBS shares KbsServiceError and carries a `code`, so callers branch on it (or on
// the class), never on `name`; the message stays the one the error was given.
import { describe, expect, it } from 'vitest';
import { ConsoleSessionError } from './console/sessions.js';
import { KbsConfigError, KbsServiceError, type KbsServiceErrorCode } from './errors.js';
import { KbsStartupError } from './kbs.js';
import { PluginRequestError } from './plugins/builtin.js';
import { PluginCallError } from './plugins/grpc-backend.js';
import { NebulaCertError } from './plugins/nebula-cert.js';
import { PolicyEngineError } from './policy/resource-policy.js';
import { challengeExtraParams } from './rcar.js';
import { MountedFileError } from './reload/errors.js';
import { ResourcePluginError } from './repository.js';
import { HttpStartupError } from './server.js';
import { TeeKeyError } from './token.js';
import { BadVerdictQuery } from './verdicts/endpoint.js';

describe('KBS errors', () => {
  const cases: [KbsServiceError, KbsServiceErrorCode, string][] = [
    [new KbsStartupError('why'), 'STARTUP_FAILED', 'KbsStartupError'],
    [new HttpStartupError('why'), 'HTTP_STARTUP_FAILED', 'HttpStartupError'],
    [new BadVerdictQuery('why'), 'BAD_VERDICT_QUERY', 'BadVerdictQuery'],
    [new PolicyEngineError('why'), 'POLICY_ENGINE_FAILED', 'PolicyEngineError'],
    [new ResourcePluginError('why'), 'RESOURCE_PLUGIN_FAILED', 'ResourcePluginError'],
    [new TeeKeyError('why'), 'TEE_KEY_INVALID', 'TeeKeyError'],
    [new PluginRequestError('why'), 'PLUGIN_REQUEST_REFUSED', 'PluginRequestError'],
    [new PluginCallError('why', true), 'PLUGIN_CALL_FAILED', 'PluginCallError'],
    [new NebulaCertError('why'), 'NEBULA_CERT_FAILED', 'NebulaCertError'],
    [new MountedFileError('why'), 'MOUNTED_FILE_INVALID', 'MountedFileError'],
    [new ConsoleSessionError('why'), 'TOO_MANY_SESSIONS', 'ConsoleSessionError'],
    [new KbsConfigError('why'), 'CONFIG_INVALID', 'KbsConfigError'],
  ];

  it.each(cases)('%s: shares KbsServiceError and names what failed in code', (e, code, name) => {
    expect(e).toBeInstanceOf(KbsServiceError);
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe(code);
    expect(e.name).toBe(name);
    expect(e.message).toBe('why');
  });

  it('gives every code its own class', () => {
    expect(new Set(cases.map(([, code]) => code)).size).toBe(cases.length);
  });

  it('keeps the cause and the subclass fields', () => {
    const cause = new Error('underlying');
    expect(new KbsStartupError('why', { cause }).cause).toBe(cause);
    expect(new PluginCallError('why', false).grpc).toBe(false);
  });

  it('raises its own failures as KbsServiceError, never a bare Error', () => {
    let caught: unknown;
    try {
      challengeExtraParams('se', { 'supported-hash-algorithms': ['sha256'] });
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(KbsServiceError);
    expect((caught as KbsServiceError).code).toBe('REQUEST_INVALID');
    expect((caught as Error).message).toBe('SE TEE does not support sha512');
  });
});
