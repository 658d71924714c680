// Key rules for backends that map keys onto a filesystem. A key is one or more `/`-separated segments;
// each follows the KBS resource-segment rule, so `..`, `.`, empty segments, hidden names and absolute
// paths cannot be expressed and a key can never leave its namespace directory.

import { KvStorageError } from './errors.js';

/** Longest key accepted, in characters. */
export const MAX_KEY_LENGTH = 1024;
/** Longest segment accepted (common filesystem NAME_MAX). */
export const MAX_SEGMENT_LENGTH = 255;

const SEGMENT_RE = /^[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;

export class InvalidStorageKey extends KvStorageError {
  override readonly name: string = 'InvalidStorageKey';
  readonly key: string;
  constructor(key: string, reason: string) {
    const shown = key.length > 80 ? `${key.slice(0, 80)}…` : key;
    super('INVALID_KEY', `invalid storage key ${JSON.stringify(shown)}: ${reason}`);
    this.key = key;
  }
}

export function isValidSegment(s: string): boolean {
  return s.length <= MAX_SEGMENT_LENGTH && SEGMENT_RE.test(s);
}

/** The key's segments, or InvalidStorageKey. */
export function keySegments(key: string): string[] {
  if (key.length === 0) throw new InvalidStorageKey(key, 'empty');
  if (key.length > MAX_KEY_LENGTH)
    throw new InvalidStorageKey(key, `longer than ${MAX_KEY_LENGTH} characters`);
  const segments = key.split('/');
  for (const s of segments) {
    if (s.length === 0) throw new InvalidStorageKey(key, 'empty segment');
    if (!isValidSegment(s)) {
      throw new InvalidStorageKey(
        key,
        `segment ${JSON.stringify(s)} must match [A-Za-z0-9_-][A-Za-z0-9_.-]*`,
      );
    }
  }
  return segments;
}
