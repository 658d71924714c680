import { describe, expect, it } from 'vitest';
import { rustDebugString } from './rust-debug.js';

describe("rustDebugString: Rust's {:?} of a str", () => {
  it('quotes and escapes as Rust does', () => {
    expect(rustDebugString('ExecProcessRequest is blocked by policy: ')).toBe(
      '"ExecProcessRequest is blocked by policy: "',
    );
    expect(rustDebugString('a "b" \\ c')).toBe('"a \\"b\\" \\\\ c"');
    expect(rustDebugString('l1\nl2\r\t\0')).toBe('"l1\\nl2\\r\\t\\0"');
    // Single quotes and ordinary Unicode stay as they are.
    expect(rustDebugString("it's é ✓ 日本")).toBe('"it\'s é ✓ 日本"');
  });

  it('writes unprintable characters as \\u{…}', () => {
    expect(rustDebugString('\u0001\u007f\u0085')).toBe('"\\u{1}\\u{7f}\\u{85}"');
    expect(rustDebugString('a\u200bb\ufeff')).toBe('"a\\u{200b}b\\u{feff}"'); // format characters
    expect(rustDebugString('x\u00a0y\u2028')).toBe('"x\\u{a0}y\\u{2028}"'); // non-space separators
    expect(rustDebugString('e\u0301')).toBe('"e\\u{301}"'); // grapheme extender
    expect(rustDebugString('\u{e000}\u{10ffff}')).toBe('"\\u{e000}\\u{10ffff}"'); // private use, unassigned
    expect(rustDebugString('😀 ok')).toBe('"😀 ok"');
  });
});
