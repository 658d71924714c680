import { describe, expect, it } from 'vitest';
import { CookieJar } from './cookies.js';

describe('CookieJar', () => {
  it('keeps the KBS session cookie until its Expires time', () => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const jar = new CookieJar(() => now);
    jar.store(['kbs-session-id=0123abcd; Expires=Tue, 01 Jan 2030 00:05:00 GMT']);
    expect(jar.header()).toBe('kbs-session-id=0123abcd');
    now += 4 * 60_000;
    expect(jar.get('kbs-session-id')).toBe('0123abcd');
    now += 60_000;
    expect(jar.header()).toBeUndefined();
    expect(jar.get('kbs-session-id')).toBeUndefined();
  });

  it('replaces a cookie of the same name and sends several together', () => {
    const jar = new CookieJar();
    jar.store('a=1');
    jar.store(['b=2; Path=/x; HttpOnly', 'a=3']);
    expect(jar.header()).toBe('a=3; b=2');
  });

  it('honours Max-Age over Expires and deletes on Max-Age=0 or a past Expires', () => {
    let now = 1_000_000;
    const jar = new CookieJar(() => now);
    jar.store('s=1; Max-Age=10; Expires=Thu, 01 Jan 2099 00:00:00 GMT');
    now += 11_000;
    expect(jar.header()).toBeUndefined();
    jar.store('s=2');
    jar.store('s=x; Max-Age=0');
    expect(jar.get('s')).toBeUndefined();
    jar.store('s=3');
    jar.store('s=x; Expires=Thu, 01 Jan 1970 00:00:01 GMT');
    expect(jar.get('s')).toBeUndefined();
  });

  it('strips quotes and ignores malformed or hostile cookies', () => {
    const jar = new CookieJar();
    jar.store([
      'q="v"',
      '=novalue',
      'noequals',
      'bad name=1',
      'x=a b',
      'y=a;b',
      `big=${'a'.repeat(5000)}`,
      'z=a\r\nInjected: 1',
    ]);
    expect(jar.header()).toBe('q=v; y=a');
  });

  it('holds at most 32 cookies', () => {
    const jar = new CookieJar();
    jar.store(Array.from({ length: 100 }, (_, i) => `c${i}=${i}`));
    expect(jar.header()?.split('; ')).toHaveLength(32);
    jar.store('c0=updated');
    expect(jar.get('c0')).toBe('updated');
    jar.clear();
    expect(jar.header()).toBeUndefined();
  });
});
