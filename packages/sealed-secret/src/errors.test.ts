// Every sealed-secret error shares SealedSecretError and carries a `code`, so callers branch on it (or
// on the class), never on `name`.
import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { EnvelopeCryptoError } from './envelope.js';
import {
  KeyFetchFailed,
  KeyFileError,
  KeyJsonError,
  KmsError,
  SealedSecretError,
  SealedSecretParseFailed,
  SealFailed,
  SecretVersionError,
  SignatureVerificationFailed,
  SigningKeyError,
  UnsealEnvelopeFailed,
  UnsealVaultFailed,
} from './errors.js';
import { FolderMovedError, HeldDir } from './held-dir.js';
import { JsonShapeError } from './json.js';
import { InvalidK8sName } from './k8s.js';
import { PayloadShapeError } from './payload.js';

describe('sealed-secret errors', () => {
  it('share SealedSecretError and name what failed in code', () => {
    const cases: [SealedSecretError, string][] = [
      [new SealedSecretParseFailed('why'), 'PARSE_FAILED'],
      [new SigningKeyError('why'), 'BAD_SIGNING_KEY'],
      [new SignatureVerificationFailed(), 'SIGNATURE_INVALID'],
      [new KeyJsonError('why'), 'KEY_JSON_INVALID'],
      [new KeyFetchFailed('why'), 'KEY_FETCH_FAILED'],
      [new KeyFileError('why'), 'KEY_FILE_UNREADABLE'],
      [new SecretVersionError(), 'VERSION_UNSUPPORTED'],
      [new UnsealVaultFailed('why'), 'UNSEAL_VAULT_FAILED'],
      [new UnsealEnvelopeFailed('why'), 'UNSEAL_ENVELOPE_FAILED'],
      [new SealFailed('why'), 'SEAL_FAILED'],
      [KmsError.kbsClient('why'), 'KMS_FAILED'],
      [KmsError.unsupportedProvider('x', 'why'), 'KMS_FAILED'],
      [new EnvelopeCryptoError('why'), 'ENVELOPE_CRYPTO_FAILED'],
      [new JsonShapeError('why'), 'JSON_SHAPE_INVALID'],
      [new PayloadShapeError('why'), 'PAYLOAD_SHAPE_INVALID'],
      [new InvalidK8sName('why'), 'K8S_NAME_INVALID'],
      [new FolderMovedError('why'), 'FOLDER_MOVED'],
    ];
    for (const [e, code] of cases) {
      expect(e).toBeInstanceOf(SealedSecretError);
      expect(e.code).toBe(code);
    }
    expect(new SignatureVerificationFailed().message).toBe('Signature Error: signature error');
  });

  it('plain failures are SealedSecretErrors with a code, not bare Errors', async () => {
    const held = await HeldDir.open(realpathSync(tmpdir()));
    try {
      let caught: unknown;
      try {
        held.entry('../x');
      } catch (e) {
        caught = e;
      }
      expect(caught).toBeInstanceOf(SealedSecretError);
      expect((caught as SealedSecretError).code).toBe('FILE_NAME_INVALID');
      expect((caught as SealedSecretError).message).toBe('not a plain file name: "../x"');
    } finally {
      await held.close();
    }
  });
});
