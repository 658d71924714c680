import { describe, expect, it } from 'vitest';
import { call, failure } from './testkit.js';

const fox = 'The quick brown fox jumps over the lazy dog';

describe('crypto hashes', () => {
  it('hash UTF-8 bytes to hex', () => {
    expect(call('crypto.md5', 'hello')).toBe('5d41402abc4b2a76b9719d911017c592');
    expect(call('crypto.sha1', 'hello')).toBe('aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d');
    expect(call('crypto.sha256', 'hello')).toBe(
      '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824',
    );
    expect(failure('crypto.sha256', 1).message).toBe(
      'crypto.sha256: operand 1 must be string but got number',
    );
  });

  it('compute HMACs', () => {
    expect(call('crypto.hmac.md5', fox, 'key')).toBe('80070713463e7749b90c2dc24911e275');
    expect(call('crypto.hmac.sha1', fox, 'key')).toBe('de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9');
    expect(call('crypto.hmac.sha256', fox, 'key')).toBe(
      'f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8',
    );
    expect(call('crypto.hmac.sha512', fox, 'key')).toBe(
      'b42af09057bac1e2d41708e48a902e09b5ff7f12ab428a4fe86653c73dd248fb82f948a549f7b791a5b41915ee4d1ec3935357e4e2317250d0372afa2ebeeb3a',
    );
  });

  it('compares MACs', () => {
    expect(call('crypto.hmac.equal', 'abc', 'abc')).toBe(true);
    expect(call('crypto.hmac.equal', 'abc', 'abd')).toBe(false);
    expect(call('crypto.hmac.equal', 'abc', 'abcd')).toBe(false);
  });
});
