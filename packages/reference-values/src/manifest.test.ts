import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ManifestError } from './errors.js';
import { imageTagMatches, MAX_MANIFEST_BYTES, parseMeasurementManifest, replaySha256 } from './manifest.js';

const d = (label: string) => createHash('sha256').update(label).digest('hex');
const h = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();

/** The mock TEE's sample manifest, the extend-list form this tool must read. */
const mockSample = readFileSync(new URL('../../mock-tee/manifests/podvm-sample.json', import.meta.url));
/** A manifest guest-image/seal.sh wrote for the boot test's image, whose boot gave these PCRs. */
const guestImageManifest = readFileSync(new URL('./testing/guest-image-manifest.json', import.meta.url));

describe('extend-list manifests', () => {
  it('reads the mock TEE sample and replays each PCR from zero', () => {
    const m = parseMeasurementManifest(mockSample);
    const doc = JSON.parse(mockSample.toString()) as { image_tag: string; pcrs: Record<string, string[]> };
    expect(m.form).toBe('extend-list');
    expect(m.imageTag).toBe(doc.image_tag);
    expect([...m.pcrs.keys()]).toEqual([3, 9, 11, 12]);
    for (const [pcr, digests] of Object.entries(doc.pcrs)) {
      let v = Buffer.alloc(32);
      for (const x of digests) v = h(v, Buffer.from(x, 'hex'));
      expect(m.pcrs.get(Number(pcr))).toBe(v.toString('hex'));
    }
  });

  it('gives the known value of one extend from zero', () => {
    const digest = Buffer.from(d('x'), 'hex');
    expect(replaySha256([digest]).toString('hex')).toBe(h(Buffer.alloc(32), digest).toString('hex'));
    expect(replaySha256([]).toString('hex')).toBe('0'.repeat(64));
  });

  it('accepts upper-case digests and replays their bytes', () => {
    const m = parseMeasurementManifest(
      JSON.stringify({ image_tag: 't', pcrs: { '3': [d('a').toUpperCase()] } }),
    );
    expect(m.pcrs.get(3)).toBe(h(Buffer.alloc(32), Buffer.from(d('a'), 'hex')).toString('hex'));
  });
});

describe("the measured guest image's manifest (guest-image/measure.ts)", () => {
  it('reads the extend lists of a real seal and checks its expected values', () => {
    const m = parseMeasurementManifest(guestImageManifest);
    const doc = JSON.parse(guestImageManifest.toString()) as { expected: Record<string, string> };
    expect(m.form).toBe('extend-list');
    expect([...m.pcrs.keys()]).toEqual([3, 4, 9, 11, 12]);
    for (const [key, value] of Object.entries(doc.expected))
      expect(m.pcrs.get(Number(key.slice(3)))).toBe(value);
  });

  it('refuses the same manifest with one event changed', () => {
    const doc = JSON.parse(guestImageManifest.toString()) as { pcrs: Record<string, string[]> };
    doc.pcrs['11'] = [...(doc.pcrs['11'] ?? []).slice(0, -1), d('tampered')];
    expect(() => parseMeasurementManifest(JSON.stringify(doc))).toThrow(/expected\.pcr11 is not the replay/);
  });
});

describe('final-value manifests (cloud-api-adaptor form)', () => {
  it('reads pcrNN values, strips 0x and lower-cases', () => {
    const m = parseMeasurementManifest(
      JSON.stringify({
        measurements: {
          sha256: { pcr03: d('3'), pcr9: `0x${d('9').toUpperCase()}`, pcr11: d('11'), pcr12: d('12') },
        },
      }),
    );
    expect(m.form).toBe('final-values');
    expect(m.imageTag).toBeUndefined();
    expect(Object.fromEntries(m.pcrs)).toEqual({ 3: d('3'), 9: d('9'), 11: d('11'), 12: d('12') });
  });

  it('keeps an image_tag given beside the measurements', () => {
    const m = parseMeasurementManifest(
      JSON.stringify({ image_tag: 'podvm:1.2', measurements: { sha256: {} } }),
    );
    expect(m.imageTag).toBe('podvm:1.2');
  });
});

describe('hostile manifests', () => {
  const bad: [string, unknown, RegExp][] = [
    ['not an object', [1], /not a JSON object/],
    ['neither form', { image_tag: 't' }, /neither/],
    ['both forms', { pcrs: {}, measurements: {} }, /both/],
    ['PCR 8 in a list', { pcrs: { '8': [d('a')] } }, /PCR 8 holds the initdata/],
    ['PCR 8 as a value', { measurements: { sha256: { pcr08: d('a') } } }, /PCR 8 holds the initdata/],
    ['a DRTM PCR', { pcrs: { '17': [d('a')] } }, /DRTM/],
    ['PCR 24', { pcrs: { '24': [d('a')] } }, /0 to 23/],
    ['a non-numeric key', { pcrs: { x: [] } }, /not a PCR number/],
    ['a bad final key', { measurements: { sha256: { pcrx: d('a') } } }, /not pcrNN/],
    ['the same PCR twice', { pcrs: { '3': [], '03': [] } }, /twice/],
    ['the same PCR twice (values)', { measurements: { sha256: { pcr3: d('a'), pcr03: d('a') } } }, /twice/],
    ['a short digest', { pcrs: { '3': ['abcd'] } }, /64 hex digits/],
    ['0x in an extend list', { pcrs: { '3': [`0x${d('a')}`] } }, /64 hex digits/],
    ['a non-string digest', { pcrs: { '3': [42] } }, /64 hex digits/],
    ['a list that is not an array', { pcrs: { '3': d('a') } }, /array/],
    ['too many digests', { pcrs: { '3': Array(65).fill(d('a')) } }, /more than 64/],
    ['no sha256 bank', { measurements: { sha384: {} } }, /no sha256 bank/],
    ['a bad bank', { measurements: { sha256: [] } }, /must be an object/],
    ['an empty tag', { image_tag: '', pcrs: {} }, /image_tag/],
    ['a numeric tag', { image_tag: 1, pcrs: {} }, /image_tag/],
    ['a long tag', { image_tag: 'x'.repeat(257), pcrs: {} }, /image_tag/],
    ['a bad description', { description: 1, pcrs: {} }, /description/],
    [
      'an expected value that is not the replay',
      { pcrs: { '3': [d('a')] }, expected: { pcr03: d('b') } },
      /replay/,
    ],
    ['an expected PCR not listed', { pcrs: { '3': [] }, expected: { pcr04: d('a') } }, /does not list/],
    ['a bad expected key', { pcrs: { '3': [] }, expected: { '3': d('a') } }, /not pcrNN/],
    ['expected that is not an object', { pcrs: {}, expected: [] }, /expected must be an object/],
    ['expected beside final values', { measurements: { sha256: {} }, expected: {} }, /extend-list form/],
  ];
  for (const [what, doc, msg] of bad) {
    it(`refuses ${what}`, () => {
      expect(() => parseMeasurementManifest(JSON.stringify(doc))).toThrow(msg);
      expect(() => parseMeasurementManifest(JSON.stringify(doc))).toThrow(ManifestError);
    });
  }

  it('refuses garbage, truncation, invalid UTF-8 and oversize input', () => {
    const good = JSON.stringify({ image_tag: 't', pcrs: { '3': [d('a')] } });
    for (let i = 0; i < good.length; i++) {
      expect(() => parseMeasurementManifest(good.slice(0, i))).toThrow(ManifestError);
    }
    expect(() => parseMeasurementManifest(Buffer.from([0xff, 0xfe, 0x7b]))).toThrow(/UTF-8/);
    expect(() => parseMeasurementManifest(' '.repeat(MAX_MANIFEST_BYTES + 1))).toThrow(/larger than/);
  });
});

describe('imageTagMatches', () => {
  it('matches the whole tag or the tag part of a reference', () => {
    expect(imageTagMatches('1.11.1', '1.11.1')).toBe(true);
    expect(imageTagMatches('podvm:1.11.1', '1.11.1')).toBe(true);
    expect(imageTagMatches('quay.io/x/podvm:1.11.1', 'quay.io/x/podvm:1.11.1')).toBe(true);
    expect(imageTagMatches('podvm:1.11.1', '1.11.2')).toBe(false);
    expect(imageTagMatches('podvm:1.11.1', 'podvm')).toBe(false);
    expect(imageTagMatches('registry:5000/podvm', '5000/podvm')).toBe(false);
    expect(imageTagMatches('podvm@sha256:abc', 'abc')).toBe(false);
    expect(imageTagMatches('latest', '1.11.1')).toBe(false);
  });
});
