import { describe, expect, it } from 'vitest';
import { referenceValueMessages } from './document.js';
import { RvpsError } from './errors.js';
import { extractReferenceValues, parseRvpsMessage } from './message.js';

/** name → value, as the registered messages would store them. */
function values(doc: unknown): Record<string, unknown> {
  const out: [string, unknown][] = [];
  for (const m of referenceValueMessages(doc)) {
    out.push(...extractReferenceValues(parseRvpsMessage(m as Record<string, unknown>)));
  }
  return Object.fromEntries(out);
}

const rvpsMessage = (v: Record<string, unknown>) => ({
  version: '0.1.0',
  type: 'sample',
  payload: Buffer.from(JSON.stringify(v)).toString('base64'),
});

describe('referenceValueMessages', () => {
  it('passes RVPS messages, and lists of them, through unchanged', () => {
    const m = rvpsMessage({ a: 1 });
    expect(referenceValueMessages(m)).toEqual([m]);
    expect(referenceValueMessages([m, m])).toEqual([m, m]);
  });

  it("reads trustee-operator's ConfigMap form (rvps-reference-values)", () => {
    expect(
      values({ svn: { expiration: '2026-01-01T00:00:00Z', value: 1 }, snp_pcr11: { value: ['ab'] } }),
    ).toEqual({
      svn: 1,
      snp_pcr11: ['ab'],
    });
    expect(referenceValueMessages({})).toEqual([]);
  });

  it('reads the list forms: older hash-value entries and full records, next to RVPS messages', () => {
    expect(
      values([
        { name: 'svn', expired: '2026-01-01T00:00:00Z', 'hash-value': [{ alg: 'sha256', value: '1' }] },
        { version: '0.1.0', name: 'x', expiration: '2026-01-01T00:00:00Z', value: { a: true } },
        rvpsMessage({ y: 2 }),
      ]),
    ).toEqual({ svn: ['1'], x: { a: true }, y: 2 });
  });

  describe('hostile documents', () => {
    it.each([
      ['a string', '"x"', /must be a JSON object or a list/],
      ['null', 'null', /must be a JSON object or a list/],
      ['an entry that is not an object', '{"svn": 1}', /"svn" must be an object with "value"/],
      ['an entry without a value', '{"svn": {"expiration": "2026-01-01T00:00:00Z"}}', /"svn" has no value/],
      ['a malformed expiration', '{"svn": {"expiration": "soon", "value": 1}}', /malformed expiration/],
      [
        'a list entry without a name',
        '[{"value": 1}]',
        /entry 0 is neither an RVPS message nor a reference value/,
      ],
      [
        'a name given twice',
        '[{"name":"a","value":1,"expiration":"2026-01-01T00:00:00Z"},{"name":"a","value":2,"expiration":"2026-01-01T00:00:00Z"}]',
        /"a" is given twice/,
      ],
    ])('%s is refused', (_what, text, re) => {
      expect(() => referenceValueMessages(JSON.parse(text))).toThrow(re);
      try {
        referenceValueMessages(JSON.parse(text));
      } catch (e) {
        expect(e).toBeInstanceOf(RvpsError);
      }
    });

    it('a name that the RVPS refuses is refused when registered', () => {
      expect(() => values({ '../x': { value: 1 } })).toThrow(/not allowed/);
    });

    it('a __proto__ name is an ordinary reference value', () => {
      expect(Object.keys(values(JSON.parse('{"__proto__": {"value": 1}}')))).toEqual(['__proto__']);
    });
  });
});
