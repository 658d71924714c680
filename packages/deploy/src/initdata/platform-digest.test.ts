// `initdata digest --tee`: the initdata digest as kata binds it on a bare-metal TEE (kata-types'
// `adjust_digest`: cut or zero-padded at the end to SNP HOSTDATA 32 bytes, TDX MRCONFIGID 48, CCA 64).
import { createHash } from 'node:crypto';
import { initDataReportField } from '@broker/protocol';
import { describe, expect, it } from 'vitest';
import { memoryIO } from '../testing/memory-io.js';
import { initdataMain } from './cli.js';

const doc = (alg: string) => `algorithm = "${alg}"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = ""\n`;
const digestOf = (alg: string) => createHash(alg).update(doc(alg)).digest();

async function initdata(...argv: string[]) {
  const io = memoryIO({ 'i.toml': doc(argv.shift() as string) });
  const code = await initdataMain(['digest', 'i.toml', ...argv], io);
  return { code, out: io.stdout.trim(), err: io.stderr };
}

describe('initdata digest --tee: the field kata binds', () => {
  it.each([
    // [initdata algorithm, TEE, field length]: longer digests are cut, shorter ones zero-padded.
    ['sha256', 'snp', 32],
    ['sha384', 'snp', 32],
    ['sha512', 'snp', 32],
    ['sha256', 'tdx', 48],
    ['sha384', 'tdx', 48],
    ['sha512', 'tdx', 48],
    ['sha256', 'cca', 64],
    ['sha384', 'cca', 64],
    ['sha512', 'cca', 64],
  ] as const)('%s on %s: %i bytes', async (alg, tee, bytes) => {
    const d = digestOf(alg);
    const expected = Buffer.alloc(bytes);
    d.copy(expected, 0, 0, Math.min(bytes, d.length));
    const r = await initdata(alg, '--tee', tee);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toBe(expected.toString('hex'));
    expect((await initdata(alg)).out).toBe(d.toString('hex'));
  });

  it("kata's own adjust_digest cases (0xAA×64 cut to 48 and 32; 0xBB×32 padded to 64)", async () => {
    expect(initDataReportField(Buffer.alloc(64, 0xaa), 48)).toEqual(Buffer.alloc(48, 0xaa));
    expect(initDataReportField(Buffer.alloc(64, 0xaa), 32)).toEqual(Buffer.alloc(32, 0xaa));
    expect(initDataReportField(Buffer.alloc(32, 0xbb), 64)).toEqual(
      Buffer.concat([Buffer.alloc(32, 0xbb), Buffer.alloc(32)]),
    );
  });

  it('refuses a TEE without such a field, naming pcr8 for the vTPM ones', async () => {
    const r = await initdata('sha256', '--tee', 'az-snp-vtpm');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/use snp, tdx or cca .*initdata pcr8/);
  });
});
