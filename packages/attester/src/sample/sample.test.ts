import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SampleAttester, sampleModule } from './index.js';

describe('sample attester', () => {
  it('produces guest-components sample evidence: svn "1" and standard base64 report data', async () => {
    const digest = createHash('sha384').update('runtime data').digest();
    const ev = await new SampleAttester().getEvidence(digest);
    expect(JSON.stringify(ev)).toBe(`{"svn":"1","report_data":"${digest.toString('base64')}"}`);
  });

  it('encodes the bytes as given: no padding to 64 bytes, standard alphabet with = padding', async () => {
    const bytes = new Uint8Array([0xfb, 0xff, 0xfe, 0x01]);
    const ev = await new SampleAttester().getEvidence(bytes);
    expect(ev.report_data).toBe('+//+AQ==');
  });

  it('round-trips the way trustee sample verifier checks report data', async () => {
    const digest = createHash('sha384').update('x').digest();
    const ev = await new SampleAttester().getEvidence(digest);
    expect(Buffer.from(ev.report_data, 'base64').equals(digest)).toBe(true);
  });

  it('respects the view of a Uint8Array into a larger buffer', async () => {
    const backing = new Uint8Array([9, 9, 1, 2, 3, 9]);
    const ev = await new SampleAttester().getEvidence(backing.subarray(2, 5));
    expect(ev.report_data).toBe(Buffer.from([1, 2, 3]).toString('base64'));
  });

  it('is always detectable', async () => {
    const d = await sampleModule.detect({ env: {}, exists: async () => false });
    expect(d.detected).toBe(true);
    expect(sampleModule.create({}).tee).toBe('sample');
  });
});
