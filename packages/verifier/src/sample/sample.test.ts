import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { SAMPLE_MAX_REPORT_DATA_LENGTH, SAMPLE_MAX_SVN_LENGTH, SampleVerifier } from './index.js';

const digest = createHash('sha384').update('runtime data').digest();
const b64 = digest.toString('base64');
const verifier = new SampleVerifier();

async function failure(evidence: unknown, reportData: Uint8Array = digest): Promise<VerificationError> {
  try {
    await verifier.evaluate(evidence, { reportData });
  } catch (e) {
    expect(e).toBeInstanceOf(VerificationError);
    return e as VerificationError;
  }
  throw new Error('evaluate succeeded');
}

describe('sample verifier', () => {
  it("returns trustee's sample claims, class cpu", async () => {
    const out = await verifier.evaluate({ svn: '1', report_data: b64 }, { reportData: digest });
    expect(out).toEqual([
      {
        class: 'cpu',
        claims: {
          svn: '1',
          report_data: b64,
          launch_digest: 'abcde',
          platform_version: { major: 1, minor: 4 },
          debug: false,
        },
      },
    ]);
  });

  it('exposes the initdata digest as standard base64 without checking it', async () => {
    const hash = createHash('sha256').update('initdata').digest();
    const [r] = await verifier.evaluate(
      { svn: '7', report_data: b64 },
      { reportData: digest, initDataHash: hash },
    );
    expect(r?.claims.init_data).toBe(hash.toString('base64'));
    expect(r?.claims.svn).toBe('7');
  });

  it('respects a Uint8Array view into a larger buffer for the initdata digest', async () => {
    const backing = new Uint8Array([0xff, 1, 2, 3, 0xff]);
    const [r] = await verifier.evaluate(
      { svn: '1', report_data: b64 },
      { reportData: digest, initDataHash: backing.subarray(1, 4) },
    );
    expect(r?.claims.init_data).toBe('AQID');
  });

  it('ignores unknown evidence members, as serde does', async () => {
    const out = await verifier.evaluate(
      { svn: '1', report_data: b64, extra: { x: 1 } },
      { reportData: digest },
    );
    expect(out).toHaveLength(1);
  });

  it('skips the report data check only when told it was not provided (trustee ReportData::NotProvided)', async () => {
    const ev = { svn: '1', report_data: b64 };
    const out = await verifier.evaluate(ev, { reportData: new Uint8Array(0), reportDataNotProvided: true });
    expect(out[0]?.claims.report_data).toBe(b64);
    expect((await failure(ev, new Uint8Array(0))).code).toBe('REPORT_DATA_MISMATCH');
  });

  it('rejects a report data that differs by one bit', async () => {
    const other = Buffer.from(digest);
    other[47] = (other[47] ?? 0) ^ 1;
    const e = await failure({ svn: '1', report_data: other.toString('base64') });
    expect(e.code).toBe('REPORT_DATA_MISMATCH');
  });

  it('requires the exact digest: a zero-padded 64-byte report data does not match', async () => {
    const padded = Buffer.concat([digest, Buffer.alloc(16)]);
    expect((await failure({ svn: '1', report_data: padded.toString('base64') })).code).toBe(
      'REPORT_DATA_MISMATCH',
    );
    expect((await failure({ svn: '1', report_data: b64 }, padded)).code).toBe('REPORT_DATA_MISMATCH');
  });

  it('treats a missing report_data as empty, which never matches a digest', async () => {
    expect((await failure({ svn: '1' })).code).toBe('REPORT_DATA_MISMATCH');
  });

  it.each([
    ['null', null],
    ['a string', 'svn'],
    ['an array', ['1', b64]],
    ['a number', 42],
  ])('rejects evidence that is %s', async (_name, ev) => {
    expect((await failure(ev)).code).toBe('EVIDENCE_MALFORMED');
  });

  it.each([
    ['missing svn', { report_data: b64 }],
    ['numeric svn', { svn: 1, report_data: b64 }],
    ['null svn', { svn: null, report_data: b64 }],
    ['numeric report_data', { svn: '1', report_data: 5 }],
    ['null report_data', { svn: '1', report_data: null }],
  ])('rejects %s', async (_name, ev) => {
    expect((await failure(ev)).code).toBe('EVIDENCE_MALFORMED');
  });

  it.each([
    ['base64url alphabet', Buffer.from([0xfb, 0xff, 0xbf]).toString('base64url')],
    ['missing padding', 'AQI'],
    ['non-canonical trailing bits', 'AQJ='],
    ['embedded whitespace', `${b64.slice(0, 8)} ${b64.slice(8)}`],
    ['garbage', '!!!!'],
  ])('rejects report_data in %s', async (_name, rd) => {
    expect((await failure({ svn: '1', report_data: rd })).code).toBe('EVIDENCE_MALFORMED');
  });

  it('rejects oversize members before decoding them', async () => {
    const bigSvn = 'x'.repeat(SAMPLE_MAX_SVN_LENGTH + 1);
    expect((await failure({ svn: bigSvn, report_data: b64 })).code).toBe('EVIDENCE_TOO_LARGE');
    const bigRd = 'A'.repeat(SAMPLE_MAX_REPORT_DATA_LENGTH + 4);
    expect((await failure({ svn: '1', report_data: bigRd })).code).toBe('EVIDENCE_TOO_LARGE');
  });

  it('does not read inherited members', async () => {
    const ev = Object.create({ svn: '1', report_data: b64 }) as object;
    expect((await failure(ev)).code).toBe('EVIDENCE_MALFORMED');
  });

  it('keeps the error message bounded for a hostile member name', async () => {
    const e = await failure({ svn: '1', report_data: '%'.repeat(SAMPLE_MAX_REPORT_DATA_LENGTH) });
    expect(e.message.length).toBeLessThan(200);
  });
});
