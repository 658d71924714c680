import { describe, expect, it } from 'vitest';
import { decodeBase64StdStrict, decodeBase64UrlStrict, encodeBase64Url } from './base64.js';

describe('strict base64', () => {
  it('round-trips base64url without padding', () => {
    for (let n = 0; n < 20; n++) {
      const b = Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + 250) & 0xff));
      expect(decodeBase64UrlStrict(encodeBase64Url(b))?.equals(b)).toBe(true);
    }
  });
  it.each(['AB==', 'A', 'AB+/', 'AB\n', ' AB', 'AF', 'AAB'])('rejects %j as base64url', (s) => {
    expect(decodeBase64UrlStrict(s)).toBeNull();
  });
  it('accepts canonical standard base64 and rejects the rest', () => {
    expect(decodeBase64StdStrict('aGk=')?.toString()).toBe('hi');
    expect(decodeBase64StdStrict('')?.length).toBe(0);
    for (const bad of ['aGk', 'aGl=', 'aG-_', 'aGk==', '=aGk', 'aG k='])
      expect(decodeBase64StdStrict(bad)).toBeNull();
  });
});
