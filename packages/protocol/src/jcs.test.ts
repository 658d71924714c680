import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { canonicalJson, JCS_MAX_DEPTH } from './jcs.js';

function f64(hex: string): number {
  return Buffer.from(hex, 'hex').readDoubleBE(0);
}

describe('canonicalJson (RFC 8785)', () => {
  it('matches the trustee attestation-service vector', () => {
    const jcs = canonicalJson({ b: 1, a: 'test', c: { d: 'e' } });
    expect(jcs).toBe('{"a":"test","b":1,"c":{"d":"e"}}');
    expect(createHash('sha384').update(jcs).digest('hex')).toBe(
      'e71ce8e70d814ba6639c3612ebee0ff1f76f650f8dbb5e47157e0f3f525cd22c4597480a186427c813ca941da78870c3',
    );
  });

  it('reproduces the RFC 8785 §3.2.2 example', () => {
    const input = JSON.parse(
      '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],' +
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",' +
        ' "literals": [null, true, false]}',
    );
    expect(canonicalJson(input)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it('sorts keys by UTF-16 code units (RFC 8785 §3.2.3)', () => {
    const input = {
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    };
    // Read the order from the text: JS objects would put the integer-like key "1" first.
    const order = [...canonicalJson(input).matchAll(/:"([^"]*)"/g)].map((m) => m[1]);
    expect(order).toEqual([
      'Carriage Return',
      'One',
      'Control',
      'Latin Small Letter O With Diaeresis',
      'Euro Sign',
      'Emoji: Grinning Face',
      'Hebrew Letter Dalet With Dagesh',
    ]);
  });

  it.each([
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ])('serializes IEEE 754 %s as %s (RFC 8785 appendix B)', (hex, text) => {
    expect(canonicalJson(f64(hex))).toBe(text);
  });

  it('escapes control characters with the short forms and lowercase \\u00xx', () => {
    expect(canonicalJson('\b\t\n\f\r\u0000\u001f\u007f/')).toBe('"\\b\\t\\n\\f\\r\\u0000\\u001f\u007f/"');
  });

  it('keeps array order and skips undefined members', () => {
    expect(canonicalJson([3, 1, { z: undefined, y: [] }])).toBe('[3,1,{"y":[]}]');
  });

  it.each([
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['a lone surrogate', '\ud800'],
    ['a lone surrogate key', { '\udc00': 1 }],
    ['a bigint', 1n],
    ['a function', () => 1],
    ['a Date', new Date(0)],
    ['a Map', new Map()],
    ['undefined', undefined],
  ])('rejects %s', (_name, value) => {
    expect(() => canonicalJson(value)).toThrow(ProtocolError);
  });

  it('rejects nesting deeper than the limit without overflowing the stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < JCS_MAX_DEPTH + 1; i++) deep = [deep];
    expect(() => canonicalJson(deep)).toThrow(/nested deeper/);
    let ok: unknown = 1;
    for (let i = 0; i < JCS_MAX_DEPTH; i++) ok = [ok];
    expect(canonicalJson(ok)).toBe(`${'['.repeat(JCS_MAX_DEPTH)}1${']'.repeat(JCS_MAX_DEPTH)}`);
  });
});
