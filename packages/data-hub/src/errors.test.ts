// Every data hub error shares DataHubError and carries a `code`, so callers branch on it (or on the
// class), never on `name`.
import { InvalidToken } from '@broker/kbs-client';
import { describe, expect, it } from 'vitest';
import { CdhConfigError } from './config.js';
import {
  AaTokenProviderError,
  DataHubError,
  GetResourceFailed,
  HubInitializationFailed,
  IllegalResourceUri,
  KbcUnavailable,
  OfflineResourceNotFound,
} from './errors.js';
import { DecryptionKeyError } from './image/decryption-keys.js';
import { ImageClientFailed, ImagePullFailed } from './image/errors.js';
import { annotationOf } from './image/keyprovider.js';
import { RegistryConfigError } from './image/registries.js';
import { ResourceError } from './image/resources.js';
import { describeKbsFailure, KbcError } from './kbc.js';
import { UnsealSecretFailed } from './sealed/errors.js';
import { SecureMountFailed } from './storage/block-device.js';
import { EncryptedDiskFailed } from './storage/encrypted-disk.js';

describe('data hub errors', () => {
  it('share DataHubError and name what failed in code', () => {
    const cases: [DataHubError, string][] = [
      [new GetResourceFailed('why'), 'GET_RESOURCE_FAILED'],
      [new IllegalResourceUri('kbs:///x', 'why'), 'ILLEGAL_RESOURCE_URI'],
      [new AaTokenProviderError('why'), 'AA_TOKEN_FAILED'],
      [new HubInitializationFailed('why'), 'INIT_FAILED'],
      [new KbcUnavailable('why'), 'KBC_UNAVAILABLE'],
      [new OfflineResourceNotFound('/x'), 'OFFLINE_RESOURCE_NOT_FOUND'],
      [new KbcError('why'), 'KBC_FAILED'],
      [new ImagePullFailed('why'), 'IMAGE_PULL_FAILED'],
      [new ImageClientFailed('why'), 'IMAGE_CLIENT_FAILED'],
      [new UnsealSecretFailed('why'), 'UNSEAL_FAILED'],
      [new CdhConfigError('why'), 'CONFIG_INVALID'],
      [new DecryptionKeyError('why'), 'DECRYPTION_KEY_INVALID'],
      [new RegistryConfigError('why'), 'REGISTRY_CONFIG_INVALID'],
      [new ResourceError('why'), 'RESOURCE_UNAVAILABLE'],
      [new SecureMountFailed('mkfs', 'why'), 'mkfs'],
      [new EncryptedDiskFailed('record', 'why'), 'record'],
      [new DataHubError('why', { code: 'AA_CLIENT_FAILED' }), 'AA_CLIENT_FAILED'],
      [new DataHubError('why'), 'DATA_HUB_FAILED'],
    ];
    for (const [e, code] of cases) {
      expect(e).toBeInstanceOf(DataHubError);
      expect(e).toBeInstanceOf(Error);
      expect(e.code).toBe(code);
    }
  });

  it('words token failures by class, whatever the name says', () => {
    expect(describeKbsFailure(new AaTokenProviderError('no socket'))).toBe(
      'get token failed: Attestation Agent token provider error: no socket',
    );
    expect(describeKbsFailure(new InvalidToken('token is empty'))).toBe('get token failed: token is empty');
    // A foreign error that merely takes a token error's name is not one.
    const impostor = new Error('plain');
    impostor.name = 'AaTokenProviderError';
    expect(describeKbsFailure(impostor)).toBe('plain');
    const impostor2 = new DataHubError('plain too');
    Object.defineProperty(impostor2, 'name', { value: 'InvalidToken' });
    expect(describeKbsFailure(impostor2)).toBe('plain too');
  });

  it('plain failures are DataHubErrors with a code, not bare Errors', () => {
    let caught: unknown;
    try {
      annotationOf(new TextEncoder().encode('[]'));
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(DataHubError);
    expect((caught as DataHubError).code).toBe('UNWRAP_REQUEST_INVALID');
    expect((caught as DataHubError).message).toBe('not a JSON object');
  });
});
