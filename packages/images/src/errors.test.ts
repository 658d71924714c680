// Every image build failure is an ImageBuildError with a `code`, so callers branch on it, never on `name`.
import { describe, expect, it } from 'vitest';
import { ImageBuildError } from './errors.js';
import { imageNamed } from './images.js';

describe('image build errors', () => {
  it('an unknown image is an ImageBuildError with a code', () => {
    let caught: unknown;
    try {
      imageNamed('nope');
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ImageBuildError);
    expect((caught as ImageBuildError).code).toBe('UNKNOWN_IMAGE');
    expect((caught as ImageBuildError).message).toMatch(/^unknown image nope: one of /);
  });
});
