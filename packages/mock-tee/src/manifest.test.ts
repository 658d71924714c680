import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MockTeeError } from './errors.js';
import {
  expectedPcrValues,
  formatMeasurementManifest,
  loadMeasurementManifest,
  MAX_DIGESTS_PER_PCR,
  MAX_MANIFEST_BYTES,
  parseMeasurementManifest,
} from './manifest.js';
import { SAMPLE_MANIFEST_DOCUMENT, sampleManifest } from './sample-manifest.js';

const SAMPLE_PATH = join(import.meta.dirname, '../manifests/podvm-sample.json');
const d = (s: string) => createHash('sha256').update(s).digest('hex');

describe('measurement manifest', () => {
  it('the built-in sample is the sample file', async () => {
    const text = await readFile(SAMPLE_PATH, 'utf8');
    expect(JSON.parse(text)).toEqual(SAMPLE_MANIFEST_DOCUMENT);
    expect(await loadMeasurementManifest(SAMPLE_PATH)).toEqual(sampleManifest());
    expect(JSON.parse(formatMeasurementManifest(sampleManifest()))).toEqual(JSON.parse(text));
  });

  it('expected values replay each PCR from zero: PCR = sha256(PCR ‖ digest) per digest', () => {
    const a = d('a');
    const b = d('b');
    const m = parseMeasurementManifest({ image_tag: 'x', pcrs: { '9': [a, b], '3': [] } });
    let pcr9 = Buffer.alloc(32);
    for (const x of [a, b]) pcr9 = createHash('sha256').update(pcr9).update(Buffer.from(x, 'hex')).digest();
    const values = expectedPcrValues(m);
    expect([...values.keys()]).toEqual([3, 9]);
    expect(values.get(9)).toBe(pcr9.toString('hex'));
    expect(values.get(3)).toBe('0'.repeat(64));
  });

  it('keeps the SNP measurement and description, ignores members it does not know', () => {
    const m = parseMeasurementManifest(
      JSON.stringify({
        image_tag: 't',
        description: 'x',
        pcrs: {},
        snp_measurement: 'AB'.repeat(48),
        future: 1,
      }),
    );
    expect(m.snpMeasurement?.toString('hex')).toBe('ab'.repeat(48));
    expect(m.description).toBe('x');
  });

  it.each([
    ['not JSON', '{'],
    ['an array', '[]'],
    ['null', 'null'],
    ['no image tag', JSON.stringify({ pcrs: {} })],
    ['an empty image tag', JSON.stringify({ image_tag: '', pcrs: {} })],
    ['a long image tag', JSON.stringify({ image_tag: 'x'.repeat(257), pcrs: {} })],
    ['no pcrs', JSON.stringify({ image_tag: 't' })],
    ['pcrs as an array', JSON.stringify({ image_tag: 't', pcrs: [] })],
    ['PCR 8', JSON.stringify({ image_tag: 't', pcrs: { '8': [] } })],
    ['PCR 17', JSON.stringify({ image_tag: 't', pcrs: { '17': [] } })],
    ['PCR 24', JSON.stringify({ image_tag: 't', pcrs: { '24': [] } })],
    ['a named PCR key', JSON.stringify({ image_tag: 't', pcrs: { pcr3: [] } })],
    ['a negative PCR key', JSON.stringify({ image_tag: 't', pcrs: { '-1': [] } })],
    ['the same PCR twice', JSON.stringify({ image_tag: 't', pcrs: { '3': [], '03': [] } })],
    ['digests not in a list', JSON.stringify({ image_tag: 't', pcrs: { '3': d('x') } })],
    ['a short digest', JSON.stringify({ image_tag: 't', pcrs: { '3': ['ab'] } })],
    ['a SHA-384 digest', JSON.stringify({ image_tag: 't', pcrs: { '3': ['ab'.repeat(48)] } })],
    ['a non-hex digest', JSON.stringify({ image_tag: 't', pcrs: { '3': ['zz'.repeat(32)] } })],
    ['a number as digest', JSON.stringify({ image_tag: 't', pcrs: { '3': [1] } })],
    [
      'too many digests',
      JSON.stringify({ image_tag: 't', pcrs: { '3': Array(MAX_DIGESTS_PER_PCR + 1).fill(d('x')) } }),
    ],
    ['a bad SNP measurement', JSON.stringify({ image_tag: 't', pcrs: {}, snp_measurement: 'ab' })],
    ['a description that is not text', JSON.stringify({ image_tag: 't', pcrs: {}, description: 1 })],
    ['oversize text', ' '.repeat(MAX_MANIFEST_BYTES + 1)],
  ])('refuses %s', (_what, text) => {
    expect(() => parseMeasurementManifest(text)).toThrow(MockTeeError);
  });

  it('refuses an oversize file before reading it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mock-tee-manifest-'));
    try {
      const path = join(dir, 'big.json');
      await writeFile(path, 'x'.repeat(MAX_MANIFEST_BYTES + 1));
      await expect(loadMeasurementManifest(path)).rejects.toThrow(/larger than/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
