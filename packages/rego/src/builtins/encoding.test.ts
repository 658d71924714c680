import { describe, expect, it } from 'vitest';
import { call, failure, set, show } from './testkit.js';

describe('base64 and base64url', () => {
  it('encodes UTF-8 bytes', () => {
    expect(call('base64.encode', 'subjects?_d')).toBe('c3ViamVjdHM/X2Q=');
    expect(call('base64.encode', 'é')).toBe('w6k=');
    expect(call('base64url.encode', 'hello?>')).toBe('aGVsbG8_Pg==');
    expect(call('base64url.encode_no_pad', 'hello?>')).toBe('aGVsbG8_Pg');
    expect(call('base64url.encode', '')).toBe('');
  });

  it('decodes strictly, as Go, with Go error offsets', () => {
    expect(call('base64.decode', 'aGVsbG8=')).toBe('hello');
    expect(call('base64.decode', 'aGVs\nbG8=')).toBe('hello');
    expect(failure('base64.decode', 'aGVsbG8').message).toBe(
      'base64.decode: illegal base64 data at input byte 4',
    );
    expect(failure('base64.decode', 'a').message).toBe('base64.decode: illegal base64 data at input byte 0');
    expect(failure('base64.decode', '!!!!').message).toBe(
      'base64.decode: illegal base64 data at input byte 0',
    );
    expect(failure('base64.decode', 'aGVsbG8=x').message).toBe(
      'base64.decode: illegal base64 data at input byte 8',
    );
    expect(failure('base64.decode', 'aGVsbG8_').code).toBe('eval_builtin_error');
    expect(call('base64.is_valid', 'aGVsbG8=')).toBe(true);
    expect(call('base64.is_valid', 'aGVsbG8')).toBe(false);
    expect(call('base64.is_valid', 1)).toBe(false);
  });

  it('base64url.decode accepts missing padding', () => {
    expect(call('base64url.decode', 'aGVsbG8_Pg')).toBe('hello?>');
    expect(call('base64url.decode', 'aGVsbG8_Pg==')).toBe('hello?>');
    expect(failure('base64url.decode', 'a').message).toBe('base64url.decode: illegal base64url string: a');
  });

  it('turns invalid UTF-8 into replacement characters', () => {
    expect(call('base64.decode', '/w==')).toBe('\ufffd');
  });
});

describe('hex', () => {
  it('encodes and decodes with Go errors', () => {
    expect(call('hex.encode', 'hello')).toBe('68656c6c6f');
    expect(call('hex.decode', '68656C6c6f')).toBe('hello');
    expect(failure('hex.decode', '6g').message).toBe("hex.decode: encoding/hex: invalid byte: U+0067 'g'");
    expect(failure('hex.decode', 'abc').message).toBe('hex.decode: encoding/hex: odd length hex string');
    expect(failure('hex.decode', 'ag1').message).toBe("hex.decode: encoding/hex: invalid byte: U+0067 'g'");
  });
});

describe('json', () => {
  it('marshals as Go: sorted keys, compact, HTML-safe, exact numbers', () => {
    expect(call('json.marshal', { b: [1, 2], a: '<x>&' })).toBe('{"a":"\\u003cx\\u003e\\u0026","b":[1,2]}');
    expect(call('json.marshal', set(3, 1))).toBe('[1,3]');
    expect(call('json.marshal', 12345678901234567890n)).toBe('12345678901234567890');
    expect(call('json.marshal', '\u2028')).toBe('"\\u2028"');
    expect(call('json.marshal', 'a\nb')).toBe('"a\\nb"');
  });

  it('marshals with options like json.MarshalIndent', () => {
    expect(call('json.marshal_with_options', { a: [1] }, { pretty: true })).toBe(
      '{\n\t"a": [\n\t\t1\n\t]\n}',
    );
    expect(call('json.marshal_with_options', { a: [1] }, { indent: '  ', prefix: '-' })).toBe(
      '-{\n-  "a": [\n-    1\n-  ]\n-}',
    );
    expect(call('json.marshal_with_options', { a: [] }, { pretty: true, indent: ' ' })).toBe(
      '{\n "a": []\n}',
    );
    expect(call('json.marshal_with_options', { a: 1 }, { indent: ' ', pretty: false })).toBe('{"a":1}');
    expect(failure('json.marshal_with_options', {}, { bogus: 1 }).message).toBe(
      'json.marshal_with_options: operand 2 object contained unknown key bogus',
    );
  });

  it('unmarshals exactly, with Go syntax errors', () => {
    expect(show(call('json.unmarshal', '{"a": [1, 2.5, "x", null, true]}'))).toBe(
      '{"a": [1, 2.5, "x", null, true]}',
    );
    expect(call('json.unmarshal', '12345678901234567890')).toBe(12345678901234567890n);
    expect(call('json.unmarshal', '1e3')).toBe(1000);
    expect(call('json.unmarshal', '"\\u00e9\\ud83d\\ude00"')).toBe('é😀');
    const bad: [string, string][] = [
      ['x', "invalid character 'x' looking for beginning of value"],
      ['{"a":1,}', "invalid character '}' looking for beginning of object key string"],
      ['[1,]', "invalid character ']' looking for beginning of value"],
      ['', 'unexpected end of JSON input'],
      ['{"a" 1}', "invalid character '1' after object key"],
      ['[1 2]', "invalid character '2' after array element"],
      ['1 2', "invalid character '2' after top-level value"],
      ['01', "invalid character '1' after top-level value"],
      ['"\u0001"', "invalid character '\\x01' in string literal"],
      ['"\\q"', "invalid character 'q' in string escape code"],
      ['1.', 'unexpected end of JSON input'],
      ['1.x', "invalid character 'x' after decimal point in numeric literal"],
      ['tru', 'unexpected end of JSON input'],
    ];
    for (const [text, message] of bad)
      expect(failure('json.unmarshal', text).message).toBe(`json.unmarshal: ${message}`);
  });

  it('bounds nesting depth', () => {
    expect(failure('json.unmarshal', `${'['.repeat(5000)}${']'.repeat(5000)}`).message).toBe(
      'json.unmarshal: exceeded max depth',
    );
  });

  it('is_valid', () => {
    expect(call('json.is_valid', '{"a":1}')).toBe(true);
    expect(call('json.is_valid', '{a:1}')).toBe(false);
    expect(call('json.is_valid', 1)).toBe(false);
  });
});

describe('yaml', () => {
  it('unmarshals YAML 1.1 scalars and keeps big integers exact', () => {
    expect(show(call('yaml.unmarshal', 'a: 1\nb: [x, z]\nc: yes\nd: ~\ne: off\n'))).toBe(
      '{"a": 1, "b": ["x", "z"], "c": true, "d": null, "e": false}',
    );
    // YAML 1.1, as Go's yaml.v2: y and n are booleans too.
    expect(show(call('yaml.unmarshal', '[y, n, "y"]'))).toBe('[true, false, "y"]');
    expect(show(call('yaml.unmarshal', 'num: 123456789012345678901'))).toBe('{"num": 123456789012345678901}');
    expect(show(call('yaml.unmarshal', 't: 2001-12-14'))).toBe('{"t": "2001-12-14"}');
    expect(call('yaml.unmarshal', '')).toBeNull();
  });

  it('marshals with sorted keys and unindented sequences', () => {
    expect(call('yaml.marshal', { b: 'x', a: [1, 2] })).toBe('a:\n- 1\n- 2\nb: x\n');
    expect(call('yaml.marshal', { a: 'yes' })).toBe('a: "yes"\n');
  });

  it('reports invalid documents', () => {
    expect(failure('yaml.unmarshal', 'a: [1, 2').code).toBe('eval_builtin_error');
    expect(call('yaml.is_valid', 'a: [1, 2')).toBe(false);
    expect(call('yaml.is_valid', 'a: 1')).toBe(true);
  });

  it('bounds alias expansion', () => {
    const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (let i = 0; i < 8; i++) {
      const prev = String.fromCharCode(97 + i);
      const next = String.fromCharCode(98 + i);
      bomb.push(`${next}: &${next} [${Array(9).fill(`*${prev}`).join(',')}]`);
    }
    expect(call('yaml.is_valid', bomb.join('\n'))).toBe(false);
  });
});

describe('urlquery', () => {
  it('escapes and unescapes as Go', () => {
    expect(call('urlquery.encode', 'a b&c=d/é~')).toBe('a+b%26c%3Dd%2F%C3%A9~');
    expect(call('urlquery.decode', 'a+b%26c%3Dd%2F%C3%A9')).toBe('a b&c=d/é');
    expect(failure('urlquery.decode', '%zz').message).toBe('urlquery.decode: invalid URL escape "%zz"');
    expect(failure('urlquery.decode', 'a%2').message).toBe('urlquery.decode: invalid URL escape "%2"');
  });

  it('encodes and decodes objects', () => {
    expect(call('urlquery.encode_object', { b: ['2', '3'], a: '1', c: set('y', 'x') })).toBe(
      'a=1&b=2&b=3&c=x&c=y',
    );
    expect(failure('urlquery.encode_object', { a: 1 }).message).toBe(
      'urlquery.encode_object: operand 1 values must be string, array[string], or set[string]',
    );
    expect(show(call('urlquery.decode_object', 'a=1&b=2&b=3&c'))).toBe(
      '{"a": ["1"], "b": ["2", "3"], "c": [""]}',
    );
    expect(failure('urlquery.decode_object', 'a=1;b=2').message).toBe(
      'urlquery.decode_object: invalid semicolon separator in query',
    );
  });
});
