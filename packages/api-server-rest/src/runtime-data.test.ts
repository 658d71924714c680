import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeBase64UrlNoPad, decodeRuntimeData, RuntimeDataError } from './runtime-data.js';

const utf8 = (s: string) => new TextEncoder().encode(s);

describe('decodeBase64UrlNoPad', () => {
  it('decodes upstream README and test vectors', () => {
    expect(decodeBase64UrlNoPad('eHh4eA')).toEqual(utf8('xxxx'));
    expect(decodeBase64UrlNoPad('cmVwb3J0')).toEqual(utf8('report'));
    expect(decodeBase64UrlNoPad('aGVsbG8')).toEqual(utf8('hello'));
    expect(decodeBase64UrlNoPad('')).toEqual(new Uint8Array(0));
  });

  it('round-trips every length against the canonical encoder, with - and _ in use', () => {
    for (let len = 0; len < 70; len++) {
      const bytes = new Uint8Array(randomBytes(len));
      const text = Buffer.from(bytes).toString('base64url');
      expect(decodeBase64UrlNoPad(text)).toEqual(bytes);
    }
    expect(decodeBase64UrlNoPad('-_-_')).toEqual(new Uint8Array([0xfb, 0xff, 0xbf]));
  });

  it.each([
    ['padding', 'eHh4eA=='],
    ['a single pad', 'aGVsbG8='],
    ['standard alphabet +', 'ab+c'],
    ['standard alphabet /', 'ab/c'],
    ['whitespace', 'eHh4 eA'],
    ['a trailing newline', 'eHh4eA\n'],
    ['an impossible length', 'abcde'],
    ['one symbol', 'a'],
    ['punctuation', '!!!'],
    ['non-ASCII', 'eHh4é'],
    ['stray bits after 1 byte', 'eB'],
    ['stray bits after 2 bytes', 'eHi'],
  ])('rejects %s', (_why, text) => {
    expect(() => decodeBase64UrlNoPad(text)).toThrow(RuntimeDataError);
  });
});

describe('decodeRuntimeData', () => {
  it('uses the UTF-8 bytes of the value without an encoding', () => {
    expect(decodeRuntimeData('hello', undefined)).toEqual(utf8('hello'));
    expect(decodeRuntimeData('eHh4eA==', undefined)).toEqual(utf8('eHh4eA=='));
    expect(decodeRuntimeData('é', undefined)).toEqual(new Uint8Array([0xc3, 0xa9]));
  });

  it('decodes encoding=base64 as URL-safe unpadded base64', () => {
    expect(decodeRuntimeData('cmVwb3J0', 'base64')).toEqual(utf8('report'));
  });

  it.each(['hex', 'Base64', 'base64url', ''])('rejects encoding=%j', (encoding) => {
    expect(() => decodeRuntimeData('data', encoding)).toThrow(/unsupported runtime_data encoding/);
  });

  it('bounds the echoed encoding name', () => {
    try {
      decodeRuntimeData('x', 'e'.repeat(10_000));
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message.length).toBeLessThan(200);
    }
  });
});
