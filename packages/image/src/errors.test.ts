// Every image library error shares ImageError and carries a `code`, so callers branch on it (or on the
// class), never on `name`; RegistryError keeps the registry's own code.
import { describe, expect, it } from 'vitest';
import { parseDigest } from './digest.js';
import { ImageError } from './errors.js';
import { parsePlatform } from './manifest.js';
import { ImagePullError } from './pull.js';
import { parseImageReference } from './reference.js';
import { DigestMismatchError, RegistryError } from './registry/client.js';
import { HttpError } from './registry/http.js';
import { UnpackError } from './unpack.js';

describe('image errors', () => {
  it('share ImageError and name what failed in code', () => {
    expect(() => parseImageReference('UPPER/Case')).toThrow(
      expect.objectContaining({ code: 'REFERENCE_INVALID' }),
    );
    expect(() => parseDigest('sha256:xyz')).toThrow(expect.objectContaining({ code: 'DIGEST_INVALID' }));
    const cases: [ImageError, string][] = [
      [new DigestMismatchError('why'), 'DIGEST_MISMATCH'],
      [new HttpError('why'), 'HTTP_FAILED'],
      [new UnpackError('why'), 'UNPACK_FAILED'],
      [new ImageError('why'), 'IMAGE_FAILED'],
    ];
    for (const [e, code] of cases) {
      expect(e).toBeInstanceOf(ImageError);
      expect(e.code).toBe(code);
    }
    expect(ImagePullError.prototype).toBeInstanceOf(ImageError);
    expect(new RegistryError('why', 404, 'MANIFEST_UNKNOWN').code).toBe('MANIFEST_UNKNOWN');
  });

  it('RegistryError is an ImageError and keeps the registry code', () => {
    const e = new RegistryError('why', 404, 'MANIFEST_UNKNOWN');
    expect(e).toBeInstanceOf(ImageError);
    expect(e.code).toBe('MANIFEST_UNKNOWN');
    expect(new RegistryError('why', 500).code).toBeUndefined();
  });

  it('plain failures are ImageErrors with a code, not bare Errors', () => {
    let caught: unknown;
    try {
      parsePlatform('linux');
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ImageError);
    expect((caught as ImageError).code).toBe('PLATFORM_INVALID');
    expect((caught as ImageError).message).toBe('invalid platform "linux": expected os/arch[/variant]');
  });
});
