import { describe, expect, it } from 'vitest';
import { ConfigError, Section } from './config-reader.js';

class OwnError extends Error {}
const dotted = { naming: 'dotted', error: (m: string) => new OwnError(m) } as const;

describe('Section', () => {
  it('names keys trustee-style by default and throws ConfigError', () => {
    const s = Section.of({ port: 'x', sub: { a: 1 } }, '[http_server]');
    expect(() => s.optInt('port', 1, 2)).toThrow(
      new ConfigError('[http_server] port: expected an integer, found string "x"'),
    );
    expect(() => s.optSection('sub')?.string('b')).toThrow('[http_server.sub] b is required');
    expect(() => Section.of(3, '[admin]')).toThrow('[admin] must be a table, found number 3');
  });

  it('names keys with dots and throws the caller’s error when asked', () => {
    const root = Section.of({ a: { b: [1] }, c: null, d: 'true', e: '17' }, '', undefined, {
      ...dotted,
      nullIsAbsent: true,
    });
    const a = root.optSection('a') as Section;
    expect(() => a.stringArray('b')).toThrow(OwnError);
    expect(() => a.stringArray('b')).toThrow('a.b[0]: expected a string, found number 1');
    expect(root.optString('c')).toBeUndefined();
    expect(root.looseBool('d', false)).toBe(true);
    expect(root.looseUint('e', 0, 100)).toBe(17);
    expect(() => root.requiredField('z')).toThrow(': missing field `z`');
    expect(root.unknownKeys()).toEqual([]);
    expect(() => Section.of([], '', undefined, dotted)).toThrow(
      'the configuration: expected a table, found an array',
    );
  });

  it('lists unread keys, and shows a hostile value bounded', () => {
    const s = Section.of({ known: 1, typo: 2, long: 'x'.repeat(10_000) }, 'token_configs', undefined, dotted);
    s.raw('known');
    expect(() => s.bool('long', false)).toThrow(
      /^token_configs\.long: expected true or false, found string "x{63}…$/,
    );
    expect(s.unknownKeys()).toEqual(['token_configs.typo']);
    const warnings: string[] = [];
    const t = Section.of({ typo: 1 }, '[attestation_token]', warnings);
    t.finish();
    expect(warnings).toEqual(['unknown key "typo" in [attestation_token] is ignored']);
  });
});
